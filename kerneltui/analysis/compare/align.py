"""What became what: the two kernel sequences of each step, aligned on the library work both run.

Per step (A's k-th with B's k-th) and per phase, in launch order:

1. anchors (see anchors.py) are matched in order, first by op and shapes (or
   kernel name where there is no op), then, in what is left between two
   matches, by class alone (an autotuned template in place of the GEMM);
2. between two matched anchors, A's kernels and B's kernels form a segment:
   "these N eager kernels -> these M Triton kernels". Dtype casts and 0-d
   tensor updates (BatchNorm's num_batches_tracked) are paired across the
   whole phase instead (by their types for the updates): Inductor leaves them
   standalone and moves them, often to the end of its graph;
3. an empty side says why: removed, or new in B.

Inductor's kernel names never decide a match; they only name rows. Every GPU
event of an aligned step is in exactly one row. Rows with the same content
(the same kernels on both sides) are merged, with counts per step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

import numpy as np

from kerneltui.analysis.compare.anchors import EventRoles
from kerneltui.analysis.provenance.split import SideProvenance
from kerneltui.analysis.provenance.split import reason as provenance_reason
from kerneltui.analysis.provenance.split import split as provenance_split

SHAPES_SHOWN = 2  # input shapes quoted in a reason


@dataclass
class Side:
    """One trace's GPU rows with what the alignment needs (arrays aligned with trace.gpu)."""

    roles: EventRoles
    keys: np.ndarray  # kernel key per row
    iteration: np.ndarray
    phase: np.ndarray  # "forward", "backward", "optimizer", ... per row
    order: np.ndarray  # rows sorted by launch order
    provenance: SideProvenance | None = None  # Inductor's record per row, where a capture kept it
    compiled: bool = False  # the side ran compiled code (regions, Triton kernels, graph replays)


@dataclass
class Row:
    kind: str
    phase: str
    a_rows: list[int] = field(default_factory=list)
    b_rows: list[int] = field(default_factory=list)
    reason: str = ""
    confidence: str = "high"


def align(a: Side, b: Side, pairs: int) -> list[Row]:
    """Rows over the first ``pairs`` steps of each side, merged by content."""
    rows: list[Row] = []
    for k in range(pairs):
        in_a, in_b = a.order[a.iteration[a.order] == k], b.order[b.iteration[b.order] == k]
        for phase in _phases(a.phase[in_a], b.phase[in_b]):
            rows += _align_phase(a, b, in_a[a.phase[in_a] == phase], in_b[b.phase[in_b] == phase], phase)
    return merge(rows, a, b)


def _phases(pa: np.ndarray, pb: np.ndarray) -> list[str]:
    return list(dict.fromkeys([*pa.tolist(), *pb.tolist()]))


def _align_phase(a: Side, b: Side, ra: np.ndarray, rb: np.ndarray, phase: str) -> list[Row]:
    rows = _movable_rows(a, b, ra, rb, phase)
    if rows:  # paired casts and 0-d updates leave the sequences; unpaired ones stay where they are
        ra = ra[~np.isin(ra, [r for row in rows for r in row.a_rows])]
        rb = rb[~np.isin(rb, [r for row in rows for r in row.b_rows])]
    items_a, items_b = _items(a, ra), _items(b, rb)
    matched = _match_anchors(a, b, items_a, items_b)
    moved_a, moved_b = _moved_anchors(a, b, items_a, items_b, matched)
    for ia, ib in zip(moved_a, moved_b):
        row = _anchor_row(a, b, items_a[ia], items_b[ib], phase, True)
        row.reason += "; at another place in the sequence"
        rows.append(row)
    moved_a, moved_b = set(moved_a), set(moved_b)
    prev = (-1, -1, True)
    segments: list[Segment] = []
    anchors: list[Row] = []
    for ia, ib, exact in [*matched, (len(items_a), len(items_b), True)]:
        seg_a = [r for i in range(prev[0] + 1, ia) if i not in moved_a for r in items_a[i]]
        seg_b = [r for i in range(prev[1] + 1, ib) if i not in moved_b for r in items_b[i]]
        anchored = prev[0] >= 0 or ia < len(items_a)  # a library call on at least one end
        segments.append(Segment(seg_a, seg_b, prev[2] and exact, anchored))
        if ia < len(items_a):
            anchors.append(_anchor_row(a, b, items_a[ia], items_b[ib], phase, exact))
        prev = (ia, ib, exact)
    if a.compiled or b.compiled:
        _rejoin_moved_work(a, b, segments)
    for i, segment in enumerate(segments):  # in sequence order: segment, anchor, segment, ...
        rows += _segment_rows(a, b, segment, phase)
        if i < len(anchors):
            rows.append(anchors[i])
    _absorb_epilogues(a, b, rows)
    return rows


@dataclass
class Segment:
    """What A and B ran between the same two matched library calls."""

    a_rows: list[int]
    b_rows: list[int]
    bounded: bool  # both library calls around it matched by identity
    anchored: bool  # a library call on at least one end
    moved: str = ""  # how work from a neighbouring segment joined it


def _rejoin_moved_work(a: Side, b: Side, segments: list[Segment]) -> None:
    """Work one side runs between two library calls and the other runs nothing for there, next to a
    segment where both ran something: Inductor moved it across a library call (it schedules its
    graph's kernels freely around the extern calls), so it joins that neighbour rather than read
    as removed (A) or new (B). The neighbour where the empty side ran relatively the most wins."""
    for i, seg in enumerate(segments):
        lonely = "a" if seg.a_rows and not seg.b_rows else "b" if seg.b_rows and not seg.a_rows else ""
        if not lonely:
            continue
        other = "b" if lonely == "a" else "a"
        keys = {"a": a.keys, "b": b.keys}
        candidates = []
        for j in (i - 1, i + 1):
            if 0 <= j < len(segments):
                near = segments[j]
                if near.a_rows and near.b_rows and keys["a"][near.a_rows].tolist() != keys["b"][near.b_rows].tolist():
                    mine, theirs = getattr(near, f"{lonely}_rows"), getattr(near, f"{other}_rows")
                    candidates.append((len(theirs) / len(mine), j == i + 1, j))
        if not candidates:
            continue
        _, _, j = max(candidates)
        near = segments[j]
        getattr(near, f"{lonely}_rows").extend(getattr(seg, f"{lonely}_rows"))
        getattr(seg, f"{lonely}_rows").clear()
        side = "A" if lonely == "a" else "B"
        near.moved = (f"; with {side}'s work from across the {'next' if j < i else 'previous'} library call, "
                      f"where {'B' if side == 'A' else 'A'} runs nothing (Inductor moved it)")
        near.bounded = False


def _items(side: Side, rows: np.ndarray) -> list[list[int]]:
    """The sequence as items: one per anchor (all its kernels), one per other kernel."""
    items: list[list[int]] = []
    at: dict[int, int] = {}
    anchor = side.roles.anchor
    for r in rows.tolist():
        aid = int(anchor[r])
        if aid == -1:
            items.append([r])
        elif aid in at:
            items[at[aid]].append(r)
        else:
            at[aid] = len(items)
            items.append([r])
    return items


def _identity(side: Side, item: list[int]):
    aid = int(side.roles.anchor[item[0]])
    return side.roles.identity.get(aid) if aid != -1 else None


def _match_anchors(a: Side, b: Side, items_a, items_b) -> list[tuple[int, int, bool]]:
    """(item of A, item of B, exact?) for matched anchors, in order."""
    ida = [(i, _identity(a, it)) for i, it in enumerate(items_a)]
    idb = [(i, _identity(b, it)) for i, it in enumerate(items_b)]
    ida, idb = [x for x in ida if x[1] is not None], [x for x in idb if x[1] is not None]
    exact = _lcs([x[1] for x in ida], [x[1] for x in idb])
    out = []
    prev_a = prev_b = -1
    for ja, jb in [*exact, (len(ida), len(idb))]:
        # between two exact matches: the same class in order (a template for the GEMM it replaced)
        gap_a, gap_b = ida[prev_a + 1 : ja], idb[prev_b + 1 : jb]
        for ga, gb in _lcs([x[1][0] for x in gap_a], [x[1][0] for x in gap_b]):
            out.append((gap_a[ga][0], gap_b[gb][0], False))
        if ja < len(ida):
            out.append((ida[ja][0], idb[jb][0], True))
        prev_a, prev_b = ja, jb
    return out


def _moved_anchors(a: Side, b: Side, items_a, items_b, matched) -> tuple[list[int], list[int]]:
    """Anchors left unmatched with the same identity on both sides: the same call, moved (a weight
    gradient Inductor computes at the end of its backward graph); then those computing the same
    product by another op (eager mm and add, compiled addmm accumulating into the tied weight's
    gradient: the same GEMM)."""
    done_a, done_b = {m[0] for m in matched}, {m[1] for m in matched}
    out_a, out_b = [], []
    for key_of in (_identity, _call):
        waiting: dict[tuple, list[int]] = {}
        for i, item in enumerate(items_b):
            key = key_of(b, item)
            if key is not None and i not in done_b:
                waiting.setdefault(key, []).append(i)
        for i, item in enumerate(items_a):
            key = key_of(a, item)
            if key is not None and i not in done_a and waiting.get(key):
                j = waiting[key].pop(0)
                out_a.append(i)
                out_b.append(j)
                done_a.add(i)
                done_b.add(j)
    return out_a, out_b


def _call(side: Side, item: list[int]) -> tuple | None:
    """What a library call computes (anchors.library_call), where its shapes are known."""
    aid = int(side.roles.anchor[item[0]])
    key = side.roles.call.get(aid) if aid != -1 else None
    return key if key is not None and None not in key and key[0] != "copy" else None


def _lcs(x: list, y: list) -> list[tuple[int, int]]:
    if not x or not y:
        return []
    blocks = SequenceMatcher(None, x, y, autojunk=False).get_matching_blocks()
    return [(blk.a + i, blk.b + i) for blk in blocks for i in range(blk.size)]


def _anchor_row(a: Side, b: Side, item_a: list[int], item_b: list[int], phase: str, exact: bool) -> Row:
    ident = _identity(a, item_a)
    same = Counter(a.keys[item_a].tolist()) == Counter(b.keys[item_b].tolist())
    what = _describe_anchor(ident)
    if same:
        # the same kernels from another op (Inductor runs addmm's bias add in its own kernel: mm)
        other = _identity(b, item_b)
        if other != ident and ident is not None and other is not None and len(ident) == len(other) == 3 \
                and ident[0] == other[0]:
            what = f"{ident[0]} ({_call_text(ident)} → {_call_text(other)})"
        return Row("same", phase, item_a, item_b, f"same {what}, same kernels")
    if not exact:
        other = _identity(b, item_b)
        template = any(str(b.keys[r]).startswith("triton_tem_") for r in item_b) or any(
            str(a.keys[r]).startswith("triton_tem_") for r in item_a)
        how = "an autotuned Triton template in its place" if template else f"matched by position to {_describe_anchor(other)}"
        return Row("replaced", phase, item_a, item_b, f"{what}: {how}", "medium")
    return Row("replaced", phase, item_a, item_b, f"same {what}, other kernels")


def _describe_anchor(ident) -> str:
    if ident is None:
        return "library call"
    if len(ident) == 3:
        return f"{ident[0]} ({_call_text(ident)})"
    return f"{ident[0]} kernel"


def _call_text(ident) -> str:
    """'aten::mm [64, 10] [10, 512]': an anchor identity's op and operand shapes."""
    _, op, shapes = ident
    dims = " ".join(str(list(_unfreeze(s))) for s in shapes if s)[:80] if shapes else ""
    return f"{op}{' ' + dims if dims else ''}"


def _unfreeze(value):
    return [_unfreeze(v) for v in value] if isinstance(value, tuple) else value


def _segment_rows(a: Side, b: Side, segment: Segment, phase: str) -> list[Row]:
    seg_a, seg_b = segment.a_rows, segment.b_rows
    if not seg_a and not seg_b:
        return []
    rows = []
    confidence = "high" if segment.bounded else "medium"
    where = "between these library calls" if segment.anchored else "here"
    if seg_a and not seg_b:
        rows.append(Row("only A", phase, seg_a, [], f"removed: B runs nothing {where}", confidence))
    elif seg_b and not seg_a:
        rows.append(Row("only B", phase, [], seg_b, f"new in B: A runs nothing {where}", confidence))
    elif a.keys[seg_a].tolist() == b.keys[seg_b].tolist():
        rows.append(Row("same", phase, seg_a, seg_b, "same kernels in the same place"))
    elif not (a.compiled or b.compiled):  # nothing was compiled: other kernels, not a fusion
        what = ("A and B ran other kernels between the same two library calls" if segment.anchored
                else f"A and B ran other kernels in the {phase}")
        rows.append(Row("changed", phase, seg_a, seg_b, what + " (neither side ran compiled code: nothing fused)",
                        confidence))
    else:
        what = ("what A ran between two library calls, and what B ran between the same two" if segment.anchored
                else f"all of the {phase}'s kernels on both sides (no library call to align on)")
        rows.extend(_by_provenance(a, b, seg_a, seg_b, phase, what + segment.moved, confidence))
    return rows


def _by_provenance(a: Side, b: Side, seg_a: list[int], seg_b: list[int], phase: str, what: str,
                   confidence: str) -> list[Row]:
    """A fused segment, split by the compiled side's provenance records where it has them."""
    compiled_is_b = b.provenance is not None and b.provenance.any
    if not compiled_is_b and not (a.provenance is not None and a.provenance.any):
        return [Row("fused", phase, seg_a, seg_b, what, confidence)]
    eager, compiled = (a, b) if compiled_is_b else (b, a)
    seg_e, seg_c = (seg_a, seg_b) if compiled_is_b else (seg_b, seg_a)
    parts = provenance_split(eager.provenance, compiled.provenance, seg_e, seg_c)
    rows = []
    for rows_e, rows_c, record, by_op_alone in parts.groups:
        kind = "replaced" if len(rows_e) == 1 else "fused"
        text = provenance_reason(record, "A" if compiled_is_b else "B", by_op_alone)
        ra, rb = (rows_e, rows_c) if compiled_is_b else (rows_c, rows_e)
        rows.append(Row(kind, phase, ra, rb, text, "high"))
    rest_a, rest_b = (parts.eager_rest, parts.compiled_rest) if compiled_is_b else (parts.compiled_rest,
                                                                                     parts.eager_rest)
    if rest_a and rest_b:
        rows.append(Row("fused", phase, rest_a, rest_b, what + " (no provenance record covers these)", confidence))
    elif rest_a or rest_b:
        only, change = ("only A", "removed") if rest_a else ("only B", "new in B")
        rows.append(Row(only, phase, rest_a, rest_b, f"{change}: {_why_alone(compiled, parts, compiled_is_b)}",
                        confidence))
    return rows


def _why_alone(compiled: Side, parts, compiled_is_b: bool) -> str:
    """Why the rows one side has left here have nothing on the other."""
    if parts.eager_rest:
        return f"no kernel of {'B' if compiled_is_b else 'A'}'s records covers these"
    recorded = sum(compiled.provenance.records[r] is not None for r in parts.compiled_rest)
    if recorded == len(parts.compiled_rest):
        return f"{'A' if compiled_is_b else 'B'} has no kernel left here that their records' ops cover"
    return ("no provenance record, and nothing of the other side left here" if not recorded
            else "no provenance record, or the other side runs none of its record's ops here")


def _movable_rows(a: Side, b: Side, ra: np.ndarray, rb: np.ndarray, phase: str) -> list[Row]:
    """Work Inductor moves around its graph, paired across the phase: casts, and 0-d updates by their types."""
    rows = []
    ca = [r for r in ra.tolist() if a.roles.cast[r]]
    cb = [r for r in rb.tolist() if b.roles.cast[r]]
    if ca and cb:
        same = a.keys[ca].tolist() == b.keys[cb].tolist()
        rows.append(Row("same" if same else "cast", phase, ca, cb, "dtype casts on both sides" + (
            "" if same else _casts_left(len(ca), len(cb), b.compiled))))
    graph_a = [r for r in ra.tolist() if a.roles.graph_input[r]]
    graph_b = [r for r in rb.tolist() if b.roles.graph_input[r]]
    if graph_a or graph_b:
        what = "copies the inputs into the CUDA graph's static buffers before each replay"
        kind = "same" if graph_a and graph_b else ("only A" if graph_a else "only B")
        rows.append(Row(kind, phase, graph_a, graph_b, what))
    sa = [r for r in ra.tolist() if a.roles.scalar[r]]
    sb = [r for r in rb.tolist() if b.roles.scalar[r]]
    sig_a, sig_b = a.roles.scalar_signature, b.roles.scalar_signature
    for sig in dict.fromkeys(sig_a[r] for r in sa):
        xa = [r for r in sa if sig_a[r] == sig]
        xb = [r for r in sb if sig_b[r] == sig]
        if xb:
            same = a.keys[xa].tolist() == b.keys[xb].tolist()
            rows.append(Row("same" if same else "replaced", phase, xa, xb, f"the same 0-d tensor updates ({sig})"))
    return rows


def _casts_left(in_a: int, in_b: int, b_compiled: bool) -> str:
    """How many of A's casts B still runs as casts of their own."""
    who = "Inductor" if b_compiled else "B"
    if in_b >= in_a:
        return f": {who} left them standalone, unfused"
    return (f": {who} runs {in_b} of A's {in_a} as kernels of their own; "
            f"the other {in_a - in_b} fused into neighbouring kernels")


def _absorb_epilogues(a: Side, b: Side, rows: list[Row]) -> None:
    """A template that replaced a GEMM also took the elementwise work after it (its epilogue)."""
    for i in range(len(rows) - 1):
        anchor, nxt = rows[i], rows[i + 1]
        if anchor.kind != "replaced" or not anchor.reason.endswith("template in its place"):
            continue
        b_template = any(str(b.keys[r]).startswith("triton_tem_") for r in anchor.b_rows)
        if b_template and nxt.kind == "only A":
            anchor.a_rows += nxt.a_rows
            nxt.a_rows = []
        elif not b_template and nxt.kind == "only B":
            anchor.b_rows += nxt.b_rows
            nxt.b_rows = []
        else:
            continue
        anchor.kind = "fused"
        anchor.reason += ", with the elementwise work after the GEMM (its epilogue)"
    rows[:] = [r for r in rows if r.a_rows or r.b_rows]


def merge(rows: list[Row], a: Side, b: Side) -> list[Row]:
    """Rows with the same content (phase, kind, kernel sequences) become one."""
    merged: dict[tuple, Row] = {}
    reasons: dict[tuple, dict[str, None]] = {}
    for row in rows:
        key = (row.phase, row.kind, tuple(a.keys[row.a_rows].tolist()), tuple(b.keys[row.b_rows].tolist()))
        if key in merged:
            merged[key].a_rows += row.a_rows
            merged[key].b_rows += row.b_rows
            if row.confidence != "high":
                merged[key].confidence = row.confidence
        else:
            merged[key] = Row(row.kind, row.phase, list(row.a_rows), list(row.b_rows), row.reason, row.confidence)
        reasons.setdefault(key, {})[row.reason] = None
    for key, row in merged.items():
        if len(reasons[key]) > 1:  # the same kernels for calls of other shapes: say the first is one of several
            others = len(reasons[key]) - 1
            row.reason += f" (and {others} other {'shape' if others == 1 else 'shapes'}, run by the same kernels)"
    return list(merged.values())
