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


def keys_text(bindings: Iterable[Binding], palette: bool = True, width: int | None = None) -> Text:
    """The keys, each whole: where ``width`` cannot hold them all, the last ones are left out (help lists them)."""
    items = [(key_text(b).split(" ")[0], b.description) for b in bindings if b.show]
    if palette:
        items.append(("^p", "palette"))
    text = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for key, description in items:
        size = len(key) + len(description) + 3
        if width is not None and used + size - 1 > width:
            break
        text.append(f" {key}", style="bold")
        text.append(f" {description} ")
        used += size
    return text


class KeysBar(Static):
    DEFAULT_CSS = "KeysBar { height: 1; background: $panel; color: $text-muted; }"

    def __init__(self, bindings: Iterable[Binding], **kwargs) -> None:
        self.bindings = list(bindings)
        super().__init__(keys_text(self.bindings), **kwargs)

    def on_resize(self) -> None:
        self.update(keys_text(self.bindings, width=self.size.width))
