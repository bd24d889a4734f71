"""A fused segment of the diff split by Inductor's record of what each compiled kernel computes.

Without provenance the diff can only say "what A ran between two library calls, and what B ran
between the same two". With it, each compiled kernel is matched to the eager kernels whose
launching op it computes and whose source line it came from: exactly those, reason
"provenance". A record's ops are KernelProvenance.eager_ops, then, for what none of those cover,
called_ops; an eager kernel two records cover goes to the one with a kernel nearest its place.
Eager kernels no record covers, and compiled kernels without a record, stay in a row of their
own, as the structural matcher left them.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from kerneltui.analysis.explore.context import launch_context
from kerneltui.analysis.provenance.records import (
    KernelProvenance,
    SourceLine,
    frame_source,
)
from kerneltui.trace.schema import Kind


@dataclass(frozen=True)
class SideProvenance:
    """Per row of one side's trace.gpu: its record (compiled side), its launching op and source line."""

    records: list[KernelProvenance | None]
    ops: list[frozenset[str]]  # every op around the launch: eager relu launches from aten::clamp_min in aten::relu
    sources: list[SourceLine | None]
    any: bool = False  # some row has a record (asked per segment: computed once)

    @classmethod
    def of(cls, trace, records: list[KernelProvenance | None] | None) -> SideProvenance:
        context = launch_context(trace)
        op_sets = [frozenset(n for n, k in zip(names, kinds) if k == Kind.CPU_OP)
                   for names, kinds in zip(context.stacks, context.stack_kinds)]
        ops = [op_sets[c] for c in context.stack_code.tolist()]
        sources = [frame_source(s) if s else None for s in trace.gpu_sources["source"].tolist()]
        records = records if records is not None else [None] * len(trace.gpu)
        return cls(records, ops, sources, any(r is not None for r in records))


@dataclass(frozen=True)
class Split:
    """``groups``: (eager rows, compiled rows, record) matched by provenance; the rest, unmatched."""

    groups: list[tuple[list[int], list[int], KernelProvenance, bool]]  # ..., matched by op alone
    eager_rest: list[int]
    compiled_rest: list[int]


def split(eager: SideProvenance, compiled: SideProvenance, seg_eager: list[int], seg_compiled: list[int]) -> Split:
    by_record: dict[tuple, tuple[KernelProvenance, list[int]]] = {}
    rest_compiled = []
    for r in seg_compiled:
        record = compiled.records[r]
        if record is None:
            rest_compiled.append(r)
        else:
            # kernels of one graph with the same work (a foreach op split over triton_for_fused_1
            # and _2, each running every op on some of the tensors) are one entry
            key = (record.graph, record.cache_key, record.eager_ops)
            by_record.setdefault(key, (record, []))[1].append(r)
    records = list(by_record.values())
    owner = _owners(eager, records, seg_eager, seg_compiled)
    covered_by: dict[int, list[int]] = {}
    for r, (at, _) in owner.items():
        covered_by.setdefault(at, []).append(r)
    groups: list[tuple[list[int], list[int], KernelProvenance, bool]] = []
    for at, (record, rows) in enumerate(records):
        covered = sorted(covered_by.get(at, ()))
        if covered:
            groups.append((covered, rows, record, any(owner[r][1] for r in covered)))
        else:
            rest_compiled.extend(rows)
    return Split(groups, [r for r in seg_eager if r not in owner], sorted(rest_compiled))


def _owners(eager: SideProvenance, records: list[tuple[KernelProvenance, list[int]]], seg_eager: list[int],
            seg_compiled: list[int]) -> dict[int, tuple[int, bool]]:
    """Eager row -> (the record that covers it, by op alone): by the records' own ops first, then, of
    what is left, by the functions their lines call. Where several records cover a row (two kernels
    that both add), the one with a kernel nearest the same place in its segment: both sides run a
    graph's work in the same order."""
    place_e = {r: i / len(seg_eager) for i, r in enumerate(seg_eager)}
    index_c = {r: i for i, r in enumerate(seg_compiled)}
    place_c = [[index_c[r] / len(seg_compiled) for r in rows] for _, rows in records]
    owner: dict[int, tuple[int, bool]] = {}
    for ops_of in (lambda k: k.eager_ops, lambda k: k.called_ops):
        free = [r for r in seg_eager if r not in owner]
        covers: dict[int, list[tuple[int, bool]]] = {}
        for at, (record, _) in enumerate(records):
            covered, by_op_alone = _covered(eager, record, free, ops_of(record))
            for r in covered:
                covers.setdefault(r, []).append((at, by_op_alone))
        for r, found in covers.items():
            owner[r] = min(found, key=lambda item: (_distance(place_c[item[0]], place_e[r]), item[0]))
    return owner


def _distance(places: list[float], place: float) -> float:
    """How far `place` is from the nearest of `places` (ascending)."""
    at = bisect_left(places, place)
    return min(abs(places[i] - place) for i in (at - 1, at) if 0 <= i < len(places))


def _covered(eager: SideProvenance, record: KernelProvenance, candidates: list[int],
             ops: frozenset[str]) -> tuple[list[int], bool]:
    """The eager kernels a record covers: launched inside one of `ops`, from one of its source lines
    (by op alone when the eager trace has no source lines: it was not captured with stacks)."""
    by_op = [r for r in candidates if eager.ops[r] & ops]
    if not by_op:
        return [], False
    if not record.source_lines or all(eager.sources[r] is None for r in by_op):
        return by_op, True
    return [r for r in by_op if eager.sources[r] is not None
            and any(eager.sources[r].same_place(s) for s in record.source_lines)], False


def reason(record: KernelProvenance, eager_label: str, by_op_alone: bool) -> str:
    how = "by op (the eager trace has no source lines)" if by_op_alone else "by op and source line"
    return f"provenance: Inductor's record of {record.name} covers {record.summary()}; {eager_label}'s kernels {how}"
