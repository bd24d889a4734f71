"""The bottom line: the screen's main keys, drawn once.

Textual's Footer recomposes whenever the focus moves (its keys follow the
focused widget), which restyled a dozen widgets and cost ~40 ms on every
table/timeline switch. The keys a screen shows here are its own (``show=True``
bindings), the same wherever the focus is; every other key is in help and the
command palette.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from kerneltui.tui.screens.help import key_text


def keys_text(bindings: Iterable[Binding], palette: bool = True) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for b in bindings:
        if b.show:
            text.append(f" {key_text(b).split(' ')[0]}", style="bold")
            text.append(f" {b.description} ")
    if palette:
        text.append(" ^p", style="bold")
        text.append(" palette")
    return text


class KeysBar(Static):
    DEFAULT_CSS = "KeysBar { height: 1; background: $panel; color: $text-muted; }"

    def __init__(self, bindings: Iterable[Binding], **kwargs) -> None:
        super().__init__(keys_text(bindings), **kwargs)
