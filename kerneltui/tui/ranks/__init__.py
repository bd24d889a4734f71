"""`kerneltui open DIR` (or several rank files): a multi-rank job, a row and a timeline lane per rank.

app.py loads the job (analysis/ranks) in a thread worker and opens a rank in the browser;
screen.py is the ranks screen; model.py and paint.py compute its text and lanes without Textual.
"""
