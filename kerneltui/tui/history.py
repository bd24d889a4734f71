"""Where the user was before a jump, so that one key brings them back (a browser's back button).

No Textual here: a place is whatever a screen needs to restore (the browser's
``Place``: selection, view, window, focus, scope; the diff's row and windows),
and the history only keeps them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

LIMIT = 100  # older places are dropped: nobody goes back a hundred jumps


@dataclass(frozen=True)
class Place:
    selected: int | None  # the selected launch (row of trace.gpu), or None
    view: str  # "kernels" or "launches"
    window: tuple[int, int]  # the timeline's window
    focus: str  # id of the focused pane
    scope: int | None = None  # the step the kernel table is scoped to (None: the whole trace)
    grouping: str = "kernel"


class History:
    def __init__(self) -> None:
        self._places: list = []

    def push(self, place) -> None:
        """Remember where the user was just before a jump (a repeat of the last place is kept once)."""
        if self._places and self._places[-1] == place:
            return
        self._places.append(place)
        del self._places[:-LIMIT]

    def pop(self):
        return self._places.pop() if self._places else None

    def __len__(self) -> int:
        return len(self._places)
