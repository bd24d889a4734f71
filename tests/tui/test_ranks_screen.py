"""`kerneltui open DIR`: the ranks screen on an 8-rank job with a planted straggler and clock offsets.

The job comes from tests/support/rank_job.py (a real A100 DDP rank, replicated with known truth);
the figures on screen must be `kerneltui summary DIR`'s, at 80x24 and at 160x45.
"""

from __future__ import annotations

import shutil
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from textual.worker import WorkerFailed

from kerneltui import ranks_report
from kerneltui.analysis.ranks.job import summarize_job
from kerneltui.tui import status
from kerneltui.tui.ranks.app import RanksProgress, build_ranks_app
from kerneltui.tui.ranks.browser import (
    JobLoadingScreen,
    RankBrowserScreen,
    RankLoadingScreen,
)
from kerneltui.tui.ranks.lanes import RankLanes
from kerneltui.tui.ranks.layout import ranks_layout
from kerneltui.tui.ranks.paint import interval_shares, profile_shares
from kerneltui.tui.ranks.screen import RanksScreen
from kerneltui.tui.ranks.table import RankTable
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.units import fmt_ns
from tests.conftest import external_trace
from tests.support.rank_job import make_job
from tests.tui.helpers import screen_text, until

NARROW, WIDE = (80, 24), (160, 45)
STRAGGLER = 3
TWO_RANKS = [external_trace(f"hta__trace_filter__sampled_rank-{r}.json.gz") for r in (0, 1)]  # no shared collective


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ranks") / "job"
    make_job(out, ranks=8, straggler=STRAGGLER)
    return out


@asynccontextmanager
async def opened(paths, size=NARROW, hook=None, **kwargs):
    app = build_ranks_app([str(p) for p in paths], **kwargs)
    async with app.run_test(size=size, message_hook=hook) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RanksScreen) or app.error)
        yield app, pilot


async def wait_for(pilot, done, rounds: int = 200) -> None:
    app = pilot.app
    for _ in range(rounds):
        try:
            await app.workers.wait_for_complete()
        except WorkerFailed:
            pass  # a load error: the app shows it
        await pilot.pause()
        if done():
            break
    await pilot.pause()


def text(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def report_cells(job) -> dict[int, list[str]]:
    """`kerneltui summary DIR`'s table, as cells per rank (the screen must show the same figures)."""
    lines = ranks_report.as_table(job).splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "step"])
    out = {}
    for line in lines[at + 1:]:
        if not line.strip():
            break
        cells = line.replace(" ◀", "").split()
        out[int(cells[0])] = cells[1:]
    return out


def formatted(row: dict, key: str) -> str:
    v = row[key]
    return "–" if v is None else "0" if v == 0 else ("+" if key == "clock_offset_ns" and v > 0 else "") + fmt_ns(v)


# -- the screen's figures ---------------------------------------------------------------------
@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x45"])
async def test_rows_are_the_reports_figures_and_the_straggler_is_marked(job_dir, size):
    job = summarize_job([str(job_dir)])
    assert job.stragglers == [STRAGGLER]
    async with opened([job_dir], size) as (app, _):
        table = app.screen.query_one(RankTable)
        keys = ("step_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "clock_offset_ns",
                "lateness_ns")
        by_report = report_cells(job)
        for i, row in enumerate(ranks_report.rank_rows(job)):
            cells = table.cells(i)
            assert cells[1:9] == [formatted(row, k) for k in keys]
            assert cells[1:9] == by_report[row["rank"]]
            assert cells[0] == (f"{STRAGGLER} ◀" if row["rank"] == STRAGGLER else str(row["rank"]))
        drawn = screen_text(table)
        assert len([line for line in drawn if "◀" in line]) == 1
        assert drawn[1 + STRAGGLER].lstrip().startswith(f"{STRAGGLER} ◀ ")
        assert all(line.rstrip() for line in drawn[1:9])  # every rank has its row on screen
        lanes = screen_text(app.screen.query_one(RankLanes))
        labels = [line.split("│")[0].strip() for line in lanes[1:] if line.split("│")[0].strip()]
        assert labels == [f"r{r}" + (" ◀" if r == STRAGGLER else "") for r in range(8)]  # every lane fits
        header = text(app, "#ranks-header")
        t = job.totals()
        assert f"step {fmt_ns(t['step_ns_max'])}" in header
        assert f"{t['comm_share']:.1%}" in header and f"{t['exposed_comm_share']:.1%}" in header
        assert len(header) <= size[0] - 2
        notes = text(app, "#ranks-notes")
        assert notes.startswith("straggler: rank 3 reaches the collectives")


async def test_c_toggles_the_clock_and_the_header_says_which(job_dir):
    job = summarize_job([str(job_dir)])
    async with opened([job_dir]) as (app, pilot):
        lanes = app.screen.query_one(RankLanes)
        assert text(app, "#ranks-header").endswith("· aligned")
        assert str(lanes.border_title).startswith("aligned clocks")
        origin = min(r.window_start_ns - job.offsets_ns[r.rank] for r in job.ranks)
        assert lanes.clock.shift == {r.rank: job.offsets_ns[r.rank] + origin for r in job.ranks}
        aligned_lines = screen_text(lanes)
        await pilot.press("c")
        assert text(app, "#ranks-header").endswith("· raw")
        assert str(lanes.border_title).startswith("raw clocks")
        assert lanes.clock.shift == {r.rank: min(s.window_start_ns for s in job.ranks) for r in job.ranks}
        assert screen_text(lanes) != aligned_lines  # the offsets (up to 4.5 ms) move the lanes
        await pilot.press("c")
        assert text(app, "#ranks-header").endswith("· aligned")


async def test_aligned_clocks_line_up_the_collectives_that_end_together(job_dir):
    """With clocks aligned the ranks' collectives overlap; on raw clocks the planted offsets pull them apart."""
    job = summarize_job([str(job_dir)])
    async with opened([job_dir], WIDE) as (app, pilot):
        lanes = app.screen.query_one(RankLanes)

        def comm_cells(rank: int) -> set[int]:
            edges = np.linspace(*lanes.clock.bounds, 2001).astype(np.int64)
            c = job.ranks[rank].collectives
            shift = lanes.clock.shift[rank]
            return set(np.flatnonzero(interval_shares(c.start - shift, c.end - shift, edges) > 0).tolist())

        # the rank whose clock is furthest from rank 0's, the straggler aside (it arrives late by design)
        far = max((r for r in job.offsets_ns if r != STRAGGLER), key=lambda r: abs(job.offsets_ns[r]))
        aligned = len(comm_cells(0) & comm_cells(far)) / len(comm_cells(0))
        await pilot.press("c")
        raw = len(comm_cells(0) & comm_cells(far)) / len(comm_cells(0))
        assert aligned > 0.9 and raw < 0.5


async def test_unknown_offsets_are_said_and_the_lanes_stay_raw():
    async with opened(TWO_RANKS) as (app, pilot):
        header = text(app, "#ranks-header")
        assert header.endswith("· raw (offsets unknown)")
        table = app.screen.query_one(RankTable)
        assert [table.cells(i)[7:9] for i in range(2)] == [["–", "–"], ["–", "–"]]
        await pilot.press("c")
        assert text(app, "#ranks-header") == header
        assert any("offsets unknown" in n.message for n in app._notifications)
        assert not app.screen.query_one(RankLanes).clock.aligned


# -- keys: open a rank, come back, help, notes, quit -------------------------------------------
@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x45"])
async def test_enter_opens_the_rank_in_the_browser_and_b_or_escape_come_back(job_dir, size):
    async with opened([job_dir], size) as (app, pilot):
        for _ in range(STRAGGLER):
            await pilot.press("down")
        assert "rank 3 · ◀ straggler" in text(app, "#rank-line")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RankBrowserScreen) and app.screen.browse is not None)
        browser = app.screen
        assert isinstance(browser, RankBrowserScreen)
        assert Path(browser.kernels.trace.meta.path).name == "worker3.pt.trace.json"
        header = text(app, "#header")
        assert header == str(status.header(browser.kernels, browser.browse, size[0]))
        assert "3,774 launches" in header
        await pilot.press("b")  # nothing to go back to inside the browser: the ranks
        assert isinstance(app.screen, RanksScreen)
        assert app.screen.query_one(RankTable).cursor == STRAGGLER
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RankBrowserScreen) and app.screen.browse is not None)
        await pilot.press("slash", "n", "c", "c", "l")
        await pilot.press("escape")  # leaves the search box
        assert isinstance(app.screen, RankBrowserScreen)
        await pilot.press("escape")  # clears the search
        assert isinstance(app.screen, RankBrowserScreen)
        await pilot.press("escape")  # nothing left to clear: the ranks
        assert isinstance(app.screen, RanksScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def test_b_in_the_browser_goes_back_inside_it_first(job_dir):
    async with opened([job_dir]) as (app, pilot):
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RankBrowserScreen) and app.screen.browse is not None)
        await pilot.press("t")  # a jump: b returns from it, in the browser
        await pilot.press("b")
        assert isinstance(app.screen, RankBrowserScreen)
        await pilot.press("b")
        assert isinstance(app.screen, RanksScreen)


async def test_escape_while_a_rank_loads_returns_to_the_ranks(job_dir, monkeypatch):
    import threading

    gate = threading.Event()

    def slow_loader(path, progress=None):
        gate.wait(10)
        from kerneltui.trace.model import load_trace

        return load_trace(path)

    async with opened([job_dir], loader=slow_loader) as (app, pilot):
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RankLoadingScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, RanksScreen)
        gate.set()
        await wait_for(pilot, lambda: False, rounds=5)
        assert isinstance(app.screen, RanksScreen)  # the late trace opens nothing


async def test_help_and_notes_list_everything(job_dir):
    job = summarize_job([str(job_dir)])
    async with opened([job_dir]) as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=200, record=True)
        console.print(app.screen.table)
        shown = console.export_text()
        for b in RanksScreen.BINDINGS:
            assert (b.tooltip or b.description) in shown
        assert "communication (collective kernels)" in shown
        await pilot.press("escape")
        await pilot.press("i")
        notes = str(app.screen.query_one("#ranks-notes-text").render())
        for line in ranks_report.findings(job) + list(job.warnings):
            assert line in notes  # whole, where the screen cuts them to a line
        assert "rank 7: " in notes and "worker7.pt.trace.json" in notes
        await pilot.press("escape")
        assert isinstance(app.screen, RanksScreen)


async def test_lanes_beyond_the_screen_scroll_with_the_cursor(tmp_path):
    make_job(tmp_path / "job", ranks=24, straggler=20)
    async with opened([tmp_path / "job"]) as (app, pilot):
        lanes = app.screen.query_one(RankLanes)
        assert "+" in screen_text(lanes)[-1] and "lanes ↓" in screen_text(lanes)[-1]
        await pilot.press("end")
        drawn = screen_text(lanes)
        assert drawn[-1].startswith("r23 ") and "lanes ↑" in drawn[-1]
        assert lanes.selected == 23
        await pilot.press("home")
        assert screen_text(lanes)[1].startswith("r0 ")
        await pilot.press(*["down"] * 20)
        assert any(line.startswith("r20 ◀") for line in screen_text(lanes))  # the straggler, selected, in view


async def test_zoom_pan_and_whole_job_keys_and_a_click_on_a_lane(job_dir):
    async with opened([job_dir]) as (app, pilot):
        lanes = app.screen.query_one(RankLanes)
        whole = lanes.window
        await pilot.press("plus")
        w0, w1 = lanes.window
        assert w1 - w0 == pytest.approx((whole[1] - whole[0]) / 2, rel=0.01)
        await pilot.press("full_stop")
        assert lanes.window[0] > w0
        await pilot.press("comma", "comma")
        assert lanes.window[0] < w0
        await pilot.press("minus", "minus")
        assert lanes.window == whole  # never wider than the job
        await pilot.press("plus", "w")
        assert lanes.window == whole
        await pilot.click(RankLanes, offset=(12, 2 + 5 * lanes.lane_height))  # the top border, the axis, rank 5
        assert app.screen.query_one(RankTable).cursor == 5 and lanes.selected == 5


# -- loading and errors ---------------------------------------------------------------------------
async def test_loading_counts_the_ranks_in_worker_processes(job_dir, monkeypatch):
    """Summarised in a pool started from the app's thread (the forkserver; stderr is Textual's there)."""
    monkeypatch.setenv("KERNELTUI_RANK_WORKERS", "2")
    posted = []
    async with opened([job_dir], hook=posted.append) as (app, _):
        assert isinstance(app.screen, RanksScreen) and not app.error
    done = [(m.done, m.total) for m in posted if isinstance(m, RanksProgress)]
    assert done[0] == (0, 8) and done[-1] == (8, 8)


async def test_loading_screen_says_rank_n_of_m(job_dir, monkeypatch):
    import threading

    from kerneltui.tui.ranks import app as app_module

    gate = threading.Event()

    def halfway(files, cache=None, progress=None):
        progress(3, len(files))
        gate.wait(10)
        return summarize_job(files, cache)

    monkeypatch.setattr(app_module, "summarize_job", halfway)
    app = build_ranks_app([str(job_dir)])
    async with app.run_test(size=NARROW) as pilot:
        for _ in range(20):
            await pilot.pause()
        assert isinstance(app.screen, JobLoadingScreen)
        assert text(app, "#loading-stage") == "rank 3 of 8"
        assert app.screen.query_one("#loading-bar").percentage == 3 / 8
        gate.set()
        await wait_for(pilot, lambda: isinstance(app.screen, RanksScreen))
        assert isinstance(app.screen, RanksScreen)


async def test_no_trace_files_end_the_app_with_the_message_and_status_2(tmp_path):
    async with opened([tmp_path]) as (app, pilot):
        message = f"kerneltui: {tmp_path}: no trace files (*.json, *.json.gz) in this directory"
        assert text(app, "#loading-title") == message
        await pilot.press("q")
    assert app.return_code == 2
    assert app.after_exit_lines() == [message]


async def test_a_rank_that_failed_shows_its_error_and_the_others_stay(job_dir, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for r in (0, 1):
        shutil.copy(job_dir / f"worker{r}.pt.trace.json", job)
    (job / "worker2.pt.trace.json").write_text('{"traceEvents": [')
    async with opened([job]) as (app, pilot):
        table = app.screen.query_one(RankTable)
        row = screen_text(table)[3]
        assert row.lstrip().startswith("2 failed: worker2.pt.trace.json is not valid JSON")
        lane = next(line for line in screen_text(app.screen.query_one(RankLanes)) if line.startswith("r2 "))
        assert "│ failed: worker2.pt.trace.json is not valid JSON" in lane
        await pilot.press("end", "enter")
        assert isinstance(app.screen, RanksScreen)  # nothing to open
        assert any("could not be read" in n.message for n in app._notifications)
        await pilot.press("q")
    assert app.return_code == 2  # as `kerneltui summary DIR`


def test_open_of_a_directory_runs_the_ranks_app_and_no_cache_reaches_the_summary(job_dir, monkeypatch):
    from kerneltui import cli
    from kerneltui.tui.ranks import app as app_module

    seen = []

    class Done(Exception):
        pass

    def fake_build(paths, cache=None, loader=None):
        seen.append((paths, cache))
        raise Done

    monkeypatch.setattr(app_module, "build_ranks_app", fake_build)
    monkeypatch.setattr("kerneltui.commands.open.interactive", lambda: True)  # as on a terminal
    for argv in (["open", str(job_dir), "--no-cache"], ["open", str(job_dir / "worker0.pt.trace.json"),
                                                        str(job_dir / "worker1.pt.trace.json")]):
        with pytest.raises(Done):
            cli.main(argv)
    assert seen == [([str(job_dir)], False), ([str(job_dir / "worker0.pt.trace.json"),
                                               str(job_dir / "worker1.pt.trace.json")], None)]


async def test_the_app_hands_its_cache_setting_to_the_summary_and_the_rank_loader(job_dir, monkeypatch):
    from kerneltui.tui.ranks import app as app_module

    caches = []

    def recording(files, cache=None, progress=None):
        caches.append(cache)
        return summarize_job(files, cache)

    monkeypatch.setattr(app_module, "summarize_job", recording)
    async with opened([job_dir], cache=False) as (app, _):
        assert caches == [False]
        assert app.loader.keywords == {"cache": False, "write_later": True}  # as `open FILE --no-cache`


# -- the pieces without a screen ------------------------------------------------------------------
def test_layout_fits_8_ranks_at_80x24_and_splits_more():
    assert ranks_layout(24, 8, 3) == ranks_layout(24, 8, 2)  # two note rows at most
    layout = ranks_layout(24, 8, 3)
    assert (layout.table_rows, layout.lanes_rows, layout.lane_height) == (9, 9, 1)
    assert ranks_layout(45, 8, 3).lane_height == 3  # compute, communication, a gap
    many = ranks_layout(24, 64, 2)
    assert many.table_rows + many.lanes_rows == 24 - 4 - 2 and many.lanes_rows >= 3


def test_profile_and_interval_shares_are_exact_on_cells():
    edges = np.array([0, 10, 20, 30, 40])
    assert profile_shares(np.array([1, 0, 0.5, 0], np.float32), 0, 40, edges).tolist() == [1, 0, 0.5, 0]
    assert profile_shares(np.array([1, 0], np.float32), 10, 20, edges).tolist() == [0, 1, 0, 0]  # shifted
    shares = interval_shares(np.array([5, 8, 30]), np.array([15, 12, 35]), edges)
    assert shares.tolist() == [0.5, 0.5, 0, 0.5]  # overlaps once


# -- how it looks (snapshots: update with --snapshot-update after looking at the report) ----------
@pytest.fixture
def relative_job(job_dir, monkeypatch) -> str:
    monkeypatch.chdir(job_dir.parent)  # file names on screen without the temporary directory
    return job_dir.name


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["80x24", "160x45"])
def test_ranks_screen_snapshot(snap_compare, relative_job, size):
    async def loaded(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, RanksScreen))
        await pilot.press("down", "down", "down")

    assert snap_compare(build_ranks_app([relative_job]), terminal_size=size, run_before=loaded)


async def rank_browser_held_at(app, pilot, stage: str) -> RankBrowserScreen:
    """Enter on the first rank, then its browser as soon as it is up before ``stage`` (held) is in."""
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, RankBrowserScreen)
                and (stage == "build_browse" or app.screen.browse is not None))
    return app.screen


async def every_stage_in(browser: RankBrowserScreen, pilot) -> None:
    await until(pilot, lambda: browser.browse is not None and browser.browse.analyses is not None)


@pytest.mark.parametrize("stage", ["build_browse", "build_analyses"])
async def test_a_ranks_browser_takes_its_stages_under_a_help_screen_too(job_dir, monkeypatch, stage):
    """Stage 2 (the timeline) and stage 3 (the header's figures) reach the rank's browser though a help
    screen is over it (stage 2 was dropped: the browser then never drew its timeline, and kept its
    analyses for a stage 2 that never came)."""
    from tests.tui.test_loading import hold

    release = hold(monkeypatch, stage)
    async with opened([job_dir]) as (app, pilot):
        browser = await rank_browser_held_at(app, pilot, stage)
        assert (browser.browse is None) if stage == "build_browse" else (browser.browse.analyses is None)
        assert " · … · " in text(app, "#header") and "busy" not in text(app, "#header")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        release.set()
        await every_stage_in(browser, pilot)
        await pilot.press("escape")
        assert app.screen is browser and browser.browse.analyses is not None
        assert "busy" in text(app, "#header") and " · … · " not in text(app, "#header")


@pytest.mark.parametrize("stage", ["build_browse", "build_analyses"])
async def test_a_ranks_browser_takes_no_other_ranks_stage(job_dir, monkeypatch, stage):
    """Another rank's stage, posted by a worker that was left behind (escape, then another rank), is not
    this browser's: it keeps waiting for its own, which it then takes."""
    from types import SimpleNamespace

    from kerneltui.tui.messages import AnalysesReady, BrowseReady
    from tests.tui.test_loading import hold

    release = hold(monkeypatch, stage)
    async with opened([job_dir]) as (app, pilot):
        browser = await rank_browser_held_at(app, pilot, stage)
        other = SimpleNamespace(meta=browser.kernels.trace.meta)  # another rank's trace, as far as identity goes
        if stage == "build_browse":
            app.post_message(BrowseReady(SimpleNamespace(kernels=SimpleNamespace(trace=other), analyses=None)))
        else:
            app.post_message(AnalysesReady("another rank's analyses", other))
        await pilot.pause(0.1)
        assert (browser.browse is None) if stage == "build_browse" else (browser.browse.analyses is None)
        assert " · … · " in text(app, "#header")
        release.set()
        await every_stage_in(browser, pilot)
        assert browser.browse.kernels.trace is browser.kernels.trace
        assert "busy" in text(app, "#header") and " · … · " not in text(app, "#header")
