"""Synthetic multi-rank jobs made from one real rank's trace, with known truth planted in them.

make_job() writes one Kineto trace per rank from a template (by default a real A100 2-rank DDP
ResNet trace of rank 0: 15 AllReduce and 6 Broadcast NCCL kernels on their own stream) and
returns a JobTruth saying what it planted:

  - clock offset: every ts of rank r (CPU, runtime, GPU, flows, instants, metadata) is later by
    offsets_ns[r]; rank 0's is 0. By default the others are drawn, ±[0.2 ms, 5 ms];
  - jitter: each non-collective kernel gets up to `jitter` shorter, never longer, so that no
    kernel comes to overlap its neighbour;
  - straggler: on that rank each synchronising collective c_i starts Δ_i = round(share · dur_i)
    later and ends when it did (collectives end together on every rank), and the GPU work
    before it is stretched to fill those Δ_i: the straggler computed while the others waited;
  - size: the template's events are replicated (shifted by its span, ids offset) up to about
    target_bytes of JSON, every copy with the same offset and straggler.

Times are integer ns relative to the template's first event, so the µs floats written stay exact.
The parsed template is cached and its event dicts are rewritten in place for every copy (every
field that changes is reset from the pristine arrays each time): not for use from two threads.

    truth = make_job(tmp_path, ranks=4, straggler=2)
"""

from __future__ import annotations

import contextlib
import gzip as gzip_module
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "external" / "hta__nccl_parser_config__nccl_data.json.gz"

GPU_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # what occupies a stream
COLLECTIVE = re.compile(r"nccl(?:Dev)?Kernel_")
SYNCHRONISING = re.compile(r"nccl(?:Dev)?Kernel_(?:AllReduce|Broadcast|AllGather|ReduceScatter)")
# Ids that link events (flows, launches to kernels, ops to their backward): unique per copy.
ID_ARGS = ("External id", "correlation", "Python id", "Python parent id", "Sequence number", "Record function id")
COPY_GAP_NS = 1_000_000
OFFSET_RANGE_NS = (200_000, 5_000_000)


@dataclass(frozen=True)
class JobTruth:
    files: list[Path]  # one per rank, rank order
    offsets_ns: list[int]  # planted clock offset of each rank, rank 0 is 0
    straggler: int | None  # the planted straggler rank
    delay_ns: list[int]  # per synchronising collective (in time order), how much later the straggler arrived


@dataclass
class _Template:
    before: dict  # top-level keys before traceEvents, in order
    after: dict  # and after it
    world_size: int  # the template's own
    events: list[dict]  # replicated per copy (all but metadata), rewritten in place
    stamped: list[dict]  # those of them with a ts, aligned with ts/end
    ts: np.ndarray  # int64 ns relative to origin
    end: np.ndarray  # ts + dur (ts where no dur)
    origin: int  # ns
    on_gpu: np.ndarray  # bool: on a GPU pid, so moved by the straggler's time map
    jittered: np.ndarray  # indices: non-collective kernels
    sync: np.ndarray  # indices: synchronising collectives, in time order
    gpu_dur: list[dict]  # events on the GPU with a dur, the ones whose dur can change
    gpu_dur_index: np.ndarray
    streams: list[tuple[np.ndarray, np.ndarray]]  # per stream: indices by start, overlapped-before flags
    id_slots: list[tuple[dict, str]]  # (holder, key) of every linking id
    id_base: np.ndarray
    id_stride: int
    span: int  # ns between copies
    group_args: list[dict]  # args naming the whole world's process group (picked at load: rewritten since)
    metadata: list[dict]  # ph M, written once
    metadata_ts: np.ndarray
    copy_bytes: int


@dataclass(frozen=True)
class _Warp:
    """The straggler's GPU time map: piecewise linear through (xp, fp), identity outside.

    Knots (w0 -> w0), (s_i -> s_i + Δ_i), (e_i -> e_i): the window before c_i stretches by Δ_i,
    c_i and whatever runs beside it is squeezed into [s_i + Δ_i, e_i]. The map is monotone, so
    nothing overlaps that did not, and never earlier, so no kernel starts before its launch.
    """

    xp: np.ndarray
    fp: np.ndarray
    delta: np.ndarray

    def __call__(self, t: np.ndarray) -> np.ndarray:
        inside = (t >= self.xp[0]) & (t <= self.xp[-1])
        out = t.copy()
        out[inside] = np.rint(np.interp(t[inside], self.xp, self.fp)).astype(np.int64)
        return out


def make_job(out_dir: Path, ranks: int = 8, straggler: int | None = 3, straggler_share: float = 0.5,
             offsets_ns: list[int] | None = None, jitter: float = 0.02, seed: int = 0,
             template: Path = TEMPLATE, target_bytes: int | None = None, gzip: bool = False,
             world_size: int | None = None, name: str = "worker{rank}.pt.trace.json",
             end_noise_ns: int = 0) -> JobTruth:
    """Write one trace per rank under out_dir; target_bytes counts uncompressed JSON.

    end_noise_ns: each synchronising collective's end moves by up to that much either way, on
    every rank independently (real collectives end together only to within a few µs)."""
    offsets = list(offsets_ns) if offsets_ns is not None else default_offsets(ranks, seed)
    _check_arguments(ranks, straggler, straggler_share, offsets, jitter, seed)
    tpl = _load(Path(template).resolve())
    copies = _copies_for(tpl, target_bytes)
    warp = _straggler_warp(tpl, straggler_share) if straggler is not None else None
    _name_world_group(tpl, ranks)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for rank in range(ranks):
        path = out_dir / (name.format(rank=rank) + (".gz" if gzip else ""))
        frame = _frame(tpl, rank, ranks, world_size or ranks, path.name)
        chunks = _rank_chunks(tpl, rank, offsets[rank], copies, warp if rank == straggler else None, jitter, seed,
                              end_noise_ns)
        _write_atomically(path, frame, chunks, gzip)
        files.append(path)
    delays = warp.delta.tolist() * copies if warp is not None else []
    return JobTruth(files=files, offsets_ns=offsets, straggler=straggler, delay_ns=delays)


def default_offsets(ranks: int, seed: int) -> list[int]:
    """Rank 0: 0; rank r: ±[0.2 ms, 5 ms] from a stream of its own, the same whatever the job's size."""
    offsets = [0]
    for rank in range(1, ranks):
        rng = np.random.default_rng([seed, 1, rank])
        offsets.append(round(rng.uniform(*OFFSET_RANGE_NS)) * int(rng.choice((-1, 1))))
    return offsets


def _check_arguments(ranks: int, straggler: int | None, share: float, offsets: list[int], jitter: float,
                     seed: int) -> None:
    if ranks < 1 or len(offsets) != ranks:
        raise ValueError(f"{ranks} ranks, {len(offsets)} offsets")
    if straggler is not None and not 0 <= straggler < ranks:
        raise ValueError(f"straggler {straggler} outside 0..{ranks - 1}")
    if not 0 <= share < 1 or not 0 <= jitter < 1 or seed < 0:
        raise ValueError("straggler_share and jitter must lie in [0, 1), seed must be >= 0")


@lru_cache(maxsize=4)
def _load(path: Path) -> _Template:
    raw = path.read_bytes()
    doc = orjson.loads(gzip_module.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    keys = list(doc)
    at = keys.index("traceEvents")
    before = {k: doc[k] for k in keys[:at]}
    after = {k: doc[k] for k in keys[at + 1:]}
    all_events = doc["traceEvents"]
    metadata = [e for e in all_events if e.get("ph") == "M"]
    events = [e for e in all_events if e.get("ph") != "M"]
    stamped = [e for e in events if isinstance(e.get("ts"), (int, float))]
    ts = _ns([e["ts"] for e in stamped])
    origin = int(ts.min())
    ts -= origin
    end = ts + _ns([e.get("dur", 0) for e in stamped])
    cats = [e.get("cat") for e in stamped]
    names = [str(e.get("name", "")) for e in stamped]
    work = np.array([c in GPU_WORK for c in cats], dtype=bool)
    gpu_pids = {e.get("pid") for e, w in zip(stamped, work) if w}
    on_gpu = np.array([e.get("pid") in gpu_pids for e in stamped], dtype=bool)
    has_dur = np.array(["dur" in e for e in stamped], dtype=bool)
    kernel = np.array([c == "kernel" for c in cats], dtype=bool)
    collective = np.array([bool(COLLECTIVE.match(n)) for n in names], dtype=bool)
    sync = np.flatnonzero(kernel & np.array([bool(SYNCHRONISING.match(n)) for n in names], dtype=bool))
    gpu_dur_index = np.flatnonzero(on_gpu & has_dur)
    id_slots, id_base = _id_slots(events)
    span = int(end.max()) + COPY_GAP_NS
    info = before.get("distributedInfo") or {}
    return _Template(
        before=before, after=after, world_size=int(info.get("world_size", 1)), events=events, stamped=stamped,
        ts=ts, end=end, origin=origin, on_gpu=on_gpu, jittered=np.flatnonzero(kernel & ~collective & has_dur),
        sync=sync[np.argsort(ts[sync], kind="stable")], gpu_dur=[stamped[i] for i in gpu_dur_index],
        gpu_dur_index=gpu_dur_index, streams=_streams(stamped, work, ts, end), id_slots=id_slots,
        id_base=id_base, id_stride=int(id_base.max(initial=0)) + 1, span=span,
        group_args=[e["args"] for e in events if (e.get("args") or {}).get("Group size") == info.get("world_size")],
        metadata=metadata, metadata_ts=_ns([e.get("ts", 0) for e in metadata]) - origin,
        copy_bytes=len(b",\n".join(map(orjson.dumps, events))),
    )


def _ns(us: list) -> np.ndarray:
    """µs floats to int ns, exactly: us * 1000 would round once more, off by 1 ns above 2^42 µs."""
    us = np.asarray(us, dtype=np.float64)
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


def _id_slots(events: list[dict]) -> tuple[list[tuple[dict, str]], np.ndarray]:
    slots: list[tuple[dict, str]] = []
    for e in events:
        if isinstance(e.get("id"), int) and e.get("ph") in ("s", "t", "f"):
            slots.append((e, "id"))
        args = e.get("args")
        if args:
            slots.extend((args, k) for k in ID_ARGS if isinstance(args.get(k), int) and not isinstance(args[k], bool))
    return slots, np.array([holder[key] for holder, key in slots], dtype=np.int64)


def _streams(stamped: list[dict], work: np.ndarray, ts: np.ndarray, end: np.ndarray) -> list:
    """Per stream, its work by start, and which of it overlapped what came before (that may stay)."""
    by_stream: dict[tuple, list[int]] = {}
    for i in np.flatnonzero(work):
        by_stream.setdefault((stamped[i].get("pid"), stamped[i].get("tid")), []).append(int(i))
    streams = []
    for indices in by_stream.values():
        order = np.array(indices)[np.argsort(ts[indices], kind="stable")]
        streams.append((order, _overlapping(ts[order], end[order])))
    return streams


def _overlapping(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each event after the first: does it start before some earlier one ended?"""
    return np.maximum.accumulate(end)[:-1] > ts[1:]


def _copies_for(tpl: _Template, target_bytes: int | None) -> int:
    """The same for every rank, so that every rank runs the same collectives."""
    return 1 if target_bytes is None else max(1, round(target_bytes / (tpl.copy_bytes + 2)))


def _straggler_warp(tpl: _Template, share: float) -> _Warp:
    s, e = tpl.ts[tpl.sync], tpl.end[tpl.sync]
    if not len(s):
        raise ValueError("the template has no synchronising collective to straggle on")
    delta = np.rint(share * (e - s)).astype(np.int64)
    w0 = int(tpl.ts[tpl.on_gpu].min())
    xp = np.concatenate(([w0], np.column_stack((s, e)).ravel()))
    fp = np.concatenate(([w0], np.column_stack((s + delta, e)).ravel()))
    if np.any(np.diff(xp) <= 0):
        raise ValueError("synchronising collectives overlap or touch: no window to stretch before them")
    return _Warp(xp=xp, fp=fp, delta=delta)


def _name_world_group(tpl: _Template, ranks: int) -> None:
    """The collectives' args name the whole world's group: make it this job's."""
    for args in tpl.group_args:
        args["Group size"] = ranks
        if "Process Group Ranks" in args:
            args["Process Group Ranks"] = str(list(range(ranks)))


def _frame(tpl: _Template, rank: int, ranks: int, world_size: int, file_name: str) -> tuple[bytes, bytes]:
    """The text before the first event and after the last, with this rank's distributedInfo."""
    before = dict(tpl.before)
    info = dict(before.get("distributedInfo") or {})
    info["rank"], info["world_size"] = rank, world_size
    whole_world = list(range(tpl.world_size))
    info["pg_config"] = [dict(pg, pg_size=ranks, ranks=list(range(ranks))) if pg.get("ranks") == whole_world else pg
                         for pg in info.get("pg_config", [])]
    before["distributedInfo"] = info
    after = dict(tpl.after)
    if "traceName" in after:
        after["traceName"] = file_name
    head = orjson.dumps(before)[:-1] + (b"," if before else b"") + b'"traceEvents":[\n'
    tail = b"\n]" + (b"," + orjson.dumps(after)[1:] if after else b"}") + b"\n"
    return head, tail


def _rank_chunks(tpl: _Template, rank: int, offset_ns: int, copies: int, warp: _Warp | None, jitter: float,
                 seed: int, end_noise_ns: int = 0) -> Iterator[bytes]:
    for copy in range(copies):
        rng = np.random.default_rng([seed, 2, rank, copy])
        yield _render_copy(tpl, copy, offset_ns, warp, jitter, rng, end_noise_ns)
    if tpl.metadata:
        for e, t in zip(tpl.metadata, _us(tpl.metadata_ts + (tpl.origin + offset_ns))):
            e["ts"] = t
        yield b",\n".join(map(orjson.dumps, tpl.metadata))


def _render_copy(tpl: _Template, copy: int, offset_ns: int, warp: _Warp | None, jitter: float,
                 rng: np.random.Generator, end_noise_ns: int = 0) -> bytes:
    ts, end = tpl.ts.copy(), tpl.end.copy()
    if jitter:
        j = tpl.jittered
        end[j] = ts[j] + np.floor((end[j] - ts[j]) * rng.uniform(1 - jitter, 1, len(j))).astype(np.int64)
    if warp is not None:
        ts[tpl.on_gpu], end[tpl.on_gpu] = warp(ts[tpl.on_gpu]), warp(end[tpl.on_gpu])
        ts[tpl.sync], end[tpl.sync] = warp.fp[1::2], warp.fp[2::2]  # exactly, whatever interp rounded
    if end_noise_ns:
        noisy = rng.integers(-end_noise_ns, end_noise_ns + 1, len(tpl.sync))
        end[tpl.sync] = np.maximum(end[tpl.sync] + noisy, ts[tpl.sync] + 1)
    _check_no_new_overlaps(tpl, ts, end)
    for e, t in zip(tpl.stamped, _us(ts + (tpl.origin + offset_ns + copy * tpl.span))):
        e["ts"] = t
    d = tpl.gpu_dur_index
    for e, dur in zip(tpl.gpu_dur, ((end[d] - ts[d]) / 1000).tolist()):
        e["dur"] = dur
    for (holder, key), value in zip(tpl.id_slots, (tpl.id_base + copy * tpl.id_stride).tolist()):
        holder[key] = value
    return b",\n".join(map(orjson.dumps, tpl.events))


def _us(ns: np.ndarray) -> list[float]:
    return (ns / 1000).tolist()  # float64 holds a ns-resolution µs stamp exactly below ~2^43 µs


def _check_no_new_overlaps(tpl: _Template, ts: np.ndarray, end: np.ndarray) -> None:
    for order, overlapped_before in tpl.streams:
        if np.any(_overlapping(ts[order], end[order]) & ~overlapped_before):
            raise RuntimeError("planting the straggler or jitter made GPU work overlap on a stream")


def _write_atomically(path: Path, frame: tuple[bytes, bytes], chunks: Iterator[bytes], compress: bool) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with _sink(tmp, compress) as out:
            out.write(frame[0])
            for i, chunk in enumerate(chunks):
                out.write(b",\n" + chunk if i else chunk)
            out.write(frame[1])
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _sink(path: Path, compress: bool) -> Iterator[BinaryIO]:
    with open(path, "wb") as raw:
        if not compress:
            yield raw
            return
        # mtime=0 and no name: the same seed gives the same bytes; level 1: speed over size.
        with gzip_module.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as packed:
            yield packed
