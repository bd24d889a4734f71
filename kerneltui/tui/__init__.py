"""The Textual browser of one trace (`kerneltui open`) and the widgets the diff screen reuses."""

import os

# Textual paints one update period after the app goes idle: 16.7 ms of every keystroke at its default
# 60 fps. Nothing here animates, so a shorter period is pure latency saved (TEXTUAL_FPS still overrides).
# A key that moves a table or types a search paints twice (the widget, then what its message changed),
# the second a period after the first: at 1M launches, 240 against 120 took the median of a typed
# search character from 21-26 to 16-17 ms (bench_tui, two runs each, alternating).
# Set before textual is imported: its constants read the environment once.
os.environ.setdefault("TEXTUAL_FPS", "240")
