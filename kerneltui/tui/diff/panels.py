"""Panels over the diff screen: one matched row's kernels (enter), the whole verdict (i).

Both are modal screens that escape (or their own key again) closes; they never stack,
and they hold Rich Text only (trace text made printable, never parsed as markup).
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.compare.diff import TraceDiff
from kerneltui.analysis.compare.row_kernels import KernelLine, row_kernels
from kerneltui.diff_report import (
    DAMAGED_MARK,
    explanations,
    headline_rows,
    health_lines,
    match_label,
    nbytes,
    num,
    side_rate,
)
from kerneltui.terminal_text import printable
from kerneltui.units import fmt_ns


class _Panel(ModalScreen):
    """A scrollable box; escape, q or the key that opened it closes it."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close", id="panel.close")]
    heading = ""

    def body(self) -> list:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="panel-box"):
            yield Static(Text(f"{self.heading}  (escape closes; ↑↓ scroll)", style="bold"), id="panel-title")
            for part in self.body():
                yield Static(part)

    def on_mount(self) -> None:
        self.query_one("#panel-box").focus()

    def plain(self, width: int = 78) -> str:
        """The panel's text as a terminal of ``width`` columns shows it (for tests and exports)."""
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        for part in self.body():
            console.print(part)
        return console.export_text()

    def action_dismiss(self) -> None:
        self.dismiss()


class RowPanel(_Panel):
    """Enter on a matched row: A's kernels and B's side by side, with their launching ops, where they
    came from (source line, module, provenance), launches, µs and bytes per step, and why they matched."""

    BINDINGS = [Binding("escape,q,enter", "dismiss", "Close", id="row.close"),
                Binding("z", "zoom", "Zoom the timelines to the row", id="row.zoom")]
    heading = "The row"

    def __init__(self, diff: TraceDiff, match, zoom) -> None:
        super().__init__()
        self.diff, self.m, self.zoom = diff, match, zoom

    def body(self) -> list:
        m, d = self.m, self.diff
        unit = d.b.unit
        head = Text()
        head.append(f"{match_label(m.kind, m.confidence)}  ", style="bold")
        head.append(printable(m.name) + "\n")
        head.append("why: ", style="bold")
        head.append(printable(m.reason) + "\n")
        if getattr(m, "health", ""):
            head.append(f"{DAMAGED_MARK} damaged: ", style="bold reverse")
            head.append(printable(m.health) + " (these figures are not to be trusted; H: the report)\n", style="bold")
        head.append(f"per {unit}: {num(m.a_count)} → {num(m.b_count)} launches, {_us(m.a_ns)} → {_us(m.b_ns)} µs "
                    f"({_us(m.delta_ns, sign=True)}), {nbytes(m.a_bytes)} → {nbytes(m.b_bytes)}; "
                    f"A {side_rate(m, 'a')}, B {side_rate(m, 'b')}   z zooms the timelines to it", style="dim")
        sides = Table.grid(padding=(0, 2), expand=True)
        sides.add_column(ratio=1, overflow="fold")
        sides.add_column(ratio=1, overflow="fold")
        a = row_kernels(d.events["a"], m.a_rows, d.pairs) if d.events else []
        b = row_kernels(d.events["b"], m.b_rows, d.pairs) if d.events else []
        sides.add_row(Text(f"A  {printable(d.a.path.rsplit('/', 1)[-1])}", style="bold"),
                      Text(f"B  {printable(d.b.path.rsplit('/', 1)[-1])}", style="bold"))
        sides.add_row(_kernels(a, unit), _kernels(b, unit))
        return [head, sides]

    def action_zoom(self) -> None:
        self.dismiss()
        self.zoom()


def _kernels(lines: list[KernelLine], unit: str) -> Text:
    if not lines:
        return Text("nothing here", style="dim")
    text = Text()
    for k in lines:
        text.append(printable(k.name) + "\n", style="bold")
        text.append(f"  ×{num(k.count)}/{unit}, {_us(k.ns)} µs, {nbytes(k.bytes)}\n")
        if k.op and k.op != k.name:
            text.append(f"  op {printable(k.op)}\n", style="dim")
        if k.where:
            text.append(f"  {printable(k.where)}\n", style="dim")
    text.rstrip()
    return text


def _us(ns: float, sign: bool = False) -> str:
    if ns is None or ns != ns:
        return "–"
    return f"{ns / 1e3:{'+' if sign else ''},.2f}"


class VerdictPanel(_Panel):
    """i: the whole verdict, the facts, every figure of A beside B, and what was not compared."""

    BINDINGS = [Binding("escape,q,i", "dismiss", "Close", id="verdict.close")]
    heading = "The verdict"

    def __init__(self, diff: TraceDiff) -> None:
        super().__init__()
        self.diff = diff

    def body(self) -> list:
        d = self.diff
        verdict = Text()
        if d.comparable.ok is False:
            verdict.append("NOT COMPARABLE: ", style="bold reverse")
            verdict.append(printable("; ".join(d.comparable.reasons)) + "\n")
        verdict.append(printable(d.verdict.text) + "\n\n", style="bold")
        for note in d.capture_notes:
            verdict.append(printable(note) + "\n", style="bold")
        verdict.append(printable("; ".join(d.facts)))
        if d.cpu_fusions:  # two CPU captures: what fused into what (analysis/compare/cpu_fusion.py)
            verdict.append(f"\n\nfused on the CPU, {d.cpu_fusions_direction} (CPU self time per {d.b.unit}):",
                           style="bold")
            for f in d.cpu_fusions:
                verdict.append("\n  " + printable(f.line(d.b.unit)))
        figures = Table.grid(padding=(0, 2))
        for _ in range(4):
            figures.add_column(no_wrap=True)
        figures.add_row(Text(""), Text("A", style="bold"), Text("B", style="bold"), Text("B/A", style="dim"))
        for fact, a, b, r in headline_rows(d):
            figures.add_row(Text(fact, style="dim"), Text(a), Text(b), Text(r))
        notes = Text("not compared: ", style="bold")
        notes.append("; ".join(printable(n) for n in d.notes) if d.notes else "everything compared")
        explained = Text("\n".join(printable(e) for e in explanations(d) + health_lines(d)), style="dim")
        return [verdict, figures, explained, notes]


class ModulesPanel(_Panel):
    """T: forward and backward time per module (or forward op), A → B per step: which layers compiling helped."""

    BINDINGS = [Binding("escape,q,T", "dismiss", "Close", id="modules-panel.close")]
    heading = "By module"

    def __init__(self, diff: TraceDiff) -> None:
        super().__init__()
        self.diff = diff

    def body(self) -> list:
        d, m = self.diff, self.diff.modules
        unit = d.b.unit
        head = Text()
        if m is None or not len(m.rows):
            return [Text("nothing placed on a module or forward op on either side", style="dim")]
        head.append(f"per {unit}, forward and backward GPU time A → B; the backward on its forward op's module\n")
        for label, how in (("A", m.a_how), ("B", m.b_how)):
            head.append(f"{label}: {PLACED_BY.get(how, how or 'nothing placed')}\n", style="dim")
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        for _ in range(3):
            table.add_column(justify="right", no_wrap=True)
        table.add_row(Text("module", style="bold"), Text("forward A → B", style="bold"),
                      Text("backward A → B", style="bold"), Text(f"n/{unit}", style="bold"))
        for r in m.rows.itertuples():
            label = printable(r.label)
            name = Text(label if len(label) <= NAME_ROOM else "…" + label[-(NAME_ROOM - 1):])  # keep the leaf
            if r.matched_by != "path":
                name.append(" ≈", style="dim")
            table.add_row(name, _pair(r.a_forward_ns, r.b_forward_ns), _pair(r.a_backward_ns, r.b_backward_ns),
                          f"{num(r.a_launches)} → {num(r.b_launches)}")
        notes = Text("≈ matched by module class and order (provenance paths against frame names)", style="dim") \
            if (m.rows["matched_by"] != "path").any() else Text("")
        return [head, table, notes]


NAME_ROOM = 34  # a module path is cut from its root end: its leaf is what tells rows apart
PLACED_BY = {"frames": "by nn.Module frames (with_stack)", "forward op": "by forward op (no module frames)",
             "provenance": "compiled kernels by Inductor's provenance record",
             "compiled region": "compiled code as one place, the whole model: no provenance record "
                                "(kerneltui capture writes one), so no per-layer figures",
             "sequence": "by nn.Module frames (with_stack)"}


def _pair(a: float, b: float) -> str:
    if not a and not b:
        return "–"
    return f"{fmt_ns(a) if a else '–'} → {fmt_ns(b) if b else '–'}"
