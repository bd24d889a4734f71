"""How the ranks screen shares its rows between notes, table and timeline (no Textual).

Every rank gets a table row and a lane when they fit (8 ranks fit at 80x24); where there is
room, each lane gets two rows (compute, then communication), and a blank row after them where
there is more; the rows left over go to the timeline. When they do not fit, the table and the timeline share the rows and both scroll
with the table's cursor.
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_ROWS = 4  # header, the selected rank's line, the keys bar, the timeline's top border
TALL_FROM = 36  # rows: more notes
MIN_ROWS = 3


@dataclass(frozen=True)
class RanksLayout:
    notes_rows: int
    table_rows: int  # its header included
    lanes_rows: int  # the axis and the lanes, without the top border
    lane_height: int  # rows per lane: 1, 2 (compute, communication) or 3 (and a blank between ranks)


def ranks_layout(height: int, ranks: int, notes: int) -> RanksLayout:
    tall = height >= TALL_FROM
    notes_rows = min(notes, 5 if tall else 2)
    avail = max(height - FIXED_ROWS - notes_rows, 2 * MIN_ROWS)
    table_wanted = ranks + 1
    for lane_height in (3, 2, 1):
        lanes_wanted = 1 + ranks * lane_height
        if table_wanted + lanes_wanted <= avail:
            return RanksLayout(notes_rows, table_wanted, avail - table_wanted, lane_height)
    lanes = max(min(1 + ranks, avail // 2), MIN_ROWS)
    return RanksLayout(notes_rows, avail - lanes, lanes, 1)
