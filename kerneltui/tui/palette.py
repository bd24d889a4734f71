"""ctrl+p: every action of the screen, by name, with its key (the same bindings help lists).

A screen lists its keys once, as help sections (``key_sections()``); the palette
and help both read them, so a key in one is in the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from textual.binding import Binding
from textual.markup import escape
from textual.app import SystemCommand

from kerneltui.tui.screens.help import key_text


def palette_commands(screen) -> Iterable[SystemCommand]:
    """One command per binding with an action, run where it is declared (screen, widget or app)."""
    seen: set[str] = set()
    sections = screen.key_sections() if hasattr(screen, "key_sections") else [("", screen.BINDINGS)]
    for _, items in sections:
        for item in items:
            if not isinstance(item, Binding) or not item.action:
                continue
            target = _namespace(screen, item)
            if target is None or item.action in ("command_palette", "help.close") or item.id in seen:
                continue
            seen.add(item.id or item.action)
            # the palette reads titles as markup: a key like [ or / must stay text
            title = escape(f"{item.description} · {key_text(item)}")
            help_text = escape(item.tooltip or item.description)
            yield SystemCommand(title, help_text, partial(_run, screen, item.action, target))


def _namespace(screen, binding: Binding):
    """Where a binding's action runs: the app for app.*, else the screen or the widget that declares it."""
    if binding.action.startswith("app."):
        return screen.app
    if binding in getattr(type(screen), "BINDINGS", ()):
        return screen
    for widget in screen.query("*"):
        if binding in getattr(type(widget), "BINDINGS", ()):
            return widget
    return screen.app if binding in getattr(type(screen.app), "BINDINGS", ()) else None


async def _run(screen, action: str, target) -> None:
    await screen.app.run_action(action.removeprefix("app."), target)
