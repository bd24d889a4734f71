"""The browser on real traces: what it shows, and what each key does."""

from __future__ import annotations

from rich.console import Console

from kerneltui.trace import load_trace
from kerneltui.trace.summary import kernel_stats, summarize
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.units import fmt_ns, fmt_share
from tests.conftest import PROJECT_TRACES, shared_trace
from tests.tui.helpers import opened, parts, rows, screen_text

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"
EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"


def mlp():
    return shared_trace("mlp_bf16_eager")


async def test_kernel_table_of_mlp_shows_names_and_counts():
    async with opened(mlp()) as (app, pilot):
        _, table, _, _ = parts(app)
        shown = {r[0]: r[1] for r in rows(table)}
        assert shown == {
            NVJET: "6",
            "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]": "3",
            "vectorized_layer_norm_kernel[bf16]": "3",
            "vectorized_elementwise_kernel<CUDAFunctor_add>[bf16]": "3",
            "Memset (Device)": "6",
        }
        assert rows(table)[0] == [NVJET, "6", "1.07ms", "178.9µs", "178.9µs", "191.2µs"][:4] + rows(table)[0][4:]


async def test_screen_numbers_are_the_engine_numbers():
    """Every kernel row and the header equal kernel_stats and summarize (what `summary --format json` prints)."""
    trace = load_trace(shared_trace("gpt_train_eager"))
    stats, s = kernel_stats(trace), summarize(trace)
    async with opened(shared_trace("gpt_train_eager"), size=(200, 50)) as (app, pilot):
        screen, table, launches, _ = parts(app)
        expected = [
            [r.short, f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.mean_ns), fmt_ns(r.min_ns), fmt_ns(r.max_ns),
             fmt_share(r.share), r.op]
            for r in stats.itertuples()
        ]
        assert rows(table) == expected
        await pilot.press("v")  # the launch list is built when it is shown
        assert launches.row_count() == s.launches == 945
        header = str(screen.query_one("#header").render())
        assert f"{s.launches:,} launches · {s.distinct_kernels} kernels" in header
        assert f"busy {fmt_ns(s.busy_ns)} of {fmt_ns(s.window_ns)} ({fmt_share(s.busy_share)})" in header
        assert "3 steps" in header


async def test_details_follow_the_cursor():
    async with opened(mlp(), size=(160, 45)) as (app, pilot):
        pane = app.screen.query_one(DetailsPane)
        assert pane.details.title == NVJET
        assert pane.details.value("grid") == "2×66×1  block 384×1×1"
        await pilot.press("down")
        assert pane.details.title == "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]"
        assert pane.details.value("op") == "mlp_forward › aten::gelu"


async def test_filter_substring_regex_and_bad_regex():
    async with opened(mlp()) as (app, pilot):
        screen, table, launches, _ = parts(app)
        await pilot.press("slash", *"nvjet")
        assert [r[0] for r in rows(table)] == [NVJET]
        assert str(screen.query_one("#counts").render()) == "1 kernel · 6/21 launches · 1.07ms GPU (70.1%)"
        await pilot.press("enter", "v")  # the launch list is built when it is shown
        assert launches.row_count() == 6
        await pilot.press("v", "slash", *"x" * 3)
        assert table.row_count() == 0 and "no kernel matches" in screen_text(table)[1]
        await pilot.press("ctrl+u")  # Input: delete to start
        await pilot.press(*"/^mem")
        assert [r[0] for r in rows(table)] == ["Memset (Device)"]
        await pilot.press("(")
        assert str(screen.query_one("#counts").render()) == (
            "bad regex '^mem(': missing ), unterminated subpattern at position 4")  # whole at 80 columns
        assert [r[0] for r in rows(table)] == ["Memset (Device)"]  # the last good filter stays


async def test_escape_leaves_the_filter_then_clears_it():
    async with opened(mlp()) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("slash", *"gelu")
        assert app.focused.id == "filter"
        await pilot.press("escape")
        assert app.focused is table and table.row_count() == 1
        await pilot.press("escape")
        assert table.row_count() == 5 and screen.query_one("#filter").value == ""
        await pilot.press("slash", *"functor_add", "enter")
        assert app.focused is table and table.row_count() == 1


async def test_view_key_switches_to_every_launch_in_time_order():
    async with opened(mlp()) as (app, pilot):
        screen, table, launches, _ = parts(app)
        await pilot.press("v")
        assert screen._view() == "launches" and app.focused is launches
        assert launches.row_count() == 21
        assert [r[4] for r in rows(launches)[:3]] == ["vectorized_layer_norm_kernel[bf16]", "Memset (Device)", NVJET]
        assert rows(launches)[2][:4] == ["4.07ms", "191.2µs", "s7", "1"]
        assert launches.current()[1] == 2  # the selected launch (the kernel's first) stays selected
        await pilot.press("v")
        assert screen._view() == "kernels" and app.focused is table


async def test_a_move_by_key_selects_its_launch_before_the_next_repaint():
    # the row and its details and timeline go out in one repaint: the screen answers the move in the
    # key's own handler, not after a message the next idle would deliver (a second repaint a key)
    async with opened(mlp()) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        await pilot.press("v")
        assert screen.selected == 2
        launches.action_move(1)  # no await: nothing else runs in between
        assert (launches.cursor, screen.selected, timeline.selected) == (3, 3, 3)
        assert screen.query_one(DetailsPane).details.title.startswith("vectorized_elementwise_kernel<GeluCUDAKernelImpl>")
        await pilot.press("v")
        assert screen.selected == 3
        table.action_move(1)
        assert screen.selected == screen._first_of_row(table.current_key()) != 3  # the next kernel's first, at once


async def test_a_character_typed_in_the_search_is_answered_before_the_next_repaint():
    async with opened(mlp()) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("slash")
        screen.query_one("#filter").insert_text_at_cursor("Gelu")  # as a key inserts it; no await after
        assert screen.query_state.pattern == "Gelu"
        assert [r[0] for r in rows(table)] == ["vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]"]


async def test_full_names_key():
    async with opened(EAGER) as (app, pilot):
        _, table, launches, timeline = parts(app)
        await pilot.press("f")
        assert rows(table)[0][0].startswith("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add")
        assert launches.full_names and timeline.full_names
        await pilot.press("f")
        assert rows(table)[0][0] == "vectorized_elementwise_kernel<CUDAFunctor_add>[f32]"


async def test_sort_keys_each_column_and_reverse():
    async with opened(mlp()) as (app, pilot):
        _, table, launches, _ = parts(app)
        await pilot.press("2")  # count, most first; ties keep total order
        assert [r[1] for r in rows(table)] == ["6", "6", "3", "3", "3"]
        assert rows(table)[0][0] == NVJET
        await pilot.press("2")
        assert [r[1] for r in rows(table)] == ["3", "3", "3", "6", "6"]
        await pilot.press("1")
        assert rows(table)[0][0] == "Memset (Device)"
        for key, column in zip("3456", ("total", "mean", "share", "op")):
            await pilot.press(key)
            assert table.sort_column == column
        assert rows(table)[0][-1] == "aten::add"
        await pilot.press("v", "2")  # launch list: keys follow its columns; 2 = duration, longest first
        assert launches.sort_column == "dur" and rows(launches)[0][1] == "191.2µs"
        for key, column in zip("13456", ("start", "stream", "step", "name", "op")):
            await pilot.press(key)
            assert launches.sort_column == column
        ops = [r[-1] for r in rows(launches)]
        assert ops == sorted(ops, key=str.lower) and ops[0] == "aten::add"  # by op name, not op code


async def test_noise_toggles_hide_and_show_with_counts():
    async with opened(mlp()) as (app, pilot):
        screen, table, launches, _ = parts(app)
        noise = lambda: str(screen.query_one("#noise").render())
        assert noise().strip() == "C memcpy 0 S memset 6 │ off: R api 23 O ops 69 A annot 6 M alloc 0"
        await pilot.press("S")
        assert table.row_count() == 4 and "off: S memset 6" in noise()
        await pilot.press("v")
        assert launches.row_count() == 15
        await pilot.press("R")
        assert launches.row_count() == 15 + 23
        assert "(runtime)" in rows(launches)[0][5] or "(driver)" in rows(launches)[0][5]
        await pilot.press("O", "A", "M")
        assert launches.row_count() == 15 + 23 + 69 + 6
        assert noise().strip() == "C memcpy 0 R api 23 O ops 69 A annot 6 M alloc 0 │ off: S memset 6"
        await pilot.press("C")
        assert noise().strip().startswith("R api 23")


async def test_table_keys_move_and_enter_jumps_to_timeline():
    async with opened(mlp()) as (app, pilot):
        _, table, launches, timeline = parts(app)
        await pilot.press("v")
        assert launches.cursor == 2  # the selected kernel's first launch
        await pilot.press("home", "down", "j")
        assert launches.cursor == 2
        await pilot.press("up", "k")
        assert launches.cursor == 0
        await pilot.press("end")
        assert launches.cursor == 20
        await pilot.press("home")
        assert launches.cursor == 0
        await pilot.press("pagedown")
        assert launches.cursor == launches.visible_rows()
        await pilot.press("pageup")
        assert launches.cursor == 0
        await pilot.press("end", "home", "space")
        assert launches.cursor == launches.visible_rows()
        await pilot.press("enter")
        assert app.focused is timeline and timeline.selected == launches.current()[1]


async def test_jump_between_table_and_timeline():
    async with opened(mlp()) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        await pilot.press("down", "down", "t")  # layer norm kernel, first launch is launch 0
        assert app.focused is timeline and timeline.selected == 0
        await pilot.press("right", "right")  # next events in the GPU lane
        assert timeline.selected == 2 and screen.query_one(DetailsPane).details.title == NVJET
        assert table.current_key() == NVJET
        await pilot.press("t")
        assert app.focused is launches and launches.current() == (int(screen.kernels.trace.gpu["row"].iat[2]), 2)
        await pilot.press("t", "enter")
        assert app.focused is launches


async def test_timeline_zoom_pan_fit_and_selection_zoom():
    async with opened(mlp()) as (app, pilot):
        _, _, _, timeline = parts(app)
        w0, w1 = timeline.window
        assert (w0, w1) == timeline.bounds
        await pilot.press("plus")
        assert abs(timeline.window[1] - timeline.window[0] - (w1 - w0) / 2) <= 2
        await pilot.press("minus", "equals_sign", "equals_sign")
        span = timeline.window[1] - timeline.window[0]
        assert abs(span - (w1 - w0) / 4) <= 4
        start = timeline.window[0]
        await pilot.press("full_stop")
        assert timeline.window[0] == start + span // 4
        await pilot.press("comma", "comma")
        assert timeline.window[0] == start - span // 4
        await pilot.press("z")  # the selected gemm fills a third of the window
        assert timeline.window[1] - timeline.window[0] == 191_199 + 2 * 191_199
        await pilot.press("w")
        assert timeline.window == timeline.bounds
        await pilot.press("t", "shift+right")
        assert timeline.window == timeline.bounds  # already at the end: clamped


async def test_timeline_draws_axis_steps_and_lanes():
    async with opened(mlp(), size=(100, 30)) as (app, pilot):
        _, _, _, timeline = parts(app)
        text = screen_text(timeline)
        assert text[0].startswith("span 5.66ms │╵0")
        assert "mlp_forward #1" in text[1]
        assert text[2].startswith("GPU0 s7     │") and text[3].startswith("CPU t416    │")
        await pilot.press("z")
        text = screen_text(timeline)
        assert "nvjet_sm90_tst_256x128" in text[2]  # wide enough to carry its name
        assert "aten::addmm" in text[3] or "aten::li" in text[3] or text[3].count("█") > 0


async def test_step_keys_move_between_steps():
    async with opened(shared_trace("gpt_train_eager"), size=(120, 40)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        g = screen.kernels.trace.gpu
        key = g["key"].iat[screen.selected]
        await pilot.press("right_square_bracket")  # the tables count the first step; the row keeps its kernel
        assert screen.query_state.scope.iteration == 0
        await pilot.press("right_square_bracket")
        first_of_step = int(((g["iteration"] == 1) & (g["key"] == key)).to_numpy().argmax())
        assert screen.selected == first_of_step and timeline.selected == first_of_step
        assert screen.query_one(DetailsPane).details.value("step").startswith("ProfilerStep#3")
        await pilot.press("left_square_bracket")
        assert g["iteration"].iat[screen.selected] == 0
        await pilot.press("t", "right_square_bracket", "right_square_bracket")  # focused timeline: same keys
        assert g["iteration"].iat[screen.selected] == 2


async def test_next_and_previous_launch_of_the_kernel():
    async with opened(mlp()) as (app, pilot):
        screen, _, _, _ = parts(app)
        pane = screen.query_one(DetailsPane)
        await pilot.press("n", "n")
        assert pane.details.value("launch").startswith("3 of 6")
        await pilot.press("p")
        assert pane.details.value("launch").startswith("2 of 6")
        assert pane.details.title == NVJET


async def test_details_key_hides_the_pane():
    async with opened(mlp()) as (app, pilot):
        pane = app.screen.query_one(DetailsPane)
        await pilot.press("d")
        assert not pane.display
        await pilot.press("d")
        assert pane.display


async def test_timeline_lane_keys():
    async with opened(mlp()) as (app, pilot):
        _, _, _, timeline = parts(app)
        await pilot.press("t", "down")
        assert timeline.lane_cursor == 1
        await pilot.press("right")  # next launch call on the CPU thread
        assert timeline.selected == 3
        await pilot.press("up", "left")
        assert timeline.lane_cursor == 0 and timeline.selected == 2


async def test_help_lists_every_key_and_closes():
    async with opened(mlp()) as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=100, record=True)
        console.print(app.screen.table)
        text = console.export_text()
        for expected in ("Search", "Zoom", "previous step", "Show/hide memset", "Sort by column 6", "Quit",
                         "Page down", "Lane below", "/regex"):
            assert expected in text
        await pilot.press("escape")
        assert isinstance(app.screen, BrowserScreen)


async def test_q_quits_with_status_0():
    async with opened(mlp()) as (app, pilot):
        await pilot.press("q")
    assert app.return_code == 0


async def test_ctrl_q_quits_too():
    async with opened(EAGER) as (app, pilot):
        await pilot.press("ctrl+q")
    assert app.return_code == 0


async def test_timeline_keys_when_focused():
    async with opened(mlp()) as (app, pilot):
        _, _, _, timeline = parts(app)
        await pilot.press("t")
        full = timeline.bounds[1] - timeline.bounds[0]
        await pilot.press("plus", "plus")
        assert abs((timeline.window[1] - timeline.window[0]) - full / 4) <= 4
        await pilot.press("minus")
        assert abs((timeline.window[1] - timeline.window[0]) - full / 2) <= 4
        start = timeline.window[0]
        await pilot.press("comma")
        assert timeline.window[0] < start
        await pilot.press("z")
        assert timeline.window[1] - timeline.window[0] == 3 * 191_199
        await pilot.press("w")
        assert timeline.window == timeline.bounds


async def test_a_trace_without_gpu_work_says_so(tmp_path):
    import gzip
    import json

    doc = json.loads(gzip.decompress((PROJECT_TRACES / "add_relu_1M_eager.json.gz").read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]
    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps(doc, indent=2))
    async with opened(path, size=(120, 30)) as (app, pilot):
        _, table, _, _ = parts(app)
        text = "\n".join(screen_text(table))
        assert " no GPU work in this trace: was CUDA profiled?" in text
        assert "no kernel matches the filter" not in text
