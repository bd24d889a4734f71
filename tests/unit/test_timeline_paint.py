"""The timeline's rows as text, without Textual: ticks, steps, selection, flow, range, hints."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import Lane
from kerneltui.tui.timeline_paint import (
    Grid,
    LaneView,
    axis_row,
    hidden_hint,
    lane_base,
    lane_row,
    marked_cells,
    short_step_label,
    step_row,
    ticks,
    with_hint,
)
from kerneltui.units import fmt_tick, tick_unit

UNITS = {"ns": 1, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
TICK = re.compile(r"╵(-?[\d,]+(?:\.\d+)?)(ns|µs|ms|s)?")


def text(runs) -> str:
    return "".join(chunk for chunk, _ in runs)


def parse(label: str, unit: str | None) -> int:
    """A tick label back to ns, exactly (no floats)."""
    if unit is None:
        assert label == "0"
        return 0
    whole, _, frac = label.replace(",", "").partition(".")
    size = UNITS[unit]
    return int(whole) * size + (int(frac) * size // 10 ** len(frac) if frac else 0)


def lane(key, spans, ids=None, kinds=None, names=None, labels=("k",)) -> Lane:
    starts = np.array([s for s, _ in spans], np.int64)
    ends = np.array([e for _, e in spans], np.int64)
    n = len(spans)
    return Lane(key, key, starts, ends,
                np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, np.int64),
                np.full(n, Kind.KERNEL, np.int8) if kinds is None else np.asarray(kinds, np.int8),
                np.zeros(n, np.int32) if names is None else np.asarray(names, np.int32), labels)


def test_ticks_at_a_15us_span_deep_in_a_trace_differ():
    grid = Grid.of((17_840_000, 17_854_900), 100)
    assert text(axis_row(grid, None)) == (
        "╵17.840ms    ╵17.842ms    ╵17.844ms     ╵17.846ms    ╵17.848ms     ╵17.850ms    ╵17.852ms           "
    )
    assert text(axis_row(Grid.of((0, 14_900), 100), None)).startswith("╵0           ╵2µs         ╵4µs")
    assert text(axis_row(Grid.of((17_840_000, 17_840_200), 100), None)).startswith(
        "╵17.84000ms              ╵17.84005ms")


SPANS = [10, 100, 1_000, 14_900, 200_000, 1_000_000, 37_000_000, 1_000_000_000, 3_000_000_000, 40_000_000_000]
OFFSETS = [0, 17_840_000, 17_842_123, 5_200_000_000]


@pytest.mark.parametrize("plot", [60, 200])
@pytest.mark.parametrize("w0", OFFSETS)
@pytest.mark.parametrize("span", SPANS)
def test_tick_labels_are_distinct_and_parse_back_to_their_column(span, w0, plot):
    grid = Grid.of((w0, w0 + span), plot)
    drawn = text(axis_row(grid, None))
    step, expected = ticks(grid)
    found = [(m.start(), parse(m.group(1), m.group(2))) for m in TICK.finditer(drawn)]
    assert len(found) >= 2, drawn
    values = [v for _, v in found]
    assert len(set(values)) == len(values)
    assert all(b > a for a, b in itertools.pairwise(values))
    for col, value in found:
        assert w0 <= value < w0 + span and value % step == 0
        assert grid.column(value) == col  # the label is the exact time of its tick
    assert {(c, t) for c, t, _ in expected} >= set(found)
    labels = [m.group(0) for m in TICK.finditer(drawn)]
    assert len(set(labels)) == len(labels)


def test_fmt_tick_is_exact_to_the_step():
    unit = tick_unit(17_856_000)
    assert [fmt_tick(t, 2_000, unit) for t in (17_842_000, 17_844_000)] == ["17.842ms", "17.844ms"]
    assert fmt_tick(17_842_010, 10, unit) == "17.84201ms"
    assert fmt_tick(0, 5) == "0"
    assert fmt_tick(500_000_000, 500_000_000, tick_unit(2_500_000_000)) == "0.5s"
    assert fmt_tick(1_234_000_000_000, 1_000_000_000) == "1,234s"
    assert fmt_tick(-3_000, 1_000) == "-3µs"
    assert fmt_tick(750, 50, tick_unit(999)) == "750ns"


def test_step_labels_use_the_traces_numbers():
    grid = Grid.of((0, 100), 20)
    starts, ends = np.array([0, 30, 60], np.int64), np.array([30, 60, 100], np.int64)
    row = text(step_row(grid, starts, ends, ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4")))
    assert row == "├──#2─├──#3─├──#4───"  # ProfilerStep#2 is the first step: "#2", not "1"
    named = text(step_row(grid, starts, ends, ("warmup", "fwd", "bwd")))
    assert named == "├──1──├──2──├─ bwd ─"  # no number in the label: the 1-based index
    tight = text(step_row(Grid.of((0, 100), 10), starts, ends, ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4")))
    assert tight == "├─2├─3├─4─"  # no room for "#": the number alone, still the trace's own
    assert short_step_label("ProfilerStep#12", 0) == "#12"
    assert short_step_label("call", 4) == "5"
    wide = text(step_row(Grid.of((0, 100), 80), starts, ends, ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4")))
    assert " ProfilerStep#2 " in wide and " ProfilerStep#4 " in wide


def test_selected_interval_is_a_glyph_not_a_blank():
    grid = Grid.of((0, 100), 10)
    one = lane("gpu:0:7", [(12, 14), (40, 80)])
    row = lane_row(grid, one, LaneView(selected=0))
    assert text(row) == " ◆  ████  "
    assert ("◆", ("timeline--selected",)) in row
    wide = lane_row(grid, one, LaneView(selected=1))
    assert text(wide) == " ░  ━━━━  "
    assert ("━━━━", ("timeline--selected",)) in wide


def test_labels_in_bars_are_bold_text_not_the_selection():
    grid = Grid.of((0, 100), 20)
    bar = lane("gpu:0:7", [(0, 90)], labels=("aten::addmm",))
    row = lane_row(grid, bar, LaneView())
    assert text(row) == "█aten::addmm██████  "
    assert ("aten::addmm", ("timeline--gpu", "timeline--bar-text")) in row
    selected = lane_row(grid, bar, LaneView(selected=0))
    assert text(selected) == "━aten::addmm━━━━━━  "
    assert all(classes == ("timeline--selected",) for chunk, classes in selected if chunk.strip())


def test_flow_from_launch_call_to_kernel():
    grid = Grid.of((0, 200), 20)
    gpu = lane("gpu:0:7", [(10, 20), (150, 170)], ids=[4, 5])
    cpu = lane("cpu:1", [(5, 8), (40, 50)], ids=[4, 5], kinds=[Kind.RUNTIME] * 2)
    view = LaneView(selected=5, flow_from=40)
    row = lane_row(grid, gpu, view)
    assert text(row) == " █  ╌╌╌╌╌╌╌╌╌╌▸━━   "
    assert ("╌╌╌╌╌╌╌╌╌╌▸", ("timeline--flow",)) in row
    assert text(lane_row(grid, cpu, view)) == "▒   ◆               "
    # none when the kernel starts in the launch call's own cell
    assert "╌" not in text(lane_row(grid, gpu, LaneView(selected=5, flow_from=151)))
    # other work between the call and the kernel stays drawn: only empty cells carry the flow
    busy = lane("gpu:0:7", [(10, 20), (90, 100), (150, 170)], ids=[4, 6, 5])
    assert text(lane_row(grid, busy, view)) == " █  ╌╌╌╌╌█╌╌╌╌▸━━   "


def test_range_on_the_axis_and_in_lanes():
    grid = Grid.of((0, 1_000_000), 40)
    drawn = text(axis_row(grid, None, (250_000, 750_000)))
    assert drawn[10:30] == "├━━━━ 500.0µs ━━━━━┤"
    assert drawn[:10] == "╵0        "
    left = text(axis_row(grid, None, (-500_000, 250_000)))
    assert left.startswith("◀━━━━━━━━┤")
    right = text(axis_row(grid, None, (750_000, 2_000_000)))
    assert right.endswith("├━━━━━━━━▶")
    assert text(axis_row(grid, None, None, anchor=500_000))[20] == "┃"
    row = lane_row(grid, lane("gpu:0:7", [(0, 100_000)]), LaneView(range_=(250_000, 750_000)))
    in_range = [c for chunk, classes in row for c in [classes] * len(chunk)]
    assert [i for i, c in enumerate(in_range) if "timeline--range" in c] == list(range(10, 30))


def test_hidden_lane_hint():
    assert hidden_hint(0, 3, 6) == "+3 lanes ↓"
    assert hidden_hint(5, 1, 7) == "+5↑ +1↓ lanes"
    assert hidden_hint(2, 3, 5) == "+2 lanes ↑"
    assert hidden_hint(0, 4, 4) == ""
    body = [("█" * 20, ("timeline--gpu",))]
    assert text(with_hint(body, "+3 lanes ↓", 20)) == "█████████ +3 lanes ↓"
    assert with_hint(body, "+3 lanes ↓", 20)[-1] == (" +3 lanes ↓", ("timeline--hint",))


def test_a_window_of_decades_cuts_into_cells_without_overflow():
    """A trace with one stray event at ts 0 and the rest at epoch time (torch 1.8 wrote absolute µs) spans
    51 years: cell k's edge, k * span / plot, once overflowed int64 and the browser raised IndexError."""
    end = 1_610_366_662_537_752_000
    grid = Grid.of((0, end), 87)
    assert grid.w0 == 0 and grid.w1 == end and grid.plot == 87
    assert (np.diff(grid.edges) > 0).all()
    assert grid.column(end - 1) == 86 and grid.column(np.int64(end // 2)) == 43
    assert list(Grid.of((10, 110), 4).edges) == [10, 35, 60, 85, 110]


@pytest.mark.parametrize("cpu", [False, True])
def test_marks_drawn_from_a_group_equal_marks_drawn_from_its_mask(cpu):
    """Zoomed out on a big lane, the marked cells come from the group's positions in the lane; they
    must be the cells the mask gives, CPU event ids (negative) never marked."""
    rng = np.random.default_rng(3)
    n = 30_000  # over EXACT_MARKS_UP_TO: the zoomed-out path
    starts = np.sort(rng.integers(0, 10_000_000, n))
    grid = Grid.of((0, 10_000_000), 120)
    ids = np.arange(n, dtype=np.int64)
    if cpu:
        ids[rng.random(n) < 0.3] = -5  # CPU events of an icicle among the launches
    codes = rng.integers(0, 40, n).astype(np.int64)
    first_in_cell = np.searchsorted(starts, grid.edges[1:-1:3])
    codes[first_in_cell] = 50  # only the first interval of every third cell: a boundary off by one shows
    ids[first_in_cell] = first_in_cell
    big = Lane("gpu0", "gpu0", starts, starts + 50, ids, np.full(n, Kind.KERNEL, np.int8), np.zeros(n, np.int32),
               ("k",))
    for code in (0, 7, 39, 50, 99):  # 99: no launch has it
        by_mask = lane_row(grid, big, LaneView(marked=codes == code))
        by_group = lane_row(grid, big, LaneView(marked=codes == code, marked_group=(codes, code)))
        assert by_group == by_mask
        marked = sum("timeline--marked" in classes for chunk, classes in by_group for _ in chunk)
        assert (marked > 30) == (code != 99)


def test_a_row_from_its_kept_base_and_marks_equals_the_row_drawn_whole():
    """The timeline keeps a lane's base (shades, kinds, step marks, names) and its marked cells apart from
    the selection and range drawn over them: the row from those parts is the row drawn at once."""
    rng = np.random.default_rng(5)
    n = 400
    starts = np.sort(rng.integers(0, 1_000_000, n))
    big = lane("gpu:0:7", list(zip(starts.tolist(), (starts + rng.integers(1, 40_000, n)).tolist())),
               kinds=rng.choice([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET], n), labels=("aten::mm", "aten::add"),
               names=rng.integers(0, 2, n))
    codes = rng.integers(0, 9, n).astype(np.int64)
    for window, plot in (((0, 1_040_000), 120), ((200_000, 260_000), 60)):
        grid = Grid.of(window, plot)
        base_view = LaneView(step_starts=np.array([0, 300_000, 700_000]))
        base = lane_base(grid, big, base_view)
        for code, selected, range_ in ((3, 17, None), (5, 250, (210_000, 230_000)), (8, None, (0, 900_000))):
            view = LaneView(selected=selected, marked=codes == code, marked_group=(codes, code),
                            step_starts=base_view.step_starts, range_=range_, flow_from=1_000)
            whole = lane_row(grid, big, view)
            assert lane_row(grid, big, view, base, marked_cells(grid, big, view)) == whole
            assert any("timeline--marked" in classes for _, classes in whole)
