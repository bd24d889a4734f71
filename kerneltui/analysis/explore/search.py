"""Search every launch by what it is and what launched it: kernel name, op stack, source line, module.

Built once per trace: each launch gets a code into the distinct combinations of (kernel,
op stack, source line, module), a few hundred or thousand even on a million launches. A
query matches the pattern against the distinct kernel names, stack names, source lines and
module paths (Python, on a few thousand strings), combines them per combination, and maps
the answer onto the launches with one gather.

A launch's step counts as an annotation around it: ``ProfilerStep#3`` matches everything
launched within step 3, from any thread. (The op stack alone would miss the backward pass:
autograd launches its kernels from its own thread, outside the ProfilerStep annotation of
the Python thread; in gpt_train_eager two thirds of a step's launches.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.explore.context import LaunchContext, frozen
from kerneltui.analysis.provenance.join import records_of
from kerneltui.analysis.provenance.records import covered_text
from kerneltui.trace.filters import SEARCHED, name_pattern
from kerneltui.trace.intervals import summable
from kerneltui.trace.link import first_of_codes, names_per_key
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind

FIELDS = ("kernel", "op", "annotation", "module", "source", "provenance")


def _hits(regex: re.Pattern, values) -> np.ndarray:
    # as filters.matching_rows: a regex may backtrack quadratically, so search a name's first SEARCHED characters
    return np.fromiter((bool(regex.search(v[:SEARCHED])) for v in values), bool, len(values))


@dataclass(frozen=True, eq=False)
class LaunchSearch:
    context: LaunchContext
    key_short: tuple[str, ...]  # per key code (trace.gpu["key"] categories)
    key_full: tuple[str, ...]
    key_covers: tuple[str, ...]  # per key code: the ops and source lines its provenance record covers, "" none
    key_codes: np.ndarray  # per launch
    combo_code: np.ndarray  # per launch: code into the combo_* arrays (launches alike in all a search looks at)
    combo_key: np.ndarray  # per combination: key code, stack code, source code, module code
    combo_stack: np.ndarray
    combo_source: np.ndarray
    combo_module: np.ndarray
    combo_step: np.ndarray  # per combination: iteration + 1 (0: outside any)
    step_names: tuple[str, ...]  # per iteration + 1: the annotation that makes it ("" for none)
    stack_names: tuple[str, ...]  # the distinct names of every stack
    stack_flat: np.ndarray  # the stacks' names, as codes into stack_names, stack after stack
    stack_bounds: np.ndarray  # stack i is stack_flat[stack_bounds[i]:stack_bounds[i + 1]]

    def match(self, pattern: str) -> np.ndarray | None:
        """Per launch: does any field match? None for an empty pattern. Raises UserError on a bad regex."""
        if not pattern:
            return None
        return self.launches_of(self.combination_hits(pattern))

    def launches_of(self, hits: np.ndarray) -> np.ndarray:
        """Per launch: its combination's entry in ``hits`` (per combination, as combination_hits)."""
        return hits[self.combo_code]

    def combination_hits(self, pattern: str) -> np.ndarray:
        """Per combination (combo_*): does any of its fields match?"""
        regex = name_pattern(pattern)
        key_hit = _hits(regex, self.key_short) | _hits(regex, self.key_full)
        if any(self.key_covers):  # a compiled kernel found by an op or source line it computes
            key_hit |= _hits(regex, self.key_covers) & np.array([bool(c) for c in self.key_covers], bool)
        name_hit = _hits(regex, self.stack_names)
        counted = np.concatenate([[0], np.cumsum(name_hit[self.stack_flat], dtype=np.int64)])
        stack_hit = counted[self.stack_bounds[1:]] > counted[self.stack_bounds[:-1]]
        ctx = self.context
        source_hit = _hits(regex, ctx.sources)
        module_hit = _hits(regex, ctx.modules)
        step_hit = _hits(regex, self.step_names) & np.array([bool(n) for n in self.step_names], bool)
        source_hit[0] = module_hit[0] = False  # "" (none) matches nothing, not even the empty regex
        return (key_hit[self.combo_key] | stack_hit[self.combo_stack] | step_hit[self.combo_step]
                | source_hit[self.combo_source] | module_hit[self.combo_module])

    def fields(self, pattern: str, launch: int) -> tuple[str, ...]:
        """Which fields of one launch match, in FIELDS order (empty for an empty pattern)."""
        if not pattern:
            return ()
        regex = name_pattern(pattern)
        ctx = self.context
        key = int(self.key_codes[launch])
        found = set()
        if key >= 0 and (regex.search(self.key_short[key][:SEARCHED]) or regex.search(self.key_full[key][:SEARCHED])):
            found.add("kernel")
        s = int(ctx.stack_code[launch])
        for name, kind in zip(ctx.stacks[s], ctx.stack_kinds[s]):
            if regex.search(name[:SEARCHED]):
                found.add("annotation" if kind == Kind.ANNOTATION else "op")
        step = self.step_names[int(self.combo_step[self.combo_code[launch]])]
        if step and regex.search(step[:SEARCHED]):
            found.add("annotation")
        module, source = ctx.module_of(launch), ctx.source_of(launch)
        if module and regex.search(module[:SEARCHED]):
            found.add("module")
        if source and regex.search(source[:SEARCHED]):
            found.add("source")
        if key >= 0 and self.key_covers[key] and regex.search(self.key_covers[key][:SEARCHED]):
            found.add("provenance")
        return tuple(f for f in FIELDS if f in found)


def launch_search(trace: Trace, context: LaunchContext) -> LaunchSearch:
    g = trace.gpu
    key = g["key"].cat
    key_codes = key.codes.to_numpy().astype(np.int64)
    n_keys = len(key.categories)
    short, full = names_per_key(g, "short", "full_name")
    covers = [""] * n_keys
    records = records_of(trace)
    if records.count(None) < len(records):  # a count in C: a generator over a million Nones took 0.28 s
        distinct, first = first_of_codes(key_codes, n_keys)
        for code, at in zip(distinct.tolist(), first.tolist()):
            if records[at] is not None:
                covers[code] = covered_text(records[at])
    its = trace.iterations
    step_names = ("",) + tuple(_step_names(its))
    columns = [key_codes, context.stack_code, context.source_code, context.module_code, g["iteration"].to_numpy() + 1]
    sizes = [n_keys + 1, len(context.stacks), len(context.sources), len(context.modules), len(step_names)]
    combo_code, combos = _combine(columns, sizes)
    names: dict[str, int] = {}
    flat = [names.setdefault(n, len(names)) for stack in context.stacks for n in stack]
    bounds = np.concatenate([[0], np.cumsum([len(s) for s in context.stacks])]).astype(np.int64)
    return LaunchSearch(
        context=context,
        key_short=tuple(short),
        key_full=tuple(full),
        key_covers=tuple(covers),
        key_codes=frozen(key_codes),
        combo_code=frozen(combo_code),
        combo_key=frozen(combos[0]),
        combo_stack=frozen(combos[1]),
        combo_source=frozen(combos[2]),
        combo_module=frozen(combos[3]),
        combo_step=frozen(combos[4]),
        step_names=step_names,
        stack_names=tuple(names),
        stack_flat=frozen(np.asarray(flat, np.int64)),
        stack_bounds=frozen(bounds),
    )


def _step_names(its) -> list[str]:
    """The annotation each iteration is: ProfilerStep#N, or the repeated record_function's name; else none."""
    if its.source == "ProfilerStep":
        return list(its.labels)
    if its.source.startswith("record_function"):
        return [label.rsplit(" #", 1)[0] for label in its.labels]
    return [""] * its.count  # "call 3", "whole trace": our words, not the trace's


def _combine(columns: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Codes of the distinct rows of several code columns (first seen first), and each column per distinct row."""
    code = np.zeros(len(columns[0]), np.int64)
    width = 1
    for col, size in zip(columns, sizes):
        if width * size >= 2**62:  # too wide to pack: renumber what we have first
            code = pd.factorize(code, sort=False)[0].astype(np.int64)
            width = int(code.max()) + 1 if len(code) else 1
        code = code * size + col.astype(np.int64)
        width *= size
    codes = pd.factorize(code, sort=False)[0].astype(np.int64)
    # factorize numbers values in order of first appearance: a code's first row is where the running max grows
    seen = np.maximum.accumulate(codes) if len(codes) else codes
    first = np.flatnonzero(np.concatenate([[True], seen[1:] > seen[:-1]])) if len(codes) else codes
    # intp, not int32: a search gathers its hits by these on every key, ~4x faster by numpy's own index type
    return codes.astype(np.intp), [col.astype(np.int64)[first] for col in columns]


def match_totals(trace: Trace, mask: np.ndarray | None) -> tuple[int, int]:
    """(launches, summed GPU ns) of the rows of trace.gpu the mask keeps (None: all of them)."""
    dur = trace.gpu["dur"].to_numpy()
    if mask is None:
        return len(dur), int(summable(dur).sum())
    kept = dur[mask]
    return len(kept), int(summable(kept).sum())
