"""The browser as a trace explorer: search everything, n/N, group, scope, range, back, copy, export, palette.

Every figure on screen is checked against the data layer (analysis.explore) computing it without a
terminal, and the search against the op stacks the trace itself gives (``trace.ancestors``).
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from kerneltui.analysis.explore import group_stats, launch_context, range_totals
from kerneltui.trace import load_trace
from kerneltui.analysis.traffic import compute_traffic
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.timeline import Timeline
from kerneltui.units import fmt_ns, fmt_share
from tests.conftest import shared_trace
from tests.tui.helpers import opened, parts, rows, screen_text, until

GPT = "gpt_train_eager"


def gpt():
    return shared_trace(GPT)


def counts_text(screen) -> str:
    return str(screen.query_one("#counts").render())


def launched_under(trace, text: str) -> np.ndarray:
    """Launches whose op stack (from the trace's own ancestors) has a name containing text: the independent count."""
    g = trace.gpu
    names = trace.events["name"].to_numpy()
    hit = [any(text.lower() in trace.name(int(names[r])).lower() for r in trace.ancestors(int(row)))
           for row in g["launch_row"].to_numpy()]
    return np.array(hit, bool)


async def test_search_by_op_finds_the_gemms_it_launched_and_their_gpu_time():
    trace = load_trace(gpt())
    expected = launched_under(trace, "aten::mm")
    n, ns = int(expected.sum()), int(trace.gpu["dur"].to_numpy()[expected].sum())
    total = int(trace.gpu["dur"].sum())
    assert n == 120  # 25 GEMMs a step and their memsets, forward and backward
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, launches, _ = parts(app)
        await pilot.press("slash", *"aten::mm", "enter")
        kernels = trace.gpu[expected]["key"].nunique()
        assert counts_text(screen) == (f"{kernels} kernels · {n}/945 launches · {fmt_ns(ns)} GPU"
                                       f" ({fmt_share(ns / total)})")
        assert sum(int(r[1]) for r in rows(table)) == n
        await pilot.press("v")
        assert launches.row_count() == n


async def test_n_and_N_walk_the_search_hits_in_time_order():
    trace = load_trace(gpt())
    hits = np.flatnonzero(launched_under(trace, "aten::mm"))
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, _, launches, timeline = parts(app)
        await pilot.press("slash", *"aten::mm", "enter")
        first = screen.selected
        after = hits[hits > first]
        await pilot.press("n")
        assert screen.selected == after[0] and timeline.selected == after[0]
        await pilot.press("n")
        assert screen.selected == after[1]
        await pilot.press("N")
        assert screen.selected == after[0]
        pane = screen.query_one(DetailsPane)
        assert "aten::mm" in pane.details.value("op")


async def test_a_search_with_no_match_clears_the_details():
    async with opened(shared_trace("mlp_bf16_eager")) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("slash", *"zzz")
        assert table.row_count() == 0
        assert screen.query_one(DetailsPane).details.title == "no launch matches the search"


async def test_g_groups_by_op_module_source_and_step_with_the_data_layers_numbers():
    trace = load_trace(gpt())
    context = launch_context(trace)
    async with opened(gpt(), size=(200, 50)) as (app, pilot):
        screen, table, _, _ = parts(app)
        for grouping, header in (("op", "Launching op"), ("module", "Module"), ("source", "Source line"),
                                 ("step", "Step")):
            await pilot.press("g")
            assert screen.query_state.grouping == grouping
            assert screen_text(table)[0].startswith(header)
            expected = group_stats(trace, context, grouping)
            assert [r[:3] for r in rows(table)] == [
                [label, f"{count:,}", fmt_ns(total)]
                for label, count, total in zip(expected["label"], expected["count"], expected["total_ns"])]
        steps = [r[0] for r in rows(table)]
        assert sorted(steps) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
        await pilot.press("g")
        assert screen.query_state.grouping == "kernel"


async def test_brackets_scope_the_table_to_a_step_and_back_to_the_whole_trace():
    trace = load_trace(gpt())
    context = launch_context(trace)
    in_step = trace.gpu["iteration"].to_numpy() == 1
    expected = group_stats(trace, context, "kernel", in_step)
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, timeline = parts(app)
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert counts_text(screen).startswith(" in ProfilerStep#3 (step 2 of 3) · ")
        assert [r[1] for r in rows(table)] == [f"{c:,}" for c in expected["count"]]
        assert sum(int(r[1]) for r in rows(table)) == int(in_step.sum()) == 315
        starts, ends, _ = screen.browse.step_spans
        w0, w1 = timeline.window
        assert w0 <= starts[1] and ends[1] <= w1  # the timeline shows the step
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert screen.query_state.scope.whole and sum(int(r[1]) for r in rows(table)) == 945
        await pilot.press("left_square_bracket")  # from the whole trace, [ goes to the last step
        assert screen.query_state.scope.iteration == 2


async def test_a_marked_range_shows_its_totals_and_scopes_the_table():
    trace = load_trace(gpt())
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, timeline = parts(app)
        await pilot.press("t", "m", "right", "right", "right", "m")
        start, end = timeline.range
        origin = screen.kernels.origin
        totals = range_totals(trace, start + origin, end + origin, None, compute_traffic(trace).table)
        line = str(screen.query_one("#range").render())
        assert line.startswith(f"range {fmt_ns(start)}–{fmt_ns(end)} ({fmt_ns(end - start)})")
        assert f"GPU busy {fmt_ns(totals.busy_ns)}" in line and f"{totals.kernels} kernel" in line
        assert sum(int(r[1]) for r in rows(table)) == totals.launches == 4
        await pilot.press("escape")
        assert timeline.range is None and screen.query_state.scope.whole
        assert not screen.query_one("#range").display


async def test_b_goes_back_after_a_jump_and_a_search_hit():
    async with opened(shared_trace("mlp_bf16_eager")) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        await pilot.press("down")
        before = screen.selected
        await pilot.press("t")
        assert app.focused is timeline
        await pilot.press("b")
        assert app.focused is table and screen.selected == before
        await pilot.press("n")
        assert screen.selected != before
        await pilot.press("backspace")
        assert screen.selected == before


async def test_y_copies_the_full_name_of_the_selected_kernel():
    async with opened(shared_trace("mlp_bf16_eager")) as (app, pilot):
        screen, _, _, _ = parts(app)
        await pilot.press("y")
        assert app.clipboard == screen.kernels.key_full[int(screen.kernels.key_codes[screen.selected])]
        assert app.clipboard == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"


async def test_x_and_X_export_the_table_as_shown_to_new_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with opened(shared_trace("mlp_bf16_eager").resolve()) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("g", "x", "X", "x")
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["kerneltui-mlp_bf16_eager-by-op-2.csv", "kerneltui-mlp_bf16_eager-by-op.csv",
                         "kerneltui-mlp_bf16_eager-by-op.md"]
        csv = (tmp_path / "kerneltui-mlp_bf16_eager-by-op.csv").read_text().splitlines()
        assert csv[0] == "Launching op,count,total_ns,mean_ns,min_ns,max_ns,share,Top kernel"
        assert csv[1].startswith("aten::addmm,12,1078108,")  # the gemms and their memsets
        md = (tmp_path / "kerneltui-mlp_bf16_eager-by-op.md").read_text().splitlines()
        assert md[2:5] == ["- search: none", "- scope: whole trace", "- view: grouped by op"]
        assert md[6].startswith("| Launching op | Count | Total |")
        assert len(md) == 8 + table.row_count()


async def test_an_export_says_its_search_and_scope_and_escapes_angle_brackets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    async with opened(shared_trace("mlp_bf16_eager").resolve()) as (app, pilot):
        await pilot.press("slash", *"gelu", "enter", "right_square_bracket", "X", "x")
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["kerneltui-mlp_bf16_eager-by-kernel-mlp_forward_1-search-gelu.csv",
                         "kerneltui-mlp_bf16_eager-by-kernel-mlp_forward_1-search-gelu.md"]
        md = (tmp_path / names[1]).read_text().splitlines()
        assert md[2:5] == ["- search: gelu", "- scope: mlp_forward #1", "- view: grouped by kernel"]
        # GitHub would drop <GeluCUDAKernelImpl> as an HTML tag
        assert md[8].startswith("| vectorized_elementwise_kernel&lt;GeluCUDAKernelImpl&gt;[bf16] | 1 |")


async def test_ctrl_p_palette_runs_an_action_by_name():
    async with opened(shared_trace("mlp_bf16_eager")) as (app, pilot):
        screen = app.screen
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Group")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, BrowserScreen) and screen.query_state.grouping == "op"


async def test_e_enlarges_then_maximises_the_timeline_and_restores_it():
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, timeline = parts(app)
        normal = timeline.size.height
        await pilot.press("e")
        await pilot.pause()
        assert timeline.size.height > normal
        await pilot.press("e")
        await pilot.pause()
        assert not screen.query_one("#main").display and timeline.size.height == 40 - 4 - 1  # all but the four one-line bars and its border
        await pilot.press("e")
        await pilot.pause()
        assert screen.query_one("#main").display and timeline.size.height == normal


async def test_details_move_under_the_table_below_160_columns():
    async with opened(gpt(), size=(159, 40)) as (app, pilot):
        pane = app.screen.query_one(DetailsPane)
        table = app.screen.query_one("#kernels")
        assert pane.region.y > table.region.y and pane.region.width == table.region.width
    async with opened(gpt(), size=(160, 40)) as (app, pilot):
        pane = app.screen.query_one(DetailsPane)
        assert pane.region.width == 64 and pane.region.y == app.screen.query_one("#kernels").region.y


async def test_sorting_shows_the_top_of_the_new_order():
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("end")
        await pilot.press("2")  # by count, most first
        assert table.cursor == 0 and table.scroll_offset.y == 0
        assert rows(table)[0][1] == "153"


async def test_the_header_keeps_every_fact_at_80_columns():
    async with opened(gpt(), size=(80, 24)) as (app, pilot):
        header = str(app.screen.query_one("#header").render())
        assert header.endswith("· 945 launches · 52 kernels · busy 30.9% of 38.22ms · 3 steps · H200")
        assert len(header) <= 78


async def test_keys_pressed_while_loading_reach_the_browser():
    import time

    def slow(path, progress=None):
        time.sleep(0.6)
        return load_trace(path, progress=progress)

    from kerneltui.tui.app import build_app
    from tests.tui.helpers import settle

    app = build_app(str(shared_trace("mlp_bf16_eager")), slow)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("v")  # the loading screen is up: kept, then replayed
        await settle(app, pilot)
        await pilot.pause(0.2)
        assert app.screen.query_one("#tables").current == "launches"


async def test_timeline_click_selects_and_steps_use_the_trace_numbers():
    async with opened(gpt(), size=(80, 24)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        text = screen_text(timeline)
        assert "ProfilerStep#2" in text[1] or "#2" in text[1]
        assert "├─1" not in text[1]
        assert isinstance(timeline, Timeline)


async def test_every_key_in_help_is_in_the_palette_with_its_key():
    from textual.binding import Binding
    from textual.markup import escape

    from kerneltui.tui.screens.help import key_text

    async with opened(shared_trace("mlp_bf16_eager")) as (app, pilot):
        titles = {str(c.title) for c in app.get_system_commands(app.screen)}
        listed = [b for _, items in app.screen.key_sections() for b in items
                  if isinstance(b, Binding) and b.action != "command_palette"]
        assert len(listed) >= 45
        for b in listed:
            assert escape(f"{b.description} · {key_text(b)}") in titles, b.id


async def test_the_icicle_follows_the_thread_that_launched_the_selection():
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        g = screen.kernels.trace.gpu
        threads = list(screen.browse.icicles)
        assert len(threads) == 2  # the main thread and autograd's
        main, autograd = threads
        screen.select_launch(int(np.flatnonzero(g["launch_lane"].to_numpy() == main)[0]), source=None)
        await pilot.pause()
        assert [l.label for l in timeline.lanes if l.key.startswith("op:")][0] == "ops d0"
        screen.select_launch(int(np.flatnonzero(g["launch_lane"].to_numpy() == autograd)[0]), source=None)
        await pilot.pause()
        icicle = [l for l in timeline.lanes if l.key.startswith("op:")]
        assert icicle[0].label == "autograd d0" and icicle[0].key.startswith(f"op:{autograd}:")


async def test_cut_names_stay_apart_on_resnet_at_120x40():
    """Twelve ResNet kernels once all read `sm90_xm…rnel__5x_cudnn` at 120x40."""
    async with opened(shared_trace("resnet18_train_eager"), size=(120, 40)) as (app, pilot):
        table = app.screen.query_one("#kernels")
        drawn = []
        for top in range(0, table.row_count(), table.visible_rows()):
            table.scroll_to(y=top, animate=False, immediate=True)
            await pilot.pause()
            drawn += [line[:58].rstrip() for line in screen_text(table)[1:] if line.strip()]
        names = list(dict.fromkeys(drawn))
        assert len(drawn) >= table.row_count() == 61
        assert len({n.split("  ")[0] for n in names}) == 61  # every kernel's drawn name differs


async def test_keys_that_need_the_second_stage_wait_for_it():
    """g and ] pressed while only the kernel table is there run once the rest has loaded."""
    from kerneltui.tui.app import build_app
    from kerneltui.tui.model import build_browse
    from tests.tui.helpers import settle

    gate = []

    class SlowBrowse:  # holds stage 2 back until the keys are in
        def __call__(self, kernels, memory=None):
            import time
            while not gate:
                time.sleep(0.01)
            return build_browse(kernels, memory)

    import kerneltui.tui.app as app_module

    original = app_module.build_browse
    app_module.build_browse = SlowBrowse()
    try:
        app = build_app(str(gpt()))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, BrowserScreen), rounds=200)
            screen = app.screen
            assert screen.browse is None
            await pilot.press("g", "right_square_bracket")
            assert screen.query_state.grouping == "kernel"  # not yet: kept
            gate.append(True)
            await settle(app, pilot)
            assert screen.query_state.grouping == "op" and screen.query_state.scope.iteration == 0
    finally:
        app_module.build_browse = original


async def test_g_shows_the_top_of_the_new_grouping():
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press(*["down"] * 20, "g")
        assert table.cursor == 0 and table.scroll_offset.y == 0
        assert screen.answer.key_of(screen.selected) == table.current_key()


async def test_the_range_line_says_launches_kernels_and_its_top_kernels():
    trace = load_trace(gpt())
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        await pilot.press("t", "m", "right", "right", "right", "right", "m")
        start, end = timeline.range
        origin = screen.kernels.origin
        totals = range_totals(trace, start + origin, end + origin, None, compute_traffic(trace).table)
        first, second = str(screen.query_one("#range").render()).splitlines()
        assert f"{totals.launches} launches ({totals.kernels} kernel" in first
        name, n, ns = totals.top[0]
        assert second.startswith(f"top {name} {fmt_ns(ns)} ×{n}")


async def test_a_trace_without_a_device_name_ends_its_header_cleanly():
    from tests.conftest import external_trace

    async with opened(external_trace("tracelens__inference__vllm_decode_full__graph_execution.json.gz"),
                      size=(120, 40)) as (app, pilot):
        header = str(app.screen.query_one("#header").render())
        assert header.endswith("· 434 launches · 25 kernels · busy 10.72ms of 19.11ms (56.1%) · 1 call")


async def test_colon_goes_to_a_step_or_a_time():
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, timeline = parts(app)
        await pilot.press("colon")
        await pilot.press(*"#3", "enter")
        await pilot.pause()
        assert screen.query_state.scope.iteration == 1  # ProfilerStep#3, the second step
        assert "in ProfilerStep#3 (step 2 of 3)" in str(screen.query_one("#counts").render())
        await pilot.press("colon", *"20ms", "enter")
        await pilot.pause()
        w0, w1 = timeline.window
        assert w0 < 20_000_000 < w1 and abs((w0 + w1) // 2 - 20_000_000) < (w1 - w0) // 20
        g = screen.kernels.trace.gpu
        start = int(g["ts"].iat[screen.selected]) - screen.kernels.origin
        assert start >= 20_000_000  # the first launch of the scope at or after 20 ms
        await pilot.press("colon", *"step 9", "enter")
        assert "no step 9: the trace has 3" in str(app.screen.query_one("#goto-hint").render())
        await pilot.press("escape")
        assert screen.query_state.scope.iteration == 1


async def test_w_in_the_timeline_widens_the_tables_too_and_80_columns_say_the_scope():
    async with opened(gpt()) as (app, pilot):
        screen, table, _, timeline = parts(app)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        counts = str(screen.query_one("#counts").render())
        assert counts == " in ProfilerStep#2 · 52 kernels · 315/945 · 3.94ms"  # the scope first, the counts shortened
        await pilot.press("t", "w")
        await pilot.pause()
        assert app.focused is timeline and screen.query_state.scope.whole
        assert " in ProfilerStep" not in str(screen.query_one("#counts").render())


async def test_a_search_typed_back_reuses_its_answer_and_the_details_of_a_kept_selection(monkeypatch):
    """Backspace to a search typed a moment ago is that search's answer (no regrouping); the details
    of a launch the search keeps selected are not made again; both as fresh ones would be."""
    from kerneltui.tui import query
    from kerneltui.tui.screens import browser

    made = []
    real_details = browser.launch_details
    monkeypatch.setattr(browser, "launch_details", lambda *a: made.append(a[2]) or real_details(*a))
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, _ = parts(app)
        await pilot.press("slash", *"aten::m")
        first_answer, first_rows, details = screen.answer, rows(table), screen.query_one(DetailsPane).details
        made.clear()
        await pilot.press("m", "backspace")  # aten::mm, then back to aten::m
        assert screen.answer is first_answer and rows(table) == first_rows
        assert screen.query_one(DetailsPane).details is details and made == []  # the selection stayed
        fresh = query.answer(screen.kernels, screen.browse, screen.query_state)  # no caches: computed afresh
        assert fresh is not first_answer and fresh.table.equals(first_answer.table)
        await pilot.press("escape", "down")  # another launch: its details are made
        assert made == [screen.selected]


def gpu_launches_drawn(timeline) -> int:
    return sum(len(lane) for lane in timeline.lanes if lane.key.startswith("gpu"))


async def test_a_search_over_big_lanes_shows_its_table_first_and_its_timeline_when_the_cut_lands(monkeypatch):
    """Lanes of a million launches are cut to a search on a thread, after the table's repaint; keys
    typed meanwhile are answered at once, and only the last one's mask is cut next."""
    from kerneltui.tui import lane_cuts
    from kerneltui.tui.lanes import filter_lanes

    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)  # the shipped trace's lanes as if big
    gate, cut_for = threading.Event(), []
    real = lane_cuts.filter_lanes

    def held(lanes, keep):
        cut_for.append(keep)
        gate.wait(10)
        return real(lanes, keep)

    monkeypatch.setattr(lane_cuts, "filter_lanes", held)
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, table, _, timeline = parts(app)
        await pilot.press("slash", *"aten::mm")
        for _ in range(20):  # the cut starts after a repaint
            if cut_for:
                break
            await pilot.pause(0.01)
        assert sum(int(r[1]) for r in rows(table)) == 120  # the search's table at once...
        assert counts_text(screen).split(" · ")[1] == "120/945 launches"
        assert gpu_launches_drawn(timeline) == 945  # ...while the timeline still shows every launch
        assert 1 <= len(cut_for) < 8 and cut_for[-1] is not screen.keep  # a cut of an earlier key's mask
        gate.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert cut_for[-1] is screen.keep and len(cut_for) == 2  # then the last key's only
        assert gpu_launches_drawn(timeline) == 120
        cut = filter_lanes(screen.browse.lanes, screen.keep)
        assert [(x.key, x.ids.tolist()) for x in timeline.lanes[: len(cut)]] == [(x.key, x.ids.tolist()) for x in cut]
        await pilot.press("backspace")  # back to aten::m: its mask was never cut (a key typed past), cut now
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(cut_for) == 3 and cut_for[-1] is screen.keep
        await pilot.press("m")  # aten::mm again: the cut kept for it, shown with the table
        assert len(cut_for) == 3 and gpu_launches_drawn(timeline) == 120


async def test_the_timeline_selects_no_launch_the_search_dropped_while_its_lanes_are_cut(monkeypatch):
    """Until the cut lands the timeline shows the lanes before the search: walking them selects nothing
    the search dropped; the selection stays, and the table and details with it."""
    from kerneltui.tui import lane_cuts

    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)
    gate = threading.Event()
    real = lane_cuts.filter_lanes
    monkeypatch.setattr(lane_cuts, "filter_lanes", lambda lanes, keep: (gate.wait(10), real(lanes, keep))[1])
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        await pilot.press("slash", *"aten::mm", "enter", "enter")  # the search, then its first launch on the timeline
        kept = screen.selected
        assert app.focused is timeline and screen.keep[kept] and gpu_launches_drawn(timeline) == 945
        for _ in range(4):
            await pilot.press("right")  # the next intervals of the uncut lane: the search drops them
            assert screen.selected == kept and timeline.selected == kept
        gate.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gpu_launches_drawn(timeline) == 120
        await pilot.press("right")  # the cut lanes: the next launch the search keeps
        assert screen.selected != kept and screen.keep[screen.selected]


async def test_a_search_leaves_the_selections_underlined_launches_and_a_grouping_remarks_them(monkeypatch):
    """The launches underlined with the selection are its row's over every launch: a search keeps them
    (no repaint of the timeline for them); g underlines the new row's."""
    async with opened(gpt(), size=(120, 40)) as (app, pilot):
        screen, _, _, timeline = parts(app)
        await pilot.press("down")
        marks = []
        real = timeline.set_marked
        monkeypatch.setattr(timeline, "set_marked", lambda *a: marks.append(a) or real(*a))
        selected = screen.selected
        before = timeline._marked
        await pilot.press("slash", *"aten", "enter")
        assert screen.selected == selected and marks == [] and timeline._marked is before
        await pilot.press("g")
        codes = screen.answer.codes
        assert screen.query_state.grouping == "op" and marks
        assert marks[-1][0].tolist() == (codes == codes[screen.selected]).tolist()
        assert timeline._marked is marks[-1][0]


def test_the_answers_kept_are_the_last_few_used():
    from kerneltui.tui import query
    from kerneltui.tui.model import build_browse, build_kernels

    kernels = build_kernels(load_trace(gpt()))
    browse = build_browse(kernels)
    caches = query.Caches()
    first = query.answer(kernels, browse, query.Query(pattern="aten"), caches)
    for i in range(query.ANSWERS_KEPT - 1):
        query.answer(kernels, browse, query.Query(pattern=f"x{i}"), caches)
    assert query.answer(kernels, browse, query.Query(pattern="aten"), caches) is first  # used again: now the newest
    for i in range(query.ANSWERS_KEPT - 1):
        query.answer(kernels, browse, query.Query(pattern=f"y{i}"), caches)
    assert query.answer(kernels, browse, query.Query(pattern="aten"), caches) is first
    query.answer(kernels, browse, query.Query(pattern="z"), caches)
    for i in range(query.ANSWERS_KEPT):
        query.answer(kernels, browse, query.Query(pattern=f"w{i}"), caches)
    again = query.answer(kernels, browse, query.Query(pattern="aten"), caches)
    assert again is not first and again.table.equals(first.table) and len(caches.answers) == query.ANSWERS_KEPT


def test_answers_from_per_class_sums_are_the_answers_summed_launch_by_launch(monkeypatch):
    """Searches, steps, toggles, module and range scopes: the same answer whichever way the table is summed."""
    from kerneltui.analysis.explore.groups import GroupIndex
    from kerneltui.tui import query
    from kerneltui.tui.model import build_browse, build_kernels

    trace = load_trace(gpt())
    kernels = build_kernels(trace)
    browse = build_browse(kernels)
    start = int(trace.gpu["ts"].min())
    queries = [query.Query(pattern=p, grouping=by, scope=scope)
               for p in ("", "aten::mm", "ProfilerStep#3", "no such thing")
               for by in ("kernel", "op", "source", "step", "module")
               for scope in (query.WHOLE, query.Scope(iteration=1))]
    queries += [query.Query(pattern="aten", shown=frozenset({"memcpy"})),
                query.Query(pattern="aten", scope=query.Scope(start=start, end=start + 10**6))]
    summed = [query.answer(kernels, browse, q) for q in queries]
    called = []
    real = GroupIndex.stats_of_classes
    monkeypatch.setattr(GroupIndex, "stats_of_classes", lambda *a: called.append(a[1]) or real(*a))
    by_class = [query.answer(kernels, browse, q) for q in queries]
    assert len(called) == 40  # all but the toggle and the range (the module grouping's falls back inside)
    monkeypatch.setattr(GroupIndex, "stats_of_classes", lambda *a: None)
    by_launch = [query.answer(kernels, browse, q) for q in queries]
    for ours, theirs in zip(by_class, by_launch):
        pd.testing.assert_frame_equal(ours.table, theirs.table)
        assert (ours.matches, ours.match_ns, ours.scope_ns) == (theirs.matches, theirs.match_ns, theirs.scope_ns)
        assert np.array_equal(ours.in_scope, theirs.in_scope) if ours.in_scope is not None else theirs.in_scope is None
    assert [a.matches for a in summed[:2]] == [945, 315]  # the whole trace; step 2 of 3
    assert summed[10].matches == 120  # aten::mm, as test_search_by_op_finds_the_gemms_it_launched
