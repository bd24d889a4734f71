"""Trace health on screen: the browser's health line and H report, overlaps on rows of their own with the
details saying which kernel overlaps which, and the diff's damaged side and rows."""

from __future__ import annotations

import gzip
import json

import numpy as np

from kerneltui.tui.diff.header import sides_table
from kerneltui.tui.details import launch_details
from kerneltui.tui.diff.table import MatchTable
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.health import HealthScreen
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.timeline import Timeline
from tests.conftest import DATA, shared_trace
from tests.tui.helpers import opened, screen_text
from tests.tui.test_diff_screen import opened as opened_diff
from tests.tui.test_diff_screen import wait_for_diff

OLD = DATA / "external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


async def test_a_damaged_trace_says_so_under_the_header_and_h_shows_the_report():
    async with opened(OLD) as (app, pilot):
        line = text_of(app, "#health")
        assert line == "⚠ NOT HEALTHY: 7.3% of GPU events without launch  (H: the report)"
    async with opened(OLD, size=(200, 40)) as (app, pilot):
        assert text_of(app, "#health") == ("⚠ NOT HEALTHY: 7.3% of GPU events (733) have no launch call (all at the "
                                           "start: launched before the profiler started): their op and source line "
                                           "are unknown  (H: the report)")
        await pilot.press("H")
        assert isinstance(app.screen, HealthScreen)
        report = str(app.screen.query_one("#health-text").render())
        assert "NOT HEALTHY: 1 cause changes figures" in report
        assert "no_launch          733 GPU events (7.3%), 35.17ms GPU" in report
        assert "below_resolution   292 GPU events (2.9%)" in report
        await pilot.press("escape")
        assert isinstance(app.screen, BrowserScreen)


async def test_a_healthy_trace_has_no_health_line_and_says_healthy_where_it_fits():
    async with opened(shared_trace("gpt_train_eager"), size=(160, 40)) as (app, pilot):
        assert not app.screen.query_one("#health").display
        assert text_of(app, "#header").endswith(" · NVIDIA H200 · healthy")
    async with opened(shared_trace("gpt_train_eager")) as (app, pilot):  # 80 columns: the file name comes first
        assert not text_of(app, "#header").endswith("healthy")


async def test_pdl_overlaps_get_a_row_and_the_details_name_the_kernel_they_overlap():
    async with opened(shared_trace("resnet18_train_eager"), size=(160, 45)) as (app, pilot):
        screen = app.screen
        health = screen.browse.analyses.health
        later = int(np.flatnonzero(health.overlapped >= 0)[0])
        earlier = int(health.overlapped[later])
        g = screen.kernels.trace.gpu
        assert "segment_k" in str(g["short"].iat[earlier]) and "split_k" in str(g["short"].iat[later])
        wgrad = "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_" \
                "warpgroupsize1x1x1_g1_execute_"
        assert launch_details(screen.kernels, screen.browse, later).value("health") == (
            f"starts 1.25µs before {wgrad}segment_k_on_kernel__5x_cudnn (at 14.09ms) ends, on its stream: "
            "programmatic dependent launch (expected); drawn on a row of its own")
        assert launch_details(screen.kernels, screen.browse, earlier).value("health") == (
            f"{wgrad}split_k_kernel__5x_cudnn (at 14.11ms) starts 1.25µs before this one ends, on its stream")
        screen.select_launch(later, source=None)
        await pilot.pause()
        drawn = screen_text(screen.query_one(DetailsPane))
        assert any("health" in line and "starts 1.25µs before sm90_xmma" in line for line in drawn), drawn
        labels = [lane.label for lane in screen.query_one(Timeline).lanes]
        assert labels[:2] == ["GPU0 s7", "GPU0 s7 +1"]


async def test_the_diff_marks_a_damaged_side_and_its_rows(tmp_path):
    doc = json.loads(gzip.open(shared_trace("gpt_train_eager")).read())
    launches = [i for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "cudaLaunchKernel"]
    dropped = set(launches[100:103])
    doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in dropped]
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(doc))
    async with opened_diff(shared_trace("gpt_train_eager"), damaged, size=(120, 40)) as (app, pilot):
        await wait_for_diff(pilot)
        d = app.screen.view.diff
        heads = sides_table(d, full=True).columns
        assert [str(c._cells[0]) for c in heads[1:3]] == ["A gpt_train_eager.json.gz", "B ⚠ damaged.json"]
        table = app.screen.query_one(MatchTable)
        marked = [i for i in range(table.row_count()) if table.cells(i)[0].startswith("⚠ ")]
        assert len(marked) == (d.matches["health"] != "").sum() == 1
        await pilot.press("H")
        assert isinstance(app.screen, HealthScreen)
        report = str(app.screen.query_one("#health-text").render())
        assert "gpt_train_eager.json.gz\nhealthy" in report
        assert "no_launch          3 GPU events (0.3%)" in report
        await pilot.press("H")
        assert not isinstance(app.screen, HealthScreen)
