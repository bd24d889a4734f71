"""Opening the app headless on a real trace, and reading what it shows."""

from __future__ import annotations

from contextlib import asynccontextmanager

from textual.worker import WorkerFailed

from kerneltui.tui.app import build_app
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.widgets.kernel_table import KernelTable
from kerneltui.tui.widgets.launch_list import LaunchList
from kerneltui.tui.widgets.timeline import Timeline


@asynccontextmanager
async def opened(path, size=(80, 24), loader=None):
    app = build_app(str(path)) if loader is None else build_app(str(path), loader)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        yield app, pilot


async def settle(app, pilot, rounds: int = 50) -> None:
    """Until the worker is done and its stages (the browser's, then the analyses) reached the screen."""
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass  # a load error: the app shows it, which is what the caller checks
    for _ in range(rounds):
        await pilot.pause()
        screen = app.screen
        if isinstance(screen, BrowserScreen) and screen.browse is not None and screen.browse.analyses is not None:
            break
        if app.error:
            break
    await pilot.pause()



async def until(pilot, done, rounds: int = 300) -> None:
    """Poll every 20 ms, at most ``rounds`` times, until ``done()``: for a stage held on a thread, which a
    wait for the workers would wait out."""
    for _ in range(rounds):
        await pilot.pause(0.02)
        if done():
            return

def rows(table) -> list[list[str]]:
    return [table.cells(i) for i in range(table.row_count())]


def screen_text(widget) -> list[str]:
    """The lines a Line-API widget draws right now."""
    return [widget.render_line(y).text for y in range(widget.size.height)]


def parts(app):
    screen = app.screen
    return (screen, screen.query_one(KernelTable), screen.query_one(LaunchList), screen.query_one(Timeline))


async def wait_for_diff(pilot) -> None:
    """Until the worker has loaded and diffed both traces (or failed)."""
    app = pilot.app
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass  # a load error: the app shows it (test_a_bad_file_is_one_line_and_exit_2)
    for _ in range(100):
        await pilot.pause()
        if isinstance(app.screen, DiffScreen) or app.error:
            break
    await pilot.pause()


def browse_of(kernels):
    """Stages 2 and 3 as the app has them once both are in: the Browse with its Analyses."""
    from dataclasses import replace

    from kerneltui.tui.model import build_analyses, build_browse

    return replace(build_browse(kernels), analyses=build_analyses(kernels.trace))
