"""The timeline's lanes cut to a search's keep mask, for the browser.

A search typed over a million launches keeps a new mask on every key, and cutting the big
lanes to it costs ~20 ms at 2M lane intervals (``filter_lanes``), as much as the rest of
the key. Big lanes are therefore cut on a thread, after the key's repaint (on two cores a
cut beside the key's own work slows both): the table and counts come first, and the
timeline follows when its lanes are ready. Cuts already made (the last two masks: backspace
to a search typed a moment ago), small lanes and a mask that keeps nothing are given at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from kerneltui.trace.threads import in_background
from kerneltui.tui.lanes import Lane, filter_lanes

BACKGROUND_FROM = 200_000  # lane intervals in all: below this a cut (~2 ms) is done before the repaint
KEPT = 2  # each cut holds copies of the big lanes: the last two masks'


class LaneCuts:
    """The cuts of one set of lanes, by keep mask (the very object: a query's cache returns the same
    mask for the same search, so identity is enough)."""

    def __init__(self, lanes: Sequence[Lane]) -> None:
        self.lanes = list(lanes)
        self._made: dict[int, tuple[np.ndarray, list[Lane]]] = {}
        self._big = sum(len(lane) for lane in self.lanes) >= BACKGROUND_FROM

    def ready(self, keep: np.ndarray | None) -> list[Lane] | None:
        """The lanes cut to ``keep`` when that is at hand (made before, nothing to cut, or small lanes);
        None when the cut belongs on a thread (``cut``)."""
        if keep is None:
            return list(self.lanes)
        made = self._made.get(id(keep))
        if made is not None and made[0] is keep:
            return made[1]
        if self._big and keep.any():  # (nothing kept: the cut is one gather, and nothing is left to draw)
            return None
        return self._keep(keep, filter_lanes(self.lanes, keep))

    async def cut(self, keep: np.ndarray, codes: np.ndarray | None = None) -> list[Lane]:
        """The lanes cut to ``keep`` on a thread (the event loop goes on meanwhile), with ``codes`` (the
        underline's group codes, ``Lane.codes_of``) gathered for them there too, not at the repaint."""
        made = self.ready(keep)
        if made is not None:
            return made
        (future,) = in_background([_cut], self.lanes, keep, codes, name="kerneltui-lane-cut")
        return self._keep(keep, await asyncio.wrap_future(future))

    def _keep(self, keep: np.ndarray, lanes: list[Lane]) -> list[Lane]:
        self._made[id(keep)] = (keep, lanes)
        while len(self._made) > KEPT:
            self._made.pop(next(iter(self._made)))
        return lanes


def _cut(lanes: Sequence[Lane], keep: np.ndarray, codes: np.ndarray | None) -> list[Lane]:
    made = filter_lanes(lanes, keep)
    if codes is not None:
        for lane in made:
            lane.codes_of(codes)  # kept by the lane for the repaint
    return made
