"""`T` in the browser: the module tree (analysis/modules.py), collapsible, and Enter to scope to a node.

Each node shows its forward, backward and total GPU time over the whole trace, its launches,
share and top kernels. → (or +) opens a node, ← (or -) closes it or goes to its parent; Enter
scopes the browser's table and timeline to the node's launches (its children's included);
escape or `T` goes back without changing the scope.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.modules import ModuleTree
from kerneltui.module_report import node_name
from kerneltui.terminal_text import printable
from kerneltui.tui.widgets.table import Column, VirtualTable
from kerneltui.units import fmt_ns, fmt_share


class ModuleTable(VirtualTable):
    """The tree's visible nodes: a node shows when every ancestor is open."""

    BINDINGS = [
        Binding("right,plus", "open", "Open", show=False, id="modules.open"),
        Binding("left,minus", "close", "Close / parent", show=False, id="modules.close"),
        Binding("asterisk", "open_all", "Open all", show=False, id="modules.open-all"),
    ]
    empty_text = "nothing placed: no GPU work in the steps"

    def __init__(self, tree: ModuleTree, **kwargs) -> None:
        super().__init__(**kwargs)
        self.modules = tree
        nodes = tree.nodes
        self.paths = nodes["path"].tolist()
        self.parents = [p if isinstance(p, str) else None for p in nodes["parent"].tolist()]
        # the nodes' fields as lists: a row drawn through DataFrame.iloc cost ~0.1 ms, 80 rows a draw
        self._depths = nodes["depth"].astype(int).tolist()
        self._fields = list(zip(nodes["label"].tolist(), nodes["forward_ns"].tolist(), nodes["backward_ns"].tolist(),
                                nodes["total_ns"].tolist(), nodes["launches"].tolist(), nodes["share"].tolist(),
                                nodes["top"].tolist()))
        self.has_children = {p for p in self.parents if p is not None}
        self.opened = {p for p, parent in zip(self.paths, self.parents) if parent is None}  # roots open: depth 1 shows
        self.rows_shown: list[int] = []
        self._refresh_visible()

    def _refresh_visible(self) -> None:
        shown: set[str | None] = {None}
        visible = []
        for i, (path, parent) in enumerate(zip(self.paths, self.parents)):
            if parent is None or (parent in shown and parent in self.opened):
                visible.append(i)
                shown.add(path)
        self.rows_shown = visible

    def columns(self) -> list[Column]:
        unit = "module" if self.modules.by == "module" else "forward op"
        return [Column("name", unit, 0), Column("forward", "forward", 9, "right"),
                Column("backward", "backward", 9, "right"), Column("total", "total", 9, "right"),
                Column("launches", "launches", 8, "right", show_from=72), Column("share", "share", 6, "right"),
                Column("top", "top kernel", 40, show_from=130)]

    def row_count(self) -> int:
        return len(self.rows_shown)

    def path_at(self, row: int) -> str:
        return self.paths[self.rows_shown[row]]

    def cells(self, row: int) -> list[str]:
        i = self.rows_shown[row]
        path, depth = self.paths[i], self._depths[i]
        label, forward, backward, total, launches, share, top = self._fields[i]
        mark = ("▾ " if path in self.opened else "▸ ") if path in self.has_children else "· "
        name = "  " * depth + mark + printable(node_name(path, 0, self.modules.by, label) if not depth
                                               else path.rsplit(".", 1)[-1])
        return [name, _ns(forward), _ns(backward), _ns(total), f"{int(launches):,}", fmt_share(float(share)),
                printable(top[0] if len(top) else "")]

    def action_open(self) -> None:
        if not self.row_count():
            return
        path = self.path_at(self.cursor)
        if path in self.has_children and path not in self.opened:
            self.opened.add(path)
            self._changed(path)

    def action_close(self) -> None:
        if not self.row_count():
            return
        path = self.path_at(self.cursor)
        if path in self.opened and path in self.has_children:
            self.opened.discard(path)
            self._changed(path)
            return
        parent = self.parents[self.rows_shown[self.cursor]]
        if parent is not None:
            self.move_cursor(self.rows_shown.index(self.paths.index(parent)))

    def action_open_all(self) -> None:
        self.opened |= self.has_children
        self._changed(self.path_at(self.cursor) if self.row_count() else None)

    def _changed(self, keep: str | None) -> None:
        self._refresh_visible()
        self.reset()
        if keep is not None:
            self.move_cursor(self.rows_shown.index(self.paths.index(keep)))


def _ns(ns) -> str:
    return fmt_ns(int(ns)) if ns else "–"


class ModulesScreen(ModalScreen[str | None]):
    """The tree over the browser; dismisses with the path to scope to, or None."""

    DEFAULT_CSS = """
    ModulesScreen { background: $background; }
    ModulesScreen #modules-head { height: auto; padding: 0 1; background: $panel; }
    ModulesScreen #modules-table { height: 1fr; }
    """

    BINDINGS = [Binding("escape,T,q", "dismiss_none", "Back", id="modules.back")]

    def __init__(self, tree: ModuleTree, current: str = "") -> None:
        super().__init__()
        self.modules, self.current = tree, current

    def compose(self) -> ComposeResult:
        t = self.modules
        unit = "module" if t.by == "module" else "forward op"
        head = Text(f"GPU time by {unit}", style="bold")
        head.append(f"  {fmt_share(t.placed_share)} of {fmt_ns(t.gpu_ns)} placed"
                    + "".join(f" · ({printable(what)}) {fmt_ns(ns)}" for what, ns, _ in t.unplaced))
        head.append("\n⏎ scope the table and timeline to a node · → ← open/close · * open all · escape back",
                    style="dim")
        if t.hint():
            head.append(f"\n{t.hint()}", style="dim")
        yield Static(head, id="modules-head")
        yield ModuleTable(t, id="modules-table")

    def on_screen_resume(self) -> None:
        """Each time it is shown (the browser keeps it installed): on the node in scope, else on the top."""
        table = self.query_one(ModuleTable)
        self.set_focus(table)
        if self.current and self.current in table.paths:
            # open the ancestors of the node in scope, and put the cursor on it
            i = table.paths.index(self.current)
            parent = table.parents[i]
            while parent is not None:
                table.opened.add(parent)
                parent = table.parents[table.paths.index(parent)]
            table._changed(self.current)
        elif table.row_count():
            table.move_cursor(0)

    def on_virtual_table_activated(self, event: VirtualTable.Activated) -> None:
        event.stop()
        self.dismiss(self.query_one(ModuleTable).path_at(event.row))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
