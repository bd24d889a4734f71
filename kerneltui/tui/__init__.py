"""The Textual browser of one trace (`kerneltui open`) and the widgets the diff screen reuses."""

import os

# Textual paints one update period after the app goes idle: 16.7 ms of every keystroke at its default
# 60 fps. Nothing here animates, so a shorter period is pure latency saved (TEXTUAL_FPS still overrides).
# Set before textual is imported: its constants read the environment once.
os.environ.setdefault("TEXTUAL_FPS", "120")
