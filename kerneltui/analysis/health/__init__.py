"""Trace health: what a trace cannot be trusted for, counted by cause (docs/health.md).

``trace_health(trace)`` checks every GPU event (kernel, memcpy, memset), every call that
launches GPU work and every step, and gives each damaged one a single cause, the first
that applies in this order:

GPU events (rows of ``trace.gpu``)
  duplicate         identical to an earlier one in name, ts, dur, device, stream and
                    correlation: an extra copy (the first copy is not counted)
  below_resolution  zero, in a trace whose GPU times are all whole microseconds (torch < 1.9)
                    and where no duration was repaired: shorter than the resolution (listed only)
  bad_duration      duration zero, negative, unreadable or missing in the file (the loader
                    reads those as 0), or longer than the profiled window
  no_launch         its correlation matches no runtime or driver call: the launch was
                    dropped, or came before the profiler started
  shared_correlation  its correlation is an earlier GPU event's, and neither is a CUDA-graph
                    replay: one launch makes one event, so one of them is linked to a launch
                    (op, thread, step) that is not its own
  before_launch     starts before the call that launched it: the clocks disagree
  outside_window    starts before, or ends after, the profiler's own span (none without one)
  overlap           starts before an earlier event on its stream has ended, and nothing
                    below explains it; by how much: how long before that event's end it started
  overlap_pdl       the same, launched by a call that can ask for programmatic dependent
                    launch (PDL_LAUNCHES), by at most PDL_NS or PDL_SHARE of the kernel it
                    overlaps, and ending after it (listed only)
  overlap_graph     the same, both replays of one CUDA-graph launch (parallel branches of
                    a graph share its stream and its correlation; listed only)
Launch calls (runtime and driver calls that start GPU work: ``*Launch*``, ``*Memcpy*``,
``*Memset*``) whose GPU event is not in the trace
  captured_launch   made inside ``cudaStreamBeginCapture``/``EndCapture`` on its thread:
                    recorded into a CUDA graph, not run (listed only)
  range_profiled    a kernel launch in a trace the CUPTI range profiler recorded: the
                    kernel became a counter range, not a timed event (listed only)
  empty_launch      a memcpy or memset call, where no kernel launch lost its kernel: a
                    zero-byte copy or fill makes no GPU work (listed only)
  no_kernel         any other: GPU events lost (a CUPTI buffer overflow), or the profiler
                    stopped before the work ran
The file
  lost_in_file      events the loader could not read (not JSON, no usable time), or a file
                    cut off: what they held is in no figure
Steps (listed only: timing.py leaves them out of its medians)
  startup_in_step   a step the profiler's own start-up events touch
  compile_in_step   a step in which a torch.compile (Dynamo) compile started

``ok`` is False only when a cause that changes a figure was found (the ones not marked
"listed only"). Sync events (``cuda_sync``) and GPU annotation spans are not GPU work
here, so they never count as overlaps.

Here: ``trace_health`` marks each GPU event with the first cause that applies; the checks are in
gpu_events.py (GPU events) and launches.py (launch calls), the causes, their rules and ``Health``
in causes.py, and each cause's count, share, steps and sentence in findings.py.
"""

from __future__ import annotations

import numpy as np

from kerneltui.analysis.health.causes import (  # noqa: F401 - the package's public names
    ABSTAIN_ON,
    CODE,
    DAMAGE_LIMIT,
    GPU_CAUSES,
    LAUNCH_CAUSES,
    RULES,
    Cause,
    Health,
    Rule,
)
from kerneltui.analysis.health.findings import (
    affected_steps,
    file_causes,
    gpu_causes,
    launch_cause_list,
    step_causes,
)
from kerneltui.analysis.health.gpu_events import (  # noqa: F401 - the limits named above, public here too
    PDL_LAUNCHES,
    PDL_NS,
    PDL_SHARE,
    UNSPANNED_FACTOR,
    duplicates,
    overlaps,
    pdl_explained,
    plausible_limit,
    profiler_span,
    same_graph_replay,
    shared_correlation,
    whole_microseconds,
)
from kerneltui.analysis.health.launches import launch_causes
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.per_trace import PerTrace


def trace_health(trace: Trace) -> Health:
    """The health of a trace (computed once per Trace; a second thread asking meanwhile waits for it:
    `summary --format json` builds it on its background thread while its own thread writes the rest)."""
    return _HEALTH(trace)


def _health(trace: Trace) -> Health:
    g = trace.gpu
    n = len(g)
    code = np.zeros(n, np.int8)
    ts, dur, end = (g[c].to_numpy() for c in ("ts", "dur", "end"))

    def mark(mask: np.ndarray, cause: str) -> None:
        code[mask & (code == 0)] = CODE[cause]

    mark(duplicates(g), "duplicate")
    limit = plausible_limit(trace)
    zero = dur <= 0
    coarse = whole_microseconds(ts, dur) and trace.meta.repaired_durations == 0
    mark(zero & coarse, "below_resolution")
    mark(zero | (dur > limit if limit > 0 else False), "bad_duration")
    has_launch = g["launch_row"].to_numpy() >= 0
    mark(~has_launch, "no_launch")
    mark(shared_correlation(g, code == 0), "shared_correlation")
    mark(has_launch & (ts < g["launch_ts"].to_numpy()), "before_launch")
    span = profiler_span(trace)
    if span is not None:
        mark((ts < span[0]) | (end > span[1]), "outside_window")
    overlapped, amount = overlaps(g, one_of(code, (CODE["duplicate"], CODE["bad_duration"])))
    pdl = pdl_explained(g, overlapped, amount)
    graph = same_graph_replay(g, overlapped)
    over = (overlapped >= 0) & (code == 0)
    mark(over & graph, "overlap_graph")
    mark(over & pdl, "overlap_pdl")
    mark(over, "overlap")

    launch_rows, launch_cause = launch_causes(trace)
    causes = gpu_causes(trace, code, amount, coarse, span)
    causes += launch_cause_list(trace, launch_rows, launch_cause)
    causes += step_causes(trace)
    causes += file_causes(trace)
    lost = launch_rows[launch_cause == "no_kernel"]
    overlapping = one_of(code, (CODE["overlap"], CODE["overlap_pdl"], CODE["overlap_graph"]))
    return Health(tuple(causes), n, len(launch_rows), code, np.where(overlapping, overlapped, -1),
                  np.where(overlapping, amount, 0), lost, affected_steps(trace, code, lost))


_HEALTH: PerTrace[Health] = PerTrace(_health)
