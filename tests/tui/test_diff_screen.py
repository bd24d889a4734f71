"""The diff screen on real traces: what it says, what each key does, and how it looks (snapshots)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import load_trace
from kerneltui.tui.diff.app import build_app
from kerneltui.tui.diff.panels import RowPanel, VerdictPanel
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.diff.table import MatchTable
from kerneltui.tui.diff.timelines import PairedTimelines
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.screens.loading import LoadingScreen
from tests.tui.helpers import wait_for_diff
from tests.conftest import PROJECT_TRACES, shared_trace

EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
COMPILED = PROJECT_TRACES / "add_relu_1M_compiled.json.gz"


def pair(workload: str):
    return shared_trace(f"{workload}_eager"), shared_trace(f"{workload}_compiled")


@asynccontextmanager
async def opened(a=EAGER, b=COMPILED, size=(80, 24), loader=None):
    app = build_app(str(a), str(b)) if loader is None else build_app(str(a), str(b), loader)
    async with app.run_test(size=size) as pilot:
        await wait_for_diff(pilot)
        yield app, pilot


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def timelines(app):
    return app.screen.query_one(PairedTimelines).timelines


async def test_example_pair_says_plainly_two_kernels_to_one_and_five_transfers_to_three():
    async with opened() as (app, pilot):
        assert isinstance(app.screen, DiffScreen)
        assert text_of(app, "#diff-headline") == "2 kernels → 1 per call · 5 array-sized transfers → 3"
        assert text_of(app, "#diff-verdict") == (
            "B is 1.68x faster (GPU time per call 4.26 → 2.53 µs). Every profiled call of A and B held the"
            " profiler's start-up, so whether the CPU decides is unknown.")
        table = app.screen.query_one(MatchTable)
        assert table.row_count() == 1
        assert table.cells(0) == [
            "add + clamp_min → triton_poi_fused_add_relu_0", "fused·high", "2 → 1", "4.26 → 2.53", "-1.73",
            "20.0 MB → 12.0 MB", "4,699 GB/s 98%! → 4,747 GB/s 99%",
        ]
        detail = text_of(app, "#match-detail")
        # the reason is cut after a whole clause at 80 columns, and says where the rest is
        assert detail.startswith("fused · high: all of the forward's kernels on both sides … (⏎ the row)\n")
        # the sides at 80x24: GPU time and span; a single profiled call has no span
        widget = app.screen.query_one("#diff-sides")
        sides = "\n".join(line.text for line in widget.render_lines(widget.region.reset_offset))
        assert "4.26µs · unknown" in sides and "2.53µs · unknown" in sides


async def test_sides_show_the_same_numbers_as_the_report():
    async with opened(size=(200, 50)) as (app, pilot):
        sides = app.screen.query_one("#diff-sides")
        lines = [line.text.rstrip() for line in sides.render_lines(sides.region.reset_offset)]
        text = "\n".join(lines)
        for fact in ("2 per call", "1 per call", "0.50x", "4.26µs/call", "2.53µs/call", "unknown (start-up in every call)",
                     "dispatch 185.8µs/call", "dispatch 664.4µs/call", "profiled",
                     "0.59x", "5 transfers = 20.0 MB", "3 transfers = 12.0 MB", "0.60x",
                     "4,699 GB/s, 98% of peak", "NVIDIA H200", "1 (whole trace)"):
            assert fact in text, fact
        assert "busy" not in text  # GPU busy of the profiler's window is no figure to read


async def test_launch_bound_is_stated_not_a_speed_up():
    async with opened(*pair("add_relu_100")) as (app, pilot):
        verdict = app.screen.query_one("#diff-verdict")
        assert verdict.has_class("-slower")
        # four lines of verdict do not fit 80x24: its one-line form, never a sentence cut in two
        assert text_of(app, "#diff-verdict") == ("CPU-bound: B slower end to end, at least 1.20x (CPU ops 37.6 → 152.2 "
                                                 "µs)  i: the whole verdict")
    async with opened(*pair("add_relu_100"), size=(120, 40)) as (app, pilot):
        assert text_of(app, "#diff-verdict").startswith("CPU-bound: B's GPU time fell 1.89 → 0.72 µs per call")
        assert "B is slower end to end, at least 1.20x" in text_of(app, "#diff-verdict")


async def test_i_opens_the_verdict_as_a_panel_that_escape_and_i_close():
    async with opened(*pair("add_relu_100")) as (app, pilot):
        await pilot.press("i")
        panel = app.screen
        assert isinstance(panel, VerdictPanel)
        text = " ".join(panel.plain(200).split())
        assert "CPU-bound: B's GPU time fell 1.89 → 0.72 µs per call, but launching takes 37.6 → 152.2 µs" in text
        assert "span/call" in text and "distorted" in text
        await pilot.press("i")  # its own key closes it: a second press never stacks another
        assert isinstance(app.screen, DiffScreen)
        await pilot.press("i")
        await pilot.press("escape")
        assert isinstance(app.screen, DiffScreen)


async def test_timelines_start_aligned_on_one_scale_and_zoom_together():
    async with opened(*pair("add_relu_100")) as (app, pilot):
        a, b = timelines(app)
        pair_widget = app.screen.query_one(PairedTimelines)
        assert pair_widget.call == 1  # the second call: the first absorbs profiler start-up
        assert a.window == b.window and a.bounds == b.bounds
        assert a.window[0] <= 0 < a.window[1]
        before = a.window
        await pilot.press("plus")  # from the table: both zoom
        assert a.window == b.window and a.window[1] - a.window[0] < before[1] - before[0]
        await pilot.press("tab")  # timeline A: its own keys, B follows
        assert app.focused is a
        await pilot.press("full_stop")
        assert a.window == b.window != before
        await pilot.press("tab", "minus")  # timeline B: A follows
        assert app.focused is b and a.window == b.window


async def test_s_switches_each_side_to_its_own_scale():
    async with opened(*pair("add_relu_100")) as (app, pilot):
        a, b = timelines(app)
        await pilot.press("s")
        pair_widget = app.screen.query_one(PairedTimelines)
        assert not pair_widget.linked
        view = pair_widget.view
        # each fits its own call: B's call (CPU overhead before its one kernel) is longer than A's
        assert a.window != b.window
        assert pair_widget.border_title.startswith("own scales")
        await pilot.press("tab", "plus")
        assert a.window != b.window  # unlinked: B stays
        b_before = b.window
        await pilot.press("full_stop")
        assert b.window == b_before
        await pilot.press("s")
        assert pair_widget.linked and a.window == b.window
        assert view.default_call == 1


async def test_next_and_previous_call_realign_both_sides():
    async with opened(*pair("add_relu_100")) as (app, pilot):
        pair_widget = app.screen.query_one(PairedTimelines)
        await pilot.press("c")
        assert pair_widget.call == 2 and "call 3" in pair_widget.border_title
        await pilot.press("c")
        assert pair_widget.call == 2  # clamped to the calls both sides have
        await pilot.press("C", "C", "C")
        assert pair_widget.call == 0


async def test_moving_the_cursor_marks_the_rows_kernels_on_both_timelines():
    async with opened(*pair("mlp_bf16"), size=(200, 50)) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        a, b = timelines(app)
        names = [table.cells(i)[0] for i in range(table.row_count())]
        gelu = names.index("gelu → triton_poi_fused_gelu_view_1")
        table.move_cursor(gelu)
        await pilot.pause()
        # three calls: the eager GELU kernel and the fused one, three launches each
        assert int(a._marked.sum()) == 3 and int(b._marked.sum()) == 3


async def test_enter_opens_the_row_with_both_sides_kernels():
    async with opened(*pair("mlp_bf16"), size=(80, 24)) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        names = [table.cells(i)[0] for i in range(table.row_count())]
        table.move_cursor(names.index("gelu → triton_poi_fused_gelu_view_1"))
        await pilot.pause()
        await pilot.press("enter")
        panel = app.screen
        assert isinstance(panel, RowPanel)
        text = panel.plain(200)
        assert "why: what A ran between two library calls, and what B ran between the same two" in text
        # A's GELU kernel and B's fused one, with the op, the source line and module (with_stack), µs, bytes
        assert "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]" in text
        assert "op aten::gelu" in text
        assert "gpu_corpus.py(" in text and "MLP_0" in text
        assert "triton_poi_fused_gelu_view_1" in text
        await pilot.press("escape")
        assert isinstance(app.screen, DiffScreen)


async def test_z_on_a_row_zooms_both_timelines_to_its_kernels():
    async with opened(*pair("mlp_bf16"), size=(200, 50)) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        a, b = timelines(app)
        names = [table.cells(i)[0] for i in range(table.row_count())]
        table.move_cursor(names.index("gelu → triton_poi_fused_gelu_view_1"))
        await pilot.pause()
        whole = a.window
        await pilot.press("z")
        await pilot.pause()
        view = app.screen.view
        spans = []
        for side, m_rows in ((view.a, table.row(table.cursor).a_rows), (view.b, table.row(table.cursor).b_rows)):
            rows = [r for r in m_rows if side.iteration[r] == 1]  # the call shown: the second
            align = side.calls[1][0]
            spans.append((min(side.starts[rows]) - align, max(side.ends[rows]) - align))
        start, end = min(s[0] for s in spans), max(s[1] for s in spans)
        assert a.window == b.window  # one time scale: the same span on both
        assert a.window[0] <= start and end <= a.window[1]
        assert a.window[1] - a.window[0] < (whole[1] - whole[0]) / 3  # zoomed in on the GELU, not the call
        await pilot.press("r")
        assert a.window == whole


async def test_sort_by_delta_and_back():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        await pilot.press("end", "d")
        deltas = [float(table.cells(i)[4]) for i in range(table.row_count())]
        assert deltas == sorted(deltas) and deltas[0] == -22.99  # the layer norm gains most
        assert table.sort_column == "delta"
        assert table.cursor == 0 and table.scroll_offset.y == 0  # the largest delta is in sight, selected
        await pilot.press("d")
        deltas = [float(table.cells(i)[4]) for i in range(table.row_count())]
        assert deltas == sorted(deltas, reverse=True) and table.sort_reverse
        await pilot.press("m")
        assert [table.cells(i)[1] for i in range(table.row_count())][:2] == ["same·high", "fused·high"]
        await pilot.press("a")  # by name
        names = [table.cells(i)[0] for i in range(table.row_count())]
        assert names == sorted(names) and table.sort_column == "name" and table.cursor == 0


async def test_help_lists_every_key():
    async with opened() as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        text = "\n".join(line.text for line in keys.render_lines(keys.region.reset_offset))
        for words in ("Switch scale", "Next call", "Sort by Δ", "Zoom in", "Pan left", "fused"):
            assert words in text, words
        await pilot.press("escape")
        assert isinstance(app.screen, DiffScreen)


async def test_a_bad_file_is_one_line_and_exit_2():
    def loader(path, progress=None):
        if "compiled" in str(path):
            raise TraceError(f"{path}: not a trace (no traceEvents)")
        return load_trace(path, progress)

    async with opened(loader=loader) as (app, pilot):
        assert isinstance(app.screen, LoadingScreen)
        assert app.error == f"{COMPILED}: not a trace (no traceEvents)"
        assert f"kerneltui: {COMPILED}: not a trace" in text_of(app, "#loading-title")
        await pilot.press("q")
    assert app.return_code == 2


async def test_self_diff_shows_every_kernel_unchanged():
    trace = shared_trace("norm_chain_eager")
    async with opened(trace, trace, size=(120, 40)) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        assert {table.cells(i)[1] for i in range(table.row_count())} == {"same·high"}
        assert {table.cells(i)[4] for i in range(table.row_count())} == {"+0.00"}
        assert text_of(app, "#diff-verdict").startswith("GPU time unchanged")


# -- snapshots: pictures someone looked at (docs/screenshots/diff*.svg are the same screens) --------
async def _ready(pilot) -> None:
    await wait_for_diff(pilot)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_snapshot_example_pair(snap_compare, size):
    assert snap_compare(build_app(str(EAGER), str(COMPILED)), terminal_size=size, run_before=_ready)


def test_snapshot_launch_bound_80x24(snap_compare):
    a, b = pair("add_relu_100")
    assert snap_compare(build_app(str(a), str(b)), terminal_size=(80, 24), run_before=_ready)


def test_snapshot_mlp_wide(snap_compare):
    a, b = pair("mlp_bf16")
    assert snap_compare(build_app(str(a), str(b)), terminal_size=(200, 50), run_before=_ready)


async def test_search_filters_rows_n_walks_them_and_b_goes_back():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        screen = app.screen
        table = screen.query_one(MatchTable)
        everything = table.row_count()
        await pilot.press("slash", *"gelu", "enter")
        names = [table.cells(i)[0] for i in range(table.row_count())]
        assert table.row_count() < everything and all("gelu" in h.lower() for h in
                                                        (screen.view.haystack[i] for i in table.order))
        assert str(table.border_title) == f"{table.row_count()} of {everything} rows match · rows: largest change first"
        first = table.current_match()
        await pilot.press("n")
        assert table.row_count() == 1 or table.current_match() != first
        await pilot.press("N")
        assert table.current_match() == first
        await pilot.press("b", "b")
        assert table.current_match() == first
        await pilot.press("escape")
        assert table.row_count() == everything and names


async def test_the_sort_is_said_in_words_and_its_arrow_points_the_way_values_go():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        # the rows arrive largest change (|Δ|) first: the Δ column's arrow points down, and the title says so
        assert str(table.border_title) == "rows: largest change first"
        assert (table.sort_column, table.sort_arrow()) == ("delta", "▼")
        await pilot.press("d")
        assert str(table.border_title) == "rows: largest saving first"
        assert (table.sort_column, table.sort_arrow()) == ("delta", "▲")
        deltas = [table.row(i).delta_ns for i in range(table.row_count())]
        assert deltas == sorted(deltas)
        await pilot.press("d")
        assert str(table.border_title) == "rows: largest loss first"
        await pilot.press("m")  # the match column is hidden at 80 columns: the title still says it
        assert str(table.border_title) == "rows: by match"


async def test_y_copies_the_rows_full_kernel_names():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        await pilot.press("y")
        m = table.row(table.cursor)
        assert app.clipboard.splitlines() == ([f"A: {k}" for k in dict.fromkeys(m.a_keys)]
                                              + [f"B: {k}" for k in dict.fromkeys(m.b_keys)])


async def test_a_kernel_picked_on_a_timeline_selects_its_row_and_enter_returns_to_the_table():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        screen = app.screen
        table = screen.query_one(MatchTable)
        await pilot.press("tab")
        timeline = screen.query_one("#timeline-a")
        assert app.focused is timeline
        await pilot.press("right", "right")
        row = screen.view.row_of("A", timeline.selected)
        assert row >= 0 and table.current_match() == row
        await pilot.press("enter")
        assert app.focused is table and table.current_match() == row


async def test_clicking_a_row_selects_it():
    async with opened(*pair("mlp_bf16"), size=(120, 40)) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        # the table has a top border: its first row is two lines below the widget's top
        await pilot.click(MatchTable, offset=(5, 4))
        assert table.cursor == 2


async def test_every_diff_key_is_in_the_palette():
    from textual.binding import Binding
    from textual.markup import escape

    from kerneltui.tui.screens.help import key_text

    async with opened(*pair("mlp_bf16")) as (app, pilot):
        titles = {str(c.title) for c in app.get_system_commands(app.screen)}
        listed = [b for _, items in app.screen.key_sections() for b in items
                  if isinstance(b, Binding) and b.action != "command_palette"]
        for b in listed:
            assert escape(f"{b.description} · {key_text(b)}") in titles, b.id


def test_the_matched_table_switches_to_ms_once_a_row_reaches_10ms():
    a, b = (load_trace(p) for p in pair("mlp_bf16"))
    from kerneltui.tui.diff.model import build_view

    matches = build_view(a, b).diff.matches
    small = MatchTable(matches)
    assert [c.label for c in small.columns()][3:5] == ["GPU µs/call", "Δ µs"]
    big = matches.assign(a_ns=matches["a_ns"] * 1000, b_ns=matches["b_ns"] * 1000,
                         delta_ns=matches["delta_ns"] * 1000)
    table = MatchTable(big)
    assert [c.label for c in table.columns()][3:5] == ["GPU ms/call", "Δ ms"]
    first = table.cells(0)
    assert first[3] == f"{big['a_ns'].iat[0] / 1e6:,.3f} → {big['b_ns'].iat[0] / 1e6:,.3f}"


async def test_sort_keys_work_from_a_focused_timeline():
    async with opened(*pair("mlp_bf16")) as (app, pilot):
        table = app.screen.query_one(MatchTable)
        await pilot.press("tab")
        assert app.focused.id == "timeline-a"
        await pilot.press("d")
        deltas = [float(table.cells(i)[4]) for i in range(table.row_count())]
        assert table.sort_column == "delta" and deltas == sorted(deltas)


async def test_T_shows_forward_and_backward_per_module_a_to_b():
    async with opened(*pair("mlp_bf16"), size=(100, 30)) as (app, pilot):
        await pilot.press("T")
        text = app.screen.plain(98)
        assert "A: by nn.Module frames (with_stack)" in text
        assert "B: compiled code as one place, the whole model: no provenance record" in " ".join(text.split())
        assert "whole model (compiled region)" in text and "MLP_0.Linear_0" in text
        await pilot.press("T")  # its own key closes it
        assert isinstance(app.screen, DiffScreen)
