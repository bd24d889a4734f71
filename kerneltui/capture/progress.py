"""The progress line on stderr: rewritten in place on a terminal; a log gets only the lines that stay."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.subject = ""

    def begin(self, subject: str) -> None:
        """What the next stages are about, e.g. `add_relu n=1000000 compiled`."""
        self.subject = subject

    def __call__(self, stage: str) -> None:
        if self.live:  # a log gets only the lines that stay (`finish`)
            self.stream.write(f"\r\x1b[K{self.subject}: {stage}...")  # \x1b[K: erase a longer line's rest
            self.stream.flush()

    def finish(self, line: str) -> None:
        """Replaces the live line with one that stays."""
        self.stream.write(f"\r\x1b[K{line}\n" if self.live else line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
