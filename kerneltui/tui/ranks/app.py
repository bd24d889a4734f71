"""The `kerneltui open DIR` app: summarises the ranks in a thread worker, shows RanksScreen, and
opens a rank's trace in the browser as `kerneltui open FILE` would.

The ranks are summarised in worker processes (analysis/ranks/run.py) started from the app's
thread, with the forkserver context. Their resource tracker must start from the main thread,
before Textual replaces sys.stderr (its fileno() is -1 there, and the tracker's start fails):
``build_ranks_app`` starts it (``ranks.run.start_rank_workers``), as `open` starts the decode workers.
"""

from __future__ import annotations

import functools
import gc
from pathlib import Path

from textual import work
from textual.message import Message
from textual.worker import get_current_worker

from kerneltui.analysis.ranks.discover import rank_files
from kerneltui.analysis.ranks.job import Job, summarize_job
from kerneltui.analysis.ranks.run import start_rank_workers
from kerneltui.errors import UserError
from kerneltui.terminal_text import printable
from kerneltui.trace.model import load_trace
from kerneltui.tui.app import post_stages
from kerneltui.tui.loading_app import Loader, LoadingApp, paced
from kerneltui.tui.messages import (
    AnalysesReady,
    BrowseReady,
    KernelsReady,
    LoadProgress,
)
from kerneltui.tui.ranks.browser import (
    JobLoadingScreen,
    RankBrowserScreen,
    RankLoadingScreen,
)
from kerneltui.tui.ranks.screen import RanksScreen

TUI = Path(__file__).resolve().parents[1]


class RanksProgress(Message):
    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RanksProgress)


class JobReady(Message):
    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job


class RankFailed(Message):
    """A rank's trace could not be opened: its loading screen says why (the app goes on)."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class RanksApp(LoadingApp):
    CSS_PATH = [TUI / "app.tcss", TUI / "ranks" / "ranks.tcss"]  # the browser's look, and the ranks screen's
    TITLE = "kerneltui"

    def __init__(self, paths: list[str], cache: bool | None = None, loader: Loader | None = None) -> None:
        super().__init__(loader or functools.partial(load_trace, cache=cache, write_later=True))
        self.paths = [str(p) for p in paths]
        self.cache = cache
        self.job: Job | None = None

    def on_mount(self) -> None:
        label = self.paths[0] if len(self.paths) == 1 else f"{self.paths[0]} and {len(self.paths) - 1} more"
        self.push_screen(JobLoadingScreen(label))
        self.summarize()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="summarise ranks")
    def summarize(self) -> None:
        """Every rank summarised (a UserError, such as no trace at all, ends on the loading screen)."""
        files = rank_files(self.paths)
        self.post_message(RanksProgress(0, len(files)))
        job = summarize_job(files, cache=self.cache, progress=lambda done, total: self.post_message(
            RanksProgress(done, total)))
        if not get_current_worker().is_cancelled:
            self.post_message(JobReady(job))

    def on_ranks_progress(self, message: RanksProgress) -> None:
        if isinstance(self.screen, JobLoadingScreen):
            self.screen.ranks_done(message.done, message.total)

    def on_job_ready(self, message: JobReady) -> None:
        self.job = message.job
        self.switch_screen(RanksScreen(message.job))
        self.call_after_refresh(self.replay_pending_keys)

    # -- one rank in the browser -------------------------------------------------------
    def open_rank(self, index: int) -> None:
        rank = self.job.ranks[index]
        if rank.error:
            self.notify(printable(f"rank {rank.rank} could not be read: {rank.error}"), severity="error",
                        timeout=6, markup=False)
            return
        self.pending_keys = []
        self.push_screen(RankLoadingScreen(rank.path))
        self.load_rank(rank.path)

    @work(thread=True, exclusive=True, exit_on_error=False, group="rank", name="load rank")
    def load_rank(self, path: str) -> None:
        """As KernelTuiApp.load: read, link, aggregate; each stage posted as soon as it exists."""
        try:
            trace = self.loader(path, progress=paced(lambda f: self.post_message(LoadProgress(f))))
        except UserError as exc:  # worded on the rank's loading screen; the job stays open
            self.post_message(RankFailed(str(exc)))
            return
        post_stages(self, trace)

    def on_kernels_ready(self, message: KernelsReady) -> None:
        screen = self.screen
        meta = message.kernels.trace.meta
        if not isinstance(screen, RankLoadingScreen) or Path(screen.path) != Path(meta.path):
            return  # left (escape) before it was read
        self.switch_screen(RankBrowserScreen(message.kernels))
        self.call_after_refresh(self.replay_pending_keys)
        for warning in meta.warnings:
            self.notify(printable(warning), title="trace", severity="warning", timeout=8, markup=False)

    def on_browse_ready(self, message: BrowseReady) -> None:
        screen = self._rank_browser(message.browse.kernels.trace)
        if screen is not None and screen.browse is None:
            screen.set_browse(message.browse)
            gc.freeze()  # as KernelTuiApp: the trace's objects stay out of full collections while shown

    def on_analyses_ready(self, message: AnalysesReady) -> None:
        screen = self._rank_browser(message.trace)
        if screen is not None:
            screen.set_analyses(message.analyses)
            gc.freeze()

    def _rank_browser(self, trace) -> RankBrowserScreen | None:
        """The browser of this trace's rank, under a help or module screen as well (another rank's
        stage, posted before its worker was cancelled, finds none)."""
        for screen in self.screen_stack:
            if isinstance(screen, RankBrowserScreen) and screen.kernels.trace is trace:
                return screen
        return None

    def on_rank_failed(self, message: RankFailed) -> None:
        if isinstance(self.screen, RankLoadingScreen):
            self.screen.failed(message.error)

    def action_back_to_ranks(self) -> None:
        self.back_to_ranks()

    def back_to_ranks(self) -> None:
        """From a rank's browser or loading screen to the ranks, the rank's trace let go."""
        self.workers.cancel_group(self, "rank")
        self.pending_keys = []
        while len(self.screen_stack) > 1 and not isinstance(self.screen, RanksScreen):
            self.pop_screen()
        gc.unfreeze()

    # -- exit ---------------------------------------------------------------------------
    def action_quit(self) -> None:
        # as `kerneltui summary DIR`: a rank that could not be read makes the status 2
        failed = self.job is not None and any(r.error for r in self.job.ranks)
        self.exit(return_code=2 if self.error or failed else 0)

    def after_exit_lines(self) -> list[str]:
        if self.error:
            return [f"kerneltui: {printable(self.error)}"]
        return [printable(f"kerneltui: {w}") for w in (self.job.warnings if self.job else ())]


def build_ranks_app(paths: list[str], cache: bool | None = None, loader: Loader | None = None) -> RanksApp:
    start_rank_workers(paths, cache)  # from this (main) thread, before Textual's
    return RanksApp(paths, cache, loader)
