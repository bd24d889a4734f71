"""Screens: loading (progress or the load error), the browser, and the key help."""
