"""What a side's capture says about how far its figures can be trusted, one line each.

Read from the trace's ``kerneltui.capture`` block (``kerneltui capture`` writes it; any field may
hold anything, so each is checked):

* ``allow_recompile`` true: the compiled trace was written with ``--allow-recompile``; its
  ``recompiles`` list ({"call", "reason"}) names the profiled calls that recompiled. A recompile
  inside the profiled calls puts the compile in that call's time: no speed verdict then.
* ``eager_was_compiled`` true: the "eager" run executed code the user's own script compiled.
* a CPU capture (no GPU activity, CPU ops recorded): its figures are CPU time.
"""

from __future__ import annotations

from kerneltui.analysis.cpu_work import is_cpu_capture
from kerneltui.trace.model import Trace
from kerneltui.units import plural


def recompiles_profiled(trace: Trace) -> list[dict]:
    """The block's ``recompiles`` entries (dicts), where the trace was written with --allow-recompile."""
    c = trace.meta.capture or {}
    entries = c.get("recompiles")
    if c.get("allow_recompile") is not True or not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict)]


def cpu_capture_note(a: Trace, b: Trace) -> list[str]:
    """'A and B are CPU captures: ...' in one line, or the one side that is."""
    sides = [label for label, t in (("A", a), ("B", b)) if is_cpu_capture(t)]
    if not sides:
        return []
    who = "A and B are CPU captures" if len(sides) == 2 else f"{sides[0]} is a CPU capture"
    line = f"{who}: no GPU activity; the work is CPU time (self time of compiled C++ kernels and ATen ops), GPU time stays 0"
    return [line]


def capture_notes(trace: Trace, label: str) -> list[str]:
    c = trace.meta.capture or {}
    out = []
    if c.get("allow_recompile") is True:
        entries = recompiles_profiled(trace)
        if entries:
            first = entries[0]
            where = f"{first.get('call', '?')}: {first.get('reason', 'no reason recorded')}"
            more = f", and {len(entries) - 1} more" if len(entries) > 1 else ""
            out.append(f"{label} was written with --allow-recompile: {plural(len(entries), 'recompile')} inside its "
                       f"profiled calls ({where}{more}); its time per call holds compiling, so no speed verdict")
        else:
            out.append(f"{label} was written with --allow-recompile (no recompile was recorded in its profiled calls)")
    if c.get("eager_was_compiled") is True:
        out.append(f"{label}'s \"eager\" run ran code its script compiled itself (torch.compile): not plain eager")
    return out
