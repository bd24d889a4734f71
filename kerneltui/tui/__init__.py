"""The Textual browser of one trace (`kerneltui open`) and the widgets the diff screen reuses."""
