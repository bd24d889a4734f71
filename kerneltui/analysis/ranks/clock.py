"""Clock offsets between ranks, from the collectives that end together, and who arrives late.

Each rank's trace has its own clock (its host's, and the moment its profiler started). A
synchronising collective (all-reduce, all-gather, reduce-scatter, broadcast, all-to-all) ends
on every rank at about the same true moment, whoever arrived last: so the difference of its end
times on two ranks is the offset of their clocks. Collectives are matched across ranks by
(process group, sequence number) where the records carry one, else by (process group, kind,
k-th occurrence). The offset of a rank is the median over matched collectives, which shrugs off
the few that do not end together.

With clocks aligned, a rank's *lateness* at a collective is how much later than the median rank
it started it; the rank that arrives last (a straggler) is the one the others wait for, so its
own collective time is the shortest while its compute before it is the longest.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from kerneltui.analysis.ranks.collectives import SYNCHRONISING
from kerneltui.analysis.ranks.rank import Collectives

# A rank is a straggler when it is late by more than this share of the median collective time
# and by more than 3 robust deviations of the ranks' lateness (noise between healthy ranks).
STRAGGLER_SHARE = 0.1
MAX_SHIFT = 8  # how many collectives apart two ranks' profilers may have started
# Collectives end together to within µs; end differences spread wider than this mean the pairs are wrong.
CONSISTENT_NS = 250_000


@dataclass(frozen=True)
class Matched:
    """Collectives found on every rank: start and end per (rank, collective), own clocks."""

    keys: list[tuple]
    start: np.ndarray  # int64, ranks x collectives
    end: np.ndarray


@dataclass(frozen=True)
class ClockFit:
    """Each rank's offset from the reference rank, or None where its collectives do not line up."""

    offsets: list[int | None]  # per rank, in ns, the first rank with a known offset at 0
    shared: list[int]  # collectives each rank has in common with the reference
    spread: list[int]  # the robust spread of its end differences (large: the matches disagree)
    keyed: list[dict[tuple, int]]  # per rank, its collectives under keys aligned with the reference's


def fit_clocks(ranks: list[Collectives]) -> ClockFit:
    """Offsets from the rank with the most synchronising collectives (the fullest trace)."""
    keyed = [_keys(c) for c in ranks]
    ref = max(range(len(ranks)), key=lambda i: (len(keyed[i]), -i)) if ranks else 0
    offsets: list[int | None] = []
    shared, spread = [], []
    for i, c in enumerate(ranks):
        if i != ref:
            keyed[i] = _shifted(keyed[ref], keyed[i], ranks[ref], c)
        common = [key for key in keyed[i] if key in keyed[ref]]
        diff = np.array([c.end[keyed[i][k]] - ranks[ref].end[keyed[ref][k]] for k in common], np.int64)
        offset = int(np.median(diff).round()) if len(diff) else None
        mad = int(np.median(np.abs(diff - offset))) if len(diff) else 0
        shared.append(len(common))
        spread.append(mad)
        offsets.append(offset if offset is not None and mad <= CONSISTENT_NS else None)
    first = next((o for o in offsets if o is not None), 0)
    return ClockFit([None if o is None else o - first for o in offsets], shared, spread, keyed)


def match_collectives(ranks: list[Collectives], keyed: list[dict[tuple, int]]) -> Matched:
    """The synchronising collectives that every rank has (under ``fit_clocks``'s aligned keys), in the
    order of the first rank."""
    common = set(keyed[0]) if keyed else set()
    for k in keyed[1:]:
        common &= set(k)
    keys = sorted(common, key=lambda key: keyed[0][key])
    start = np.empty((len(ranks), len(keys)), np.int64)
    end = np.empty((len(ranks), len(keys)), np.int64)
    for r, (c, k) in enumerate(zip(ranks, keyed)):
        at = np.array([k[key] for key in keys], np.int64)
        start[r] = c.start[at] if len(at) else []
        end[r] = c.end[at] if len(at) else []
    return Matched(keys, start, end)


def _keys(c: Collectives) -> dict[tuple, int]:
    """Each synchronising collective's key -> its index; by sequence number where recorded."""
    keys: dict[tuple, int] = {}
    seen: dict[tuple, int] = defaultdict(int)
    for i, (kind, group, seq) in enumerate(zip(c.kind.tolist(), c.group.tolist(), c.seq.tolist())):
        if kind not in SYNCHRONISING:
            continue
        if seq >= 0:
            key = (group, "seq", seq)
        else:
            key = (group, kind, seen[(group, kind)])
            seen[(group, kind)] += 1
        keys.setdefault(key, i)
    return keys


def _shifted(ref_keys: dict[tuple, int], keys: dict[tuple, int], ref: Collectives, c: Collectives) -> dict[tuple, int]:
    """``keys`` renumbered so that each (group, kind) sequence lines up with the reference's.

    A rank whose profiler started a few collectives later (or earlier), or whose trace is cut
    off, holds the same collectives under other occurrence numbers, and a different count of
    them. The right shift is the one under which the end differences are one constant (the
    clock offset): the smallest median absolute deviation, with message sizes that disagree
    (where both records say) counted against a shift. A sequence too short to tell is left out."""
    out = {key: i for key, i in keys.items() if key[1] == "seq"}
    for sequence in {key[:2] for key in keys if key[1] != "seq"}:
        mine = sorted((key[2], i) for key, i in keys.items() if key[:2] == sequence)
        theirs = sorted((key[2], i) for key, i in ref_keys.items() if key[:2] == sequence)
        # the same count: profilers started at the same step (schedule()); a shift by whole steps would
        # also give near-constant differences, so only a rank holding more or fewer is searched
        shift = 0 if len(mine) == len(theirs) else _best_shift(
            [ref.end[i] for _, i in theirs], [c.end[i] for _, i in mine],
            [ref.nbytes[i] for _, i in theirs], [c.nbytes[i] for _, i in mine])
        if shift is not None:
            out.update({(*sequence, k - shift): i for k, i in mine})
    return out


def _best_shift(ref_end: list, end: list, ref_bytes: list, nbytes: list, most: int = MAX_SHIFT) -> int | None:
    """The s for which ``end[k]`` pairs with ``ref_end[k - s]``; None when too few pairs to tell."""
    ref_end, end = np.asarray(ref_end, np.int64), np.asarray(end, np.int64)
    ref_bytes, nbytes = np.asarray(ref_bytes, np.int64), np.asarray(nbytes, np.int64)
    best, best_score = None, None
    for s in sorted(range(-most, most + 1), key=abs):  # ties go to the smallest shift
        mine = np.arange(max(0, s), min(len(end), len(ref_end) + s))
        if len(mine) < max(3, min(len(end), len(ref_end)) // 2):
            continue
        diff = end[mine] - ref_end[mine - s]
        mad = float(np.median(np.abs(diff - np.median(diff))))
        known = (nbytes[mine] >= 0) & (ref_bytes[mine - s] >= 0)
        wrong_size = int((nbytes[mine][known] != ref_bytes[mine - s][known]).sum())
        score = (wrong_size / len(mine), mad)
        if best_score is None or score < best_score:
            best, best_score = s, score
    return best


def lateness(matched: Matched, offsets: np.ndarray) -> np.ndarray:
    """Per rank, the median over collectives of how much later than the median rank it arrived."""
    aligned = matched.start - offsets[:, None]
    return np.median(aligned - np.median(aligned, axis=0), axis=1)


def stragglers(matched: Matched, offsets: np.ndarray) -> list[int]:
    """Indices of the ranks that arrive late at the collectives, worst first."""
    if len(matched.start) < 2 or not matched.keys:
        return []
    late = lateness(matched, offsets)
    typical = float(np.median(matched.end - matched.start))
    spread = float(np.median(np.abs(late - np.median(late)))) * 1.4826  # MAD as a standard deviation
    bar = max(STRAGGLER_SHARE * typical, 3 * spread)
    wait = np.median(matched.end - matched.start, axis=1)
    found = [r for r in np.argsort(-late, kind="stable").tolist()
             if late[r] > bar and wait[r] <= np.median(wait)]  # late, and the one others wait for
    return found
