"""Messages from the loading worker to the app: the only way the worker talks to the UI."""

from __future__ import annotations

from textual.message import Message

from kerneltui.tui.model import Analyses, Browse, Kernels


class LoadProgress(Message):
    """Share of the file read (0..1); a newer one replaces an unprocessed older one."""

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = fraction

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgress)


class LoadStage(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class KernelsReady(Message):
    """Stage 1 done: the kernel table can be shown."""

    def __init__(self, kernels: Kernels) -> None:
        super().__init__()
        self.kernels = kernels


class BrowseReady(Message):
    """Stage 2 done: timeline, launch list, search, details."""

    def __init__(self, browse: Browse) -> None:
        super().__init__()
        self.browse = browse


class AnalysesReady(Message):
    """Stage 3 done: the header's figures, health, the step split and advice, bytes and bandwidth."""

    def __init__(self, analyses: Analyses, trace) -> None:
        super().__init__()
        self.analyses = analyses
        self.trace = trace  # whose: a rank's browser takes only its own trace's
