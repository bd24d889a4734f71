"""Per GPU launch: the op stack, source line and nn.Module path around it, as codes into distinct values.

``trace.ancestors(launch_row)`` answers one launch in Python; a million launches need the
answer for all at once. Each thread's op stack (``OpStack``: cpu_ops, annotations, runtime
and driver calls, properly nested) is a forest: an interval's parent is the latest interval
before it (by start, longer first) one level shallower. Chains are interned level by level,
(parent chain, name) -> chain code, so every interval gets the code of the stack ending with
it in a few numpy passes per depth, and a launch's stack is the chain of its launch call's
parent. Where the forest and ``ancestors``' rule ("every interval with start <= t <= end")
could disagree (an interval that ends exactly where the launch starts, one that starts with
it, a partial overlap), the launch is checked: the number of intervals open at its start
must be its depth plus one, and every interval of its chain must contain its child. The few
launches that fail take ``ancestors``' own path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.trace.intervals import stable_argsort
from kerneltui.trace.model import Trace


@dataclass(frozen=True, eq=False)
class LaunchContext:
    """Per row of ``trace.gpu``: codes into the distinct stacks, sources and modules (read-only arrays)."""

    stack_code: np.ndarray  # int32 per gpu row: index into stacks
    stacks: tuple[tuple[str, ...], ...]  # names around the launch, outermost first; stacks[0] == ()
    stack_kinds: tuple[tuple[int, ...], ...]  # schema.Kind of each name of stacks (CPU_OP, ANNOTATION, ...)
    source_code: np.ndarray  # int32 per gpu row: index into sources
    sources: tuple[str, ...]  # sources[0] == "" (no source line)
    module_code: np.ndarray  # int32 per gpu row: index into modules
    modules: tuple[str, ...]  # modules[0] == "" (no module)
    has_stacks: bool  # trace.meta.with_stack and some launch has a source line or a module

    def stack_of(self, launch: int) -> tuple[str, ...]:
        return self.stacks[int(self.stack_code[launch])]

    def source_of(self, launch: int) -> str:
        return self.sources[int(self.source_code[launch])]

    def module_of(self, launch: int) -> str:
        return self.modules[int(self.module_code[launch])]


def frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def launch_context(trace: Trace) -> LaunchContext:
    g = trace.gpu
    stack_code, stacks, kinds = _stacks(trace)
    n = len(g)
    if trace.meta.with_stack and n:
        src = trace.gpu_sources
        source_code, sources = _factorize(src["source"])
        module_code, modules = _factorize(src["module"])
    else:
        source_code, sources = np.zeros(n, np.int32), ("",)
        module_code, modules = np.zeros(n, np.int32), ("",)
    has = bool(trace.meta.with_stack and (len(sources) > 1 or len(modules) > 1))
    return LaunchContext(
        stack_code=frozen(stack_code),
        stacks=stacks,
        stack_kinds=kinds,
        source_code=frozen(source_code),
        sources=sources,
        module_code=frozen(module_code),
        modules=modules,
        has_stacks=has,
    )


def _factorize(values: pd.Series) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes into distinct strings, "" always first (code 0)."""
    codes, uniques = pd.factorize(values.astype(object).fillna("").to_numpy(), use_na_sentinel=False)
    uniques = [str(u) for u in uniques]
    if "" not in uniques:
        uniques.append("")
    empty = uniques.index("")
    order = [empty] + [i for i in range(len(uniques)) if i != empty]  # new position -> old code
    remap = np.empty(len(uniques), np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes].astype(np.int32), tuple(uniques[i] for i in order)


class _Chains:
    """Interned chains: code -> (parent code or -1, name code, kind), grown a level at a time."""

    def __init__(self, n_names: int):
        self.width = np.int64((n_names + 1) * 32)  # (name + 1) * 32 + kind fits under it
        self.parent: list[np.ndarray] = []
        self.label: list[np.ndarray] = []  # (name + 1) * 32 + kind
        self.size = 0

    def intern(self, parent: np.ndarray, label: np.ndarray) -> np.ndarray:
        keys = (parent.astype(np.int64) + 1) * self.width + label
        distinct, inverse = np.unique(keys, return_inverse=True)
        codes = self.size + inverse.reshape(-1)
        self.parent.append(distinct // self.width - 1)
        self.label.append(distinct % self.width)
        self.size += len(distinct)
        return codes

    def tuples(self, codes: np.ndarray, names) -> dict[int, tuple[tuple[str, ...], tuple[int, ...]]]:
        parent = np.concatenate(self.parent) if self.parent else np.empty(0, np.int64)
        label = np.concatenate(self.label) if self.label else np.empty(0, np.int64)
        memo: dict[int, tuple[tuple[str, ...], tuple[int, ...]]] = {-1: ((), ())}

        def build(code: int):
            chain = []
            while code not in memo:
                chain.append(code)
                code = int(parent[code])
            names_so_far, kinds_so_far = memo[code]
            for c in reversed(chain):
                lab = int(label[c])
                names_so_far = names_so_far + (names(lab // 32 - 1),)
                kinds_so_far = kinds_so_far + (lab % 32,)
                memo[c] = (names_so_far, kinds_so_far)
            return memo[code if not chain else chain[0]]

        return {int(c): build(int(c)) for c in codes}


def _stacks(trace: Trace) -> tuple[np.ndarray, tuple[tuple[str, ...], ...], tuple[tuple[int, ...], ...]]:
    g = trace.gpu
    ev = trace.events
    n = len(g)
    launch_row = g["launch_row"].to_numpy()
    launch_lane = g["launch_lane"].to_numpy()
    chains = _Chains(len(trace.names))
    chain_of = np.full(n, -1, np.int64)  # per gpu row: chain code of its stack (-1: empty)
    slow: list[np.ndarray] = []  # gpu rows whose stack ancestors() must give
    name_codes = ev["name"].to_numpy()
    has = np.flatnonzero(launch_row >= 0)
    if len(has):
        order = stable_argsort(launch_lane[has])
        has = has[order]
        lanes, first = np.unique(launch_lane[has], return_index=True)
        for lane, part in zip(lanes.tolist(), np.split(has, first[1:])):
            stack = trace.op_stack(lane)
            if stack is None:
                continue
            codes, exact = _lane_chains(stack, name_codes, chains, launch_row[part])
            chain_of[part] = codes
            if not exact.all():
                slow.append(part[~exact])
    wanted = np.unique(chain_of[chain_of >= 0])
    by_code = chains.tuples(wanted, trace.name)
    table: dict[tuple[str, ...], int] = {(): 0}
    stacks: list[tuple[str, ...]] = [()]
    kinds: list[tuple[int, ...]] = [()]

    def code_of(names: tuple[str, ...], ks: tuple[int, ...]) -> int:
        at = table.get(names)
        if at is None:
            at = table[names] = len(stacks)
            stacks.append(names)
            kinds.append(ks)
        return at

    remap = np.zeros(chains.size + 1, np.int32)  # chain code + 1 -> stack code (0: empty)
    for c in wanted.tolist():
        remap[c + 1] = code_of(*by_code[c])
    out = remap[chain_of + 1]
    if slow:
        rows = np.concatenate(slow)
        kind_codes = ev["kind"].to_numpy()
        for launch in np.unique(launch_row[rows]).tolist():
            anc = trace.ancestors(launch)
            names = tuple(trace.name(int(name_codes[a])) for a in anc)
            out[rows[launch_row[rows] == launch]] = code_of(names, tuple(int(kind_codes[a]) for a in anc))
    return out, tuple(stacks), tuple(kinds)


def _lane_chains(stack, name_codes: np.ndarray, chains: _Chains, launches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chain code of the stack around each launch call (-1: none), and whether the forest's answer is exact."""
    nest = stack.nesting
    m = len(nest.starts)
    depth = nest.depth
    sorted_rows = stack.rows[nest.order]
    label = (name_codes[sorted_rows].astype(np.int64) + 1) * 32 + stack.kinds[nest.order].astype(np.int64)
    position = np.arange(m)
    parent = np.full(m, -1, np.int64)
    good = depth >= 0  # every interval's chain contains it (checked below)
    code = np.full(m, -1, np.int64)
    groups = nest.by_depth  # depth -> its positions, ascending
    for d in sorted(groups):
        here = groups[d]
        if d < 0:
            continue
        if d > 0:
            above = groups.get(d - 1)
            if above is None:
                good[here] = False
                continue
            at = np.searchsorted(above, here, side="left") - 1
            found = at >= 0
            p = np.where(found, above[np.clip(at, 0, None)], -1)
            safe = np.clip(p, 0, None)
            inside = found & (nest.starts[safe] <= nest.starts[here]) & (nest.ends[here] <= nest.ends[safe])
            good[here] = inside & good[safe]
            parent[here] = p
            p_code = np.where(found, code[safe], -1)
        else:
            p_code = np.full(len(here), -1, np.int64)
        code[here] = chains.intern(p_code, label[here])
    # launch call rows -> their sorted positions
    inverse = np.empty(m, np.int64)
    inverse[nest.order] = position
    at = inverse[np.searchsorted(stack.rows, launches)]
    # the launch's stack is its parent's chain
    par = parent[at]
    out = np.where(par >= 0, code[np.clip(par, 0, None)], -1)
    open_at = nest.open_count(nest.starts[at])
    exact = good[at] & (open_at - 1 == depth[at]) & ((depth[at] == 0) | (par >= 0))
    return out, exact

