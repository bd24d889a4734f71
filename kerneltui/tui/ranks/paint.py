"""A rank's timeline lane as text: compute as shades, communication as its own glyphs (no Textual).

A cell is a time bucket of the screen's clock. Its compute share comes from the rank's
compute_profile (PROFILE_BINS shares of its window, resampled to the cells), its communication
share from the rank's collective kernels themselves (exact at any zoom). One row per lane: the
cell shows what kept it busier. Two rows (tall screens): compute above, communication below, so
that overlap shows too. Every cue is a glyph as well as a colour (NO_COLOR keeps the glyphs).
"""

from __future__ import annotations

import numpy as np

from kerneltui.analysis.ranks.rank import Collectives, RankSummary
from kerneltui.trace.intervals import union_runs
from kerneltui.tui.timeline_paint import SHADES, Run, runs

COMM_GLYPHS = "─═"  # a cell less than half / at least half communication
COMPUTE, COMM, IDLE = "ranks--compute", "ranks--comm", "ranks--idle"
LEGEND = f"{SHADES[1:]} compute · {COMM_GLYPHS} communication"


def profile_shares(profile: np.ndarray, start: int, span: int, edges: np.ndarray) -> np.ndarray:
    """Per cell [edges[k], edges[k+1]): the busy share of a profile of equal bins over [start, start + span)."""
    cells = np.zeros(len(edges) - 1)
    if not len(profile) or span <= 0:
        return cells
    bin_edges = start + np.arange(len(profile) + 1, dtype=np.float64) * (span / len(profile))
    covered = np.concatenate(([0.0], np.cumsum(profile.astype(np.float64) * (span / len(profile)))))
    at = np.interp(edges.astype(np.float64), bin_edges, covered)  # busy time before each edge
    return np.clip(np.diff(at) / np.maximum(np.diff(edges), 1), 0, 1)


def interval_shares(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per cell: the share the intervals cover (overlaps once)."""
    if not len(starts):
        return np.zeros(len(edges) - 1)
    run_start, run_end = union_runs(starts, ends)
    # busy time before t is piecewise linear, with knots at each run's start and end
    knots = np.column_stack((run_start, run_end)).ravel().astype(np.float64)
    lengths = (run_end - run_start).astype(np.float64)
    before = np.concatenate(([0.0], np.cumsum(lengths)[:-1]))
    values = np.column_stack((before, before + lengths)).ravel()
    at = np.interp(edges.astype(np.float64), knots, values, left=0.0, right=float(lengths.sum()))
    return np.clip(np.diff(at) / np.maximum(np.diff(edges), 1), 0, 1)


def lane_shares(summary: RankSummary, shift: int, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compute and communication shares of each cell, the rank's own clock moved by ``-shift``."""
    compute = profile_shares(summary.compute_profile, summary.window_start_ns - shift, summary.window_ns, edges)
    c: Collectives = summary.collectives
    comm = interval_shares(c.start - shift, c.end - shift, edges)
    return compute, comm


def _shade(share: np.ndarray) -> np.ndarray:
    level = np.ceil(share * (len(SHADES) - 1)).astype(np.int64)
    return np.where(share > 0, np.maximum(level, 1), 0)  # a sliver still shows


def _comm_glyph(share: float) -> str:
    return COMM_GLYPHS[1] if share >= 0.5 else COMM_GLYPHS[0]


def lane_rows(compute: np.ndarray, comm: np.ndarray, rows: int = 1) -> list[list[Run]]:
    """One row (what kept each cell busier) or two (compute, then communication)."""
    compute_chars = [SHADES[v] for v in _shade(compute)]
    if rows >= 2:
        comm_chars = [_comm_glyph(s) if s > 0 else " " for s in comm.tolist()]
        return [runs(compute_chars, [(COMPUTE,) if ch != " " else (IDLE,) for ch in compute_chars]),
                runs(comm_chars, [(COMM,) if ch != " " else (IDLE,) for ch in comm_chars])]
    chars, classes = [], []
    for ch, p, s in zip(compute_chars, compute.tolist(), comm.tolist()):
        if s > 0 and s >= p:
            chars.append(_comm_glyph(s))
            classes.append((COMM,))
        else:
            chars.append(ch)
            classes.append((COMPUTE,) if ch != " " else (IDLE,))
    return [runs(chars, classes)]
