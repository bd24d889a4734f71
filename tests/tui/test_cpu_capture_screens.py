"""A CPU capture on the screens (tests/data/cpu): `open` lists its CPU work (compiled C++ kernels and ATen ops by
CPU self time) with their provenance and calls; the diff header says it in one line."""

from __future__ import annotations

import json

from kerneltui.trace.summary import summarize
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.kernel_table import CPU_CAPTURE, NO_CPU_MATCH, KernelTable
from kerneltui.units import fmt_ns
from tests.conftest import DATA, shared_trace
from tests.tui.helpers import opened, rows, screen_text, wait_for_diff
from tests.unit.test_cpu_captures import self_times

CPU = DATA / "cpu"


# The lines below are what `kerneltui open` drew in tmux at 80x24 and 160x45 (docs/browser.md, "A CPU capture");
# each time is also summed here from the trace's JSON (tests/unit/test_cpu_captures.self_times).

KERNEL = "graph_0_cpp_fused_add_relu_0"


def calls_us(name: str, key: str) -> list[float]:
    """Each call's self time (µs) from the JSON."""
    return self_times(name)[key]


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def drawn(widget) -> list[str]:
    return [line.rstrip() for line in screen_text(widget) if line.strip()]


async def test_open_on_a_compiled_cpu_capture_lists_its_cpp_kernel_at_80x24():
    truth = calls_us("add_relu_n1000000_compiled", KERNEL)  # µs: 15227.6, 6925.4, 15193.3
    assert [fmt_ns(sum(truth) * 1e3), fmt_ns(sum(truth) * 1e3 / 3), fmt_ns(min(truth) * 1e3),
            fmt_ns(max(truth) * 1e3)] == ["37.35ms", "12.45ms", "6.93ms", "15.23ms"]
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(80, 24)) as (app, _pilot):
        table = app.screen.query_one(KernelTable)
        assert rows(table) == [[KERNEL, "3", "37.35ms", "12.45ms", "6.93ms", "15.23ms", "100.0%",
                                "aten::add + aten::relu at add_relu.py:14 in add_relu"]]
        assert drawn(table) == [
            "CPU work                       Count   Total▼     Mean  Share Op / provenance",
            "graph_0_cpp_fused_add_relu_0       3  37.35ms  12.45ms 100.0% aten::add + aten:…",
        ]
        header = text_of(app, "#header")
        assert header == "add_relu_n1000000_com… · 1 row · 3 calls · 37.35ms CPU · 3 steps · CPU capture"
        assert text_of(app, "#counts") == "1/1 row · 3/3 calls · 37.35ms CPU"
        assert "GPU" not in header + text_of(app, "#counts")
        assert drawn(app.screen.query_one(DetailsPane))[:5] == [
            "graph_0_cpp_fused_add_relu_0",
            "computes aten::add, aten::relu",
            "    from add_relu.py:14 in add_relu",
            "   calls 3 · 37.35ms CPU self time (100.0%) · mean 12.45ms, 6.93ms–15.23ms",
            "    kind compiled C++ kernel (Inductor)",
        ]
        assert app.screen.kernels.trace.gpu.empty and summarize(app.screen.kernels.trace).gpu_time_ns == 0


async def test_open_on_a_compiled_cpu_capture_at_160x45_shows_its_calls():
    truth = calls_us("add_relu_n1000000_compiled", KERNEL)
    assert [fmt_ns(t * 1e3) for t in truth] == ["15.23ms", "6.93ms", "15.19ms"]
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(160, 45)) as (app, _pilot):
        assert text_of(app, "#header") == (
            "add_relu_n1000000_compiled.json.gz · 1 CPU work row · 3 calls · 37.35ms CPU self time of 39.97ms"
            " · 3 steps · cpu (x86_64) · CPU capture · healthy")
        assert drawn(app.screen.query_one(KernelTable))[1] == \
            "graph_0_cpp_fused_add_relu_0       3  37.35ms  12.45ms 100.0% aten::add + aten::relu at add_rel…"
        assert drawn(app.screen.query_one(DetailsPane)) == [
            "graph_0_cpp_fused_add_relu_0",
            "computes aten::add, aten::relu",
            "    from add_relu.py:14 in add_relu",
            "   calls 3 · 37.35ms CPU self time (100.0%) · mean 12.45ms,",
            "         6.93ms–15.23ms",
            "    kind compiled C++ kernel (Inductor)",
            "op stack ProfilerStep#1 › Torch-Compiled Region: 0/0 › ##",
            "         Call CompiledFxGraph",
            "         fs5ejemnsmtxn6do373fqfckng4gx2rook6gkep5tlyvhhe4sdmg",
            "         ## › graph_0_cpp_fused_add_relu_0",
            "  call 1 15.23ms self · starts 450.7µs · ProfilerStep#1",
            "  call 2 6.93ms self · starts 16.76ms · ProfilerStep#2",
            "  call 3 15.19ms self · starts 24.47ms · ProfilerStep#3",
        ]


async def test_open_on_an_eager_cpu_capture_lists_its_aten_ops_by_self_time():
    name = "add_relu_n1000000_eager"
    totals = {k: fmt_ns(sum(calls_us(name, k)) * 1e3) for k in ("aten::clamp_min", "aten::add", "aten::relu")}
    assert totals == {"aten::clamp_min": "23.92ms", "aten::add": "22.72ms", "aten::relu": "69.2µs"}
    async with opened(CPU / f"{name}.json.gz", size=(80, 24)) as (app, pilot):
        table = app.screen.query_one(KernelTable)
        assert drawn(table) == [
            "CPU work          Count   Total▼     Mean  Share Op / provenance",
            "aten::clamp_min       3  23.92ms   7.97ms  51.2% aten::relu",
            "aten::add             3  22.72ms   7.57ms  48.6% aten::add",
            "aten::relu            3   69.2µs   23.1µs   0.1% aten::relu",
        ]
        assert text_of(app, "#header") == \
            "add_relu_n1000000_ea… · 3 rows · 9 calls · 46.71ms CPU · 3 steps · CPU capture"
        assert text_of(app, "#counts") == "3/3 rows · 9/9 calls · 46.71ms CPU"
        assert drawn(app.screen.query_one(DetailsPane))[:5] == [
            "aten::clamp_min",
            "      op aten::relu",
            "   calls 3 · 23.92ms CPU self time (51.2%) · mean 7.97ms, 7.92ms–8.06ms",
            "    kind ATen op",
            "op stack ProfilerStep#1 › aten::relu › aten::clamp_min",
        ]
        await pilot.press("down")
        await pilot.pause()
        assert drawn(app.screen.query_one(DetailsPane))[1] == "      op aten::add (no ATen op around it)"


async def test_search_finds_cpu_work_by_name_and_by_source_line():
    async with opened(CPU / "add_relu_n1000000_eager.json.gz", size=(80, 24)) as (app, pilot):
        table = app.screen.query_one(KernelTable)
        await pilot.press("slash", *"relu")  # aten::relu, and aten::clamp_min that runs inside it
        await pilot.pause()
        assert [r[0] for r in rows(table)] == ["aten::clamp_min", "aten::relu"]
        assert text_of(app, "#counts") == "2/3 rows · 6/9 calls · 23.99ms CPU (51.4%)"
        await pilot.press(*"xyz")
        await pilot.pause()
        assert table.row_count() == 0 and table.empty_text == NO_CPU_MATCH
        assert drawn(app.screen.query_one(DetailsPane)) == ["no CPU work matches the search", "search reluxyz"]
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(80, 24)) as (app, pilot):
        await pilot.press("slash", *"add_relu.py:14")
        await pilot.pause()
        assert [r[0] for r in rows(app.screen.query_one(KernelTable))] == [KERNEL]
        assert text_of(app, "#counts") == "1/1 row · 3/3 calls · 37.35ms CPU (100.0%)"


async def test_a_step_scopes_the_cpu_work_to_its_calls():
    truth = calls_us("add_relu_n1000000_compiled", KERNEL)
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(160, 45)) as (app, pilot):
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert fmt_ns(truth[0] * 1e3) == "15.23ms"
        assert text_of(app, "#counts") == " in ProfilerStep#1 (step 1 of 3) · 1/1 row · 1/1 call · 15.23ms CPU"
        assert rows(app.screen.query_one(KernelTable))[0][:3] == [KERNEL, "1", "15.23ms"]
        assert "  call 1 15.23ms self · starts 450.7µs · ProfilerStep#1" in drawn(app.screen.query_one(DetailsPane))


async def test_grouping_is_refused_on_a_cpu_capture_and_y_copies_the_row():
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(80, 24)) as (app, pilot):
        await pilot.press("g")
        await pilot.pause()
        assert app.screen.query_state.grouping == "kernel"
        assert [n.message for n in app._notifications][-1] == \
            "a CPU capture's table lists its CPU work by self time: grouping is for GPU launches"
        assert app.screen._selected_name() == KERNEL


async def test_a_cnn_cpu_capture_lists_its_29_rows_by_self_time():
    name = "cnn_sgd_batch8_compiled"
    truth = self_times(name)
    work = {k: v for k, v in truth.items() if k.startswith("aten::") or "cpp_fused" in k}
    top = sorted(work, key=lambda k: -sum(work[k]))[:2]
    async with opened(CPU / f"{name}.json.gz", size=(160, 45)) as (app, _pilot):
        table = app.screen.query_one(KernelTable)
        assert table.row_count() == len(work) == 29
        assert [r[0] for r in rows(table)[:2]] == top == [
            "aten::convolution_backward",
            "graph_0_cpp_fused_convolution_backward_native_batch_norm_backward_nll_loss_forward_threshold_backward_2"]
        assert rows(table)[0][1:3] == ["6", fmt_ns(sum(truth[top[0]]) * 1e3)] == ["6", "61.03ms"]


async def test_a_cpu_capture_without_cpu_work_says_where_its_ops_are(tmp_path):
    import gzip

    doc = json.loads(gzip.decompress((CPU / "add_relu_n1000000_compiled.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["name"] = "my_op"  # neither a compiled C++ kernel nor an ATen op
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    async with opened(path, size=(160, 30)) as (app, _pilot):
        table = app.screen.query_one(KernelTable)
        assert table.row_count() == 0 and table.empty_text == CPU_CAPTURE
        assert "· 0 CPU work rows · 0 calls ·" in text_of(app, "#header")


async def test_open_on_a_gpu_trace_keeps_its_header():
    async with opened(shared_trace("add_relu_1M_eager"), size=(160, 30)) as (app, _pilot):
        assert "CPU capture" not in str(app.screen.query_one("#header").render())


async def test_the_diff_header_says_when_b_recompiled_in_its_profiled_calls(tmp_path):
    import gzip

    from kerneltui.tui.diff.app import build_app

    doc = json.loads(gzip.decompress((CPU / "item_print_batch32_width64_compiled.json.gz").read_bytes()))
    doc["kerneltui"]["capture"].update(allow_recompile=True, recompiles=[
        {"call": "profiled compiled call 2", "reason": "forward recompiled: size of x changed"}])
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    app = build_app(str(CPU / "item_print_batch32_width64_eager.json.gz"), str(b))
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for_diff(pilot)
        assert isinstance(app.screen, DiffScreen)
        line = app.screen.query_one("#diff-capture")
        assert line.display
        assert str(line.render()).startswith("B was written with --allow-recompile: 1 recompile inside its profiled "
                                             "calls (profiled compiled call 2: forward recompiled: size of x changed)")
        assert str(app.screen.query_one("#diff-verdict").render()).startswith("no speed verdict: B recompiled")


async def test_the_diff_header_line_is_hidden_for_a_gpu_pair():
    from kerneltui.tui.diff.app import build_app

    app = build_app(str(shared_trace("add_relu_1M_eager")), str(shared_trace("add_relu_1M_compiled")))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_diff(pilot)
        assert not app.screen.query_one("#diff-capture").display


async def test_i_on_a_cpu_pair_says_what_fused_into_what():
    from kerneltui.tui.diff.app import build_app
    from kerneltui.tui.diff.panels import VerdictPanel

    app = build_app(str(CPU / "add_relu_n1000000_eager.json.gz"), str(CPU / "add_relu_n1000000_compiled.json.gz"))
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for_diff(pilot)
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, VerdictPanel)
        text = str(app.screen.body()[0])
        assert "A and B are CPU captures: no GPU activity" in text
        assert "fused on the CPU, A → B (CPU self time per step):\n  aten::add + aten::relu → " \
               "graph_0_cpp_fused_add_relu_0 (add_relu.py:14 in add_relu): 2 → 1 per step" in text


async def test_a_range_counts_the_cpu_work_that_starts_in_it():
    from kerneltui.tui.widgets.timeline import Timeline

    truth = calls_us("add_relu_n1000000_compiled", KERNEL)
    async with opened(CPU / "add_relu_n1000000_compiled.json.gz", size=(160, 45)) as (app, pilot):
        app.screen.query_one(Timeline).set_range(10_000_000, 30_000_000)  # ns from the window's start: calls 2, 3
        await pilot.pause()
        await pilot.pause()
        assert fmt_ns((truth[1] + truth[2]) * 1e3) == "22.12ms"
        assert str(app.screen.query_one("#range").render()).splitlines() == [
            "range 10.00ms–30.00ms (20.00ms) · 2 calls start in it · 22.12ms CPU self time",
            "top graph_0_cpp_fused_add_relu_0 22.12ms ×2"]
        assert text_of(app, "#counts") == " in range 10.00ms–30.00ms · 1/1 row · 2/2 calls · 22.12ms CPU"


async def test_a_bad_regex_keeps_the_cpu_work_and_v_comes_back_to_its_details():
    async with opened(CPU / "add_relu_n1000000_eager.json.gz", size=(80, 24)) as (app, pilot):
        await pilot.press("slash", "slash", "[")
        await pilot.pause()
        assert text_of(app, "#counts").startswith("bad regex '['")
        assert app.screen.query_one(KernelTable).row_count() == 3
        await pilot.press("escape", "escape", "v")  # leave the box, clear the search, the launch list
        await pilot.pause()
        assert drawn(app.screen.query_one(DetailsPane)) == ["nothing selected"]  # the launch list: no launch
        await pilot.press("v")
        await pilot.pause()
        assert drawn(app.screen.query_one(DetailsPane))[:2] == ["aten::clamp_min", "      op aten::relu"]


async def test_o_then_v_lists_the_cpu_ops_in_time_order():
    from tests.tui.helpers import parts

    async with opened(CPU / "add_relu_n1000000_eager.json.gz", size=(80, 24)) as (app, pilot):
        await pilot.press("O", "v")
        await pilot.pause()
        _screen, _table, launches, _timeline = parts(app)
        assert [r[4] for r in rows(launches)] == ["aten::add", "aten::relu", "aten::clamp_min"] * 3
        assert drawn(app.screen.query_one(DetailsPane))[:2] == ["aten::add", "       kind cpu_op"]
