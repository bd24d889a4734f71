"""Loading: progress from the worker, the first screen before the rest, errors as the CLI words them."""

from __future__ import annotations

import threading
import time
from contextlib import asynccontextmanager

import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import load_trace
from kerneltui.tui import app as app_module
from kerneltui.tui import loading_app
from kerneltui.tui.app import build_app
from kerneltui.tui.messages import BrowseReady, KernelsReady, LoadProgress
from kerneltui.tui.query import Scope
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.health import HealthScreen
from kerneltui.tui.screens.loading import LoadingScreen
from kerneltui.tui.screens.overview import OverviewScreen
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.timeline import Timeline
from tests.conftest import PROJECT_TRACES, external_trace, shared_trace
from tests.tui.helpers import opened, screen_text, settle, until

EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
GPT = shared_trace("gpt_train_eager")
DAMAGED = external_trace("kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz")  # its health line shows


def cli_message(path) -> str:
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    return f"kerneltui: {caught.value}"


@pytest.mark.parametrize("content", [None, b"", b"not json", b'{"a": 1}'])
async def test_a_bad_file_shows_the_cli_message_in_the_app(tmp_path, content):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    expected = cli_message(path)
    async with opened(path) as (app, pilot):
        assert isinstance(app.screen, LoadingScreen)
        assert str(app.screen.query_one("#loading-title").render()) == expected
        assert "press q to quit" in str(app.screen.query_one("#loading-stage").render())
        await pilot.press("q")
    assert app.return_code == 2


def test_progress_is_paced_to_five_a_second_and_always_ends(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(loading_app.time, "monotonic", lambda: clock[0])
    shown = []
    report = loading_app.paced(shown.append)
    for step in range(60):  # a 1 GB trace read in 16 MB blocks over 1.8 s
        clock[0] += 0.03
        report((step + 1) / 61)
    report(1.0)
    assert shown[0] == 1 / 61  # the first at once
    assert len(shown) == 10 and shown[-1] == 1.0  # then one each 0.2 s (seven blocks), and the end
    assert shown[1] == 8 / 61


async def test_a_reader_reporting_every_10_ms_repaints_the_progress_a_few_times():
    posted = []

    took = []

    def loader(path, progress):
        start = time.monotonic()
        for step in range(60):  # ~0.6 s: unpaced, the app took (and drew) most of these 60
            time.sleep(0.01)
            progress((step + 1) / 60)
        took.append(time.monotonic() - start)
        return load_trace(path)

    app = build_app(str(EAGER), loader)
    async with app.run_test(message_hook=posted.append) as pilot:
        await settle(app, pilot)
    fractions = [m.fraction for m in posted if isinstance(m, LoadProgress)]
    # one at once, one each 0.2 s of the read (however slow this machine made it), and the end
    assert 2 <= len(fractions) <= took[0] / loading_app.PROGRESS_EVERY_S + 2
    assert fractions[0] == 1 / 60 and fractions[-1] == 1.0 and len(fractions) < 20


async def test_progress_messages_are_posted_from_the_worker():
    posted = []

    def loader(path, progress):
        for f in (0.25, 0.5, 1.0):
            progress(f)
        return load_trace(path)

    app = build_app(str(EAGER), loader)
    async with app.run_test(message_hook=posted.append) as pilot:
        await settle(app, pilot)
    kinds = [type(m) for m in posted]
    assert LoadProgress in kinds
    assert kinds.index(KernelsReady) < kinds.index(BrowseReady)
    assert [m.fraction for m in posted if isinstance(m, LoadProgress)][-1] == 1.0


def hold(monkeypatch, stage: str) -> threading.Event:
    """``app_module.<stage>`` (build_browse, build_analyses) held until the Event returned is set."""
    release = threading.Event()
    real = getattr(app_module, stage)

    def held(*args):
        release.wait(10)
        return real(*args)

    monkeypatch.setattr(app_module, stage, held)
    return release


async def test_kernel_table_shows_before_the_second_stage(monkeypatch):
    """The first screen does not wait for lanes, traffic and sources."""
    release = hold(monkeypatch, "build_browse")
    app = build_app(str(EAGER))
    async with app.run_test() as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowserScreen) and app.screen.is_mounted, rounds=100)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, BrowserScreen) and screen.browse is None
        assert screen.query_one("#kernels").row_count() == 2
        assert screen.query_one(DetailsPane).details.value("source") == "…"
        # the timeline says it is coming, not "no GPU work to draw" over an empty axis
        timeline = [line.strip() for line in screen_text(screen.query_one(Timeline)) if line.strip()]
        assert timeline == ["│drawing the timeline…"]
        release.set()
        await settle(app, pilot)
        assert screen.browse is not None
        assert screen.query_one(DetailsPane).details.value("source") == "not recorded (profile with with_stack=True)"
        drawn = screen_text(screen.query_one(Timeline))
        assert drawn[0].startswith("span ") and any(line.startswith("GPU0 s7") for line in drawn)


@asynccontextmanager
async def analyses_held(monkeypatch, path, size=(120, 40)):
    """The app with stage 2 in and stage 3 (build_analyses) held until the Event yielded is set."""
    release = hold(monkeypatch, "build_analyses")
    app = build_app(str(path))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowserScreen) and app.screen.browse is not None)
        await pilot.pause()
        yield app, pilot, release
        release.set()


async def test_the_timeline_launch_list_and_search_come_before_the_analyses(monkeypatch):
    """Stage 3 (the header's figures, health, o and H, bytes) comes after the browser works: until then the
    header, the details' bytes and a range's bytes say "…"; then each shows its figure."""
    async with analyses_held(monkeypatch, GPT) as (app, pilot, release):
        screen = app.screen
        assert screen.browse.analyses is None
        header = str(screen.query_one("#header").render())
        assert " · … · " in header and "busy" not in header
        drawn = screen_text(screen.query_one(Timeline))
        assert not any("drawing the timeline" in line for line in drawn)
        assert any(line.startswith("GPU0 s7") for line in drawn)
        details = screen.query_one(DetailsPane)
        assert details.details.value("bytes") == "…"
        assert details.details.value("source") != "…"  # stage 2's
        start = int(screen.kernels.trace.gpu["ts"].min())
        screen.set_query(scope=Scope(start=start, end=start + 10**7))
        screen._show_range()
        first_line = str(screen.query_one("#range").render()).splitlines()[0]
        assert first_line.endswith(" · 271 launches (236 kernels) · bytes …")
        await pilot.press("slash", "a", "t", "e", "n", "enter")  # the search works
        assert screen.query_state.pattern == "aten" and screen.query_one("#kernels").row_count() > 0
        release.set()
        await settle(app, pilot)
        header = str(screen.query_one("#header").render())
        assert "busy" in header and " · … · " not in header
        assert details.details.value("bytes") == "201.3 MB (eager)"  # the selection's, shown again
        first_line = str(screen.query_one("#range").render()).splitlines()[0]
        assert first_line.endswith(" · 271 launches (236 kernels) · 5.5 GB (+5 unknown)")


async def test_o_and_h_wait_for_the_analyses_in_the_order_pressed_each_screen_once(monkeypatch):
    """H, o, o, ] before stage 3: once it is in, the health report, then the overview over it (once), then
    the step scope; ] (which needs only stage 2) waited behind them."""
    async with analyses_held(monkeypatch, GPT) as (app, pilot, release):
        screen = app.screen
        await pilot.press("H", "o", "o", "right_square_bracket")
        assert app.screen is screen and screen.query_state.scope.iteration is None
        release.set()
        await settle(app, pilot)
        assert [type(s) for s in app.screen_stack[-3:]] == [BrowserScreen, HealthScreen, OverviewScreen]
        assert sum(isinstance(s, OverviewScreen) for s in app.screen_stack) == 1
        assert screen.query_state.scope.iteration == 0


async def test_o_pressed_before_stage_two_says_once_that_it_waits(monkeypatch):
    """o in stage 1 waits for stage 2, then for stage 3: the note that it waits is said once, with the
    browser up, and the overview opens once the analyses are in."""
    browse, analyses = hold(monkeypatch, "build_browse"), hold(monkeypatch, "build_analyses")
    app = build_app(str(GPT))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowserScreen) and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("o")
        browse.set()
        await until(pilot, lambda: screen.browse is not None)
        await pilot.pause()
        notes = [n.message for n in app._notifications if "opens once" in n.message]
        assert notes == ['the overview opens once the whole-trace analyses are in (the header\'s "…")']
        assert app.screen is screen
        analyses.set()
        await settle(app, pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_a_damaged_traces_health_line_is_laid_out_when_the_analyses_come(monkeypatch):
    """The health line (a row) arrives with stage 3: the layout gives it its row then, as a fresh layout
    would, not at the next key."""
    async with analyses_held(monkeypatch, DAMAGED, size=(120, 35)) as (app, pilot, release):
        screen = app.screen
        assert not screen.query_one("#health").display
        release.set()
        await settle(app, pilot)
        assert screen.query_one("#health").display
        kept = screen._layout
        screen.fit_layout()
        assert screen._layout == kept


async def test_the_second_stage_starts_once_the_table_is_drawn(monkeypatch):
    """Stage 2 (lanes, search, analyses) holds the GIL most of its time: it waits for the first draw."""
    started = []
    real = app_module.build_browse

    def noted_browse(kernels, memory=None):
        started.append((app.first_drawn.is_set(), isinstance(app.screen, BrowserScreen) and app.screen.is_mounted))
        return real(kernels, memory)

    monkeypatch.setattr(app_module, "build_browse", noted_browse)
    app = build_app(str(EAGER))
    async with app.run_test() as pilot:
        await settle(app, pilot)
        assert started == [(True, True)]
        assert app.screen.browse is not None


async def test_the_memory_table_is_made_once_beside_stage_1_and_stage_2_keeps_it(monkeypatch):
    """A real open: the memory table is made on its own thread, started before the launches are linked
    (stage 1 and the first draw leave a core idle), and the browser's is that one, not made again."""
    from kerneltui.tui import model as model_module

    made = []
    real = model_module.memory_table

    def noted(trace):
        made.append(threading.current_thread().name)
        return real(trace)

    monkeypatch.setattr(model_module, "memory_table", noted)
    async with opened(GPT) as (app, pilot):
        await until(pilot, lambda: app.screen.browse is not None, 200)
        assert app.screen.browse.memory is not None and app.screen.browse.memory.devices  # GPT has [memory] events
    assert made == ["kerneltui-memory"]


def test_without_room_for_two_threads_stage_2_makes_the_memory_table_itself(monkeypatch):
    from kerneltui.tui import model as model_module

    made = []
    real = model_module.memory_table
    monkeypatch.setattr(model_module, "memory_table", lambda trace: made.append(threading.current_thread()) or real(trace))
    monkeypatch.setattr(model_module, "_room_for_both", lambda events: False)
    trace = load_trace(GPT, cache=False)
    assert model_module.early_memory_table(trace) is None and made == []
    browse = model_module.build_browse(model_module.build_kernels(trace), None)
    assert made == [threading.current_thread()] and browse.memory.devices


async def test_a_bug_in_our_code_is_not_swallowed():
    def broken(path, progress):
        raise ZeroDivisionError("our bug")

    app = build_app(str(EAGER), broken)
    with pytest.raises(ZeroDivisionError):
        async with app.run_test() as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.pause()


async def test_a_damaged_trace_is_browsed_then_exits_2_with_its_warning(tmp_path):
    import gzip

    text = gzip.decompress(EAGER.read_bytes())
    at = text.index(b'"cat": "kernel"')
    path = tmp_path / "damaged.json"
    path.write_bytes(text[:at] + b"\x07" + text[at:])  # one stray byte: one event lost
    async with opened(path) as (app, pilot):
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("q")
    assert app.return_code == 2
    assert app.after_exit_lines() == [f"kerneltui: {path}: skipped 1 events: 1 not valid JSON"]


async def test_a_whole_trace_exits_0_with_nothing_to_say():
    async with opened(EAGER) as (app, pilot):
        await pilot.press("q")
    assert app.return_code == 0 and app.after_exit_lines() == []


@pytest.mark.parametrize("quit_during", ["build_kernels", "build_browse", "build_analyses"])
def test_a_load_cancelled_mid_stage_posts_nothing_after_that_stage(monkeypatch, quit_during):
    """A quit while a stage is being built (the worker cancelled): that stage and the ones after it are
    never posted, nor built; the stages before it were."""
    from types import SimpleNamespace

    from kerneltui.tui.messages import AnalysesReady

    worker = SimpleNamespace(is_cancelled=False)
    monkeypatch.setattr(app_module, "get_current_worker", lambda: worker)
    trace = SimpleNamespace(events=[0] * 3)
    built = []

    def stage(name, result):
        def build(*args):
            built.append(name)
            worker.is_cancelled = worker.is_cancelled or name == quit_during
            return result
        monkeypatch.setattr(app_module, name, build)

    monkeypatch.setattr(app_module, "early_memory_table", lambda trace: None)
    stage("build_kernels", SimpleNamespace(trace=trace))
    stage("build_browse", "browse")
    stage("build_analyses", "analyses")
    posted = []
    app_module.post_stages(SimpleNamespace(post_message=posted.append), trace)
    stages = ["build_kernels", "build_browse", "build_analyses"]
    assert built == stages[: stages.index(quit_during) + 1]
    ready = [type(m) for m in posted if isinstance(m, (KernelsReady, BrowseReady, AnalysesReady))]
    assert ready == [KernelsReady, BrowseReady, AnalysesReady][: stages.index(quit_during)]
