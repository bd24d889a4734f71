"""Chrome's duration events written as begin/end pairs ("B" ... "E"), turned into complete ("X") ones.

Kineto writes only "X"; other producers (the TF trace viewer, hand-made tools)
write pairs. Per thread, an "E" closes the latest open "B", in file order (the
format's rule: ts ties are common, and file order settles them). Unpaired
halves are counted, never guessed.
"""

from __future__ import annotations

from kerneltui.trace.repair import Losses


def pair_begin_end(events: list, losses: Losses) -> list:
    """B/E events (decoder structs, in file order) -> X events with a duration."""
    open_by_lane: dict[tuple, list] = {}
    out = []
    for e in events:
        lane = (e.pid, e.tid)
        if e.ph == "B":
            open_by_lane.setdefault(lane, []).append(e)
            continue
        stack = open_by_lane.get(lane)
        if not stack:
            losses.events["'E' without its 'B'"] += 1
            continue
        begin = stack.pop()
        if not e.ts >= begin.ts:  # NaN or backwards: no duration to give it
            losses.events["'E' before its 'B'"] += 1
            continue
        begin.ph = "X"
        begin.dur = e.ts - begin.ts
        if begin.args is None and e.args is not None:
            begin.args = e.args  # the format merges the end's args into the slice
        out.append(begin)
    unclosed = sum(len(stack) for stack in open_by_lane.values())
    if unclosed:
        losses.events["'B' never ended"] += unclosed
    return out
