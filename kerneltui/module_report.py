"""`kerneltui summary TRACE --by module`: the module tree (analysis/modules.py) as a table, JSON, CSV or Markdown.

The table fits 80 columns: each node's own name indented by its depth, then forward, backward
and total GPU time over the whole trace, launches and share. Names come from the trace: the
table and Markdown escape them (``terminal_text.printable``); JSON keeps them exact.
"""

from __future__ import annotations

import csv
import io
import textwrap

import orjson

from kerneltui.analysis.modules import ModuleTree, tree_dict
from kerneltui.terminal_text import json_safe, printable, printable_lines
from kerneltui.units import ellipsize, fmt_ns, fmt_share

NUMBERS = f"{'forward':>9} {'backward':>9} {'total':>9} {'launches':>8} {'share':>6}"


def node_name(path: str, depth: int, by: str, label: str) -> str:
    """A node as the tree shows it: its own part of the path, indented ('  Block_3'), or its label."""
    if by == "module" and depth:
        return "  " * depth + path.rsplit(".", 1)[-1]
    return label


def as_table(tree: ModuleTree, path: str, width: int = 80, top: int | None = None) -> str:
    unit = "module" if tree.by == "module" else "forward op"
    lines = [printable(path)]
    lines += textwrap.wrap(f"GPU time {fmt_ns(tree.gpu_ns)}, {fmt_share(tree.placed_share)} placed on a {unit}, "
                           "the optimizer or the loss; times over the whole trace, backward placed "
                           + ("on the module of the forward op it differentiates" if tree.by == "module"
                              else "on the forward op it differentiates"), width)
    if tree.hint():
        lines += textwrap.wrap(tree.hint(), width)
    name_width = width - len(NUMBERS) - 1
    lines += ["", f"{unit:<{name_width}} {NUMBERS}"]
    nodes = tree.nodes if top is None else tree.nodes.head(top)
    for r in nodes.itertuples():
        name = ellipsize(printable(node_name(r.path, r.depth, tree.by, r.label)), name_width)
        lines.append(f"{name:<{name_width}} {_numbers(r.forward_ns, r.backward_ns, r.total_ns, r.launches, r.share)}")
    if top is not None and len(tree.nodes) > top:
        lines.append(f"… {len(tree.nodes) - top} more (--top)")
    for what, ns, launches in tree.unplaced:
        share = ns / tree.gpu_ns if tree.gpu_ns else 0.0
        name = ellipsize(f"({what})", name_width)
        lines.append(f"{name:<{name_width}} {'':>9} {'':>9} {fmt_ns(ns):>9} {launches:>8,} {fmt_share(share):>6}")
    return printable_lines(lines)


def _numbers(forward: int, backward: int, total: int, launches: int, share: float) -> str:
    return f"{_ns(forward):>9} {_ns(backward):>9} {_ns(total):>9} {launches:>8,} {fmt_share(share):>6}"


def _ns(ns: int) -> str:
    return fmt_ns(ns) if ns else "–"


def as_json(tree: ModuleTree, path: str) -> str:
    doc = {"kerneltui_modules": 1, "path": path, **tree_dict(tree)}
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()) + "\n"


CSV_COLUMNS = ["path", "parent", "label", "depth", "forward_ns", "backward_ns", "total_ns", "launches", "share"]


def as_csv(tree: ModuleTree, for_terminal: bool = False) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in tree.nodes.itertuples():
        writer.writerow([r.path, r.parent if isinstance(r.parent, str) else "", r.label, r.depth, r.forward_ns, r.backward_ns, r.total_ns,
                         r.launches, f"{r.share:.6f}"])
    for what, ns, launches in tree.unplaced:
        writer.writerow([f"({what})", "", what, 0, "", "", ns, launches,
                         f"{ns / tree.gpu_ns:.6f}" if tree.gpu_ns else ""])
    text = out.getvalue()
    return printable_lines(text.splitlines()) if for_terminal else text


def as_markdown(tree: ModuleTree, path: str) -> str:
    unit = "module" if tree.by == "module" else "forward op"
    lines = [f"### GPU time by {unit}: `{printable(path)}`", "",
             f"{fmt_share(tree.placed_share)} of {fmt_ns(tree.gpu_ns)} placed on a {unit}, the optimizer or the loss."]
    if tree.hint():
        lines += ["", tree.hint()]
    lines += ["", f"| {unit} | forward | backward | total | launches | share |", "|---|---:|---:|---:|---:|---:|"]
    for r in tree.nodes.itertuples():
        name = "&nbsp;&nbsp;" * r.depth + _md(node_name(r.path, r.depth, tree.by, r.label))
        lines.append(f"| {name} | {_ns(r.forward_ns)} | {_ns(r.backward_ns)} | {_ns(r.total_ns)} | "
                     f"{r.launches:,} | {fmt_share(r.share)} |")
    for what, ns, launches in tree.unplaced:
        share = ns / tree.gpu_ns if tree.gpu_ns else 0.0
        lines.append(f"| ({_md(what)}) | | | {fmt_ns(ns)} | {launches:,} | {fmt_share(share)} |")
    return printable_lines(lines)


def _md(text: str) -> str:
    return printable(str(text)).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
