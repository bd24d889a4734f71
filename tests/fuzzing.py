"""Mutation fuzzing of kerneltui's input handling: seeds, mutators, and what every mutant must pass.

Shared by ``benchmarks/fuzz.py`` (thousands of mutants on demand, in worker processes) and
``tests/unit/test_fuzz.py`` (a few hundred in CI). It is test code, not part of the package.

The promise under test: for any input file, ``kerneltui summary F``, ``kerneltui diff F G`` and the
headless browser finish with exit status 0, 1 (``diff --fail-if-slower`` only) or 2, print at most
one-line ``kerneltui: ...`` messages on stderr and never a traceback, within 10 s and 2 GB for an
input under 5 MB; a cut-off trace loads what precedes the cut, warns once and exits 2.

A mutant is a pure function of (master seed, index, bases): ``make_mutant`` draws its class
round-robin over ``CLASSES`` and everything else from ``random.Random(f"{seed}:{index}")``, so
``benchmarks/fuzz.py --seed S --only I`` rebuilds exactly the file that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import resource
import signal
import struct
import subprocess
import sys
import time
import traceback
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "kerneltui"
SEED_DIRS = (
    ROOT / "traces",
    ROOT / "tests" / "data" / "traces",
    ROOT / "tests" / "data" / "external",
)
DEFAULT_CACHE = Path(os.environ.get("KERNELTUI_FUZZ_CACHE", "/tmp/kerneltui-fuzz-cache"))

SLOW_S = 10.0  # the promise: under 10 s ...
MEMORY_LIMIT_KB = 2 << 20  # ... and under 2 GB
SMALL_INPUT = 5 << 20  # ... for an input under 5 MB
MEMORY_SUSPECT_KB = 400 << 10  # a mutant that raises the worker's peak by this much is measured alone
HARD_S = 30.0  # a stage still running after this is stopped (and counted as slow)
MAX_BASE_EVENTS = 2500  # bigger seeds are cut into time windows of this many events
WINDOWS_PER_SEED = 3
RAW_LIMIT = 32 << 20  # byte-level mutants of whole seeds up to this size (uncompressed)

_BOM = b"\xef\xbb\xbf"


# ---------------------------------------------------------------------------------------------
# Seeds and bases
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    """A valid trace that mutants start from; its file is also the other side of each diff."""

    name: str
    path: str
    origin: str  # the seed file it comes from
    parsed: bool  # structural mutants may parse it (small); else byte-level mutants only
    events: int
    raw_bytes: int  # uncompressed size


def seed_files(dirs=SEED_DIRS) -> list[Path]:
    """Every real trace in the seed folders, once per file name (the first folder wins)."""
    seen: dict[str, Path] = {}
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            name = path.name
            if not (name.endswith(".json") or name.endswith(".json.gz")) or name.endswith(".truth.json"):
                continue
            seen.setdefault(name, path)
    return list(seen.values())


def read_bytes(path) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def parse_doc(data: bytes) -> dict:
    doc = orjson.loads(data)
    return {"traceEvents": doc} if isinstance(doc, list) else doc


def prepare_bases(
    files: list[Path] | None = None,
    cache: Path = DEFAULT_CACHE,
    max_events: int = MAX_BASE_EVENTS,
    windows: int = WINDOWS_PER_SEED,
    raw_limit: int = RAW_LIMIT,
) -> list[Base]:
    """Small seeds as they are; big ones as time windows of ``max_events`` (written under ``cache``)."""
    cache.mkdir(parents=True, exist_ok=True)
    bases: list[Base] = []
    for path in files if files is not None else seed_files():
        data = read_bytes(path)
        stem = path.name.split(".json")[0]
        try:
            doc = parse_doc(data)
            events = doc.get("traceEvents")
        except orjson.JSONDecodeError:
            continue
        if not isinstance(events, list):
            continue
        small = len(events) <= max_events
        if small or len(data) <= raw_limit:
            bases.append(Base(stem, str(path), str(path), small, len(events), len(data)))
        if small:
            continue
        digest = hashlib.sha1(f"{path.name}:{len(data)}:{max_events}".encode()).hexdigest()[:10]
        for k in range(windows):
            out = cache / f"{stem}__w{k}_{digest}.json.gz"
            if not out.exists():
                part = _window(doc, random.Random(f"window:{path.name}:{k}"), max_events)
                tmp = out.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(gzip.compress(dumps(part, "kineto"), 6, mtime=0))
                tmp.replace(out)
            bases.append(Base(f"{stem}#w{k}", str(out), str(path), True, max_events, 0))
    return bases


def _window(doc: dict, rng: random.Random, size: int) -> dict:
    """A contiguous time window of ``size`` events (metadata events all kept), in file order."""
    events = doc["traceEvents"]
    timed = [i for i, e in enumerate(events) if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))]
    timed.sort(key=lambda i: events[i]["ts"])
    start = rng.randrange(0, max(1, len(timed) - size))
    keep = set(timed[start : start + size])
    keep.update(i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "M")
    part = {k: v for k, v in doc.items() if k != "traceEvents"}
    part["traceEvents"] = [e for i, e in enumerate(events) if i in keep]
    return part


# ---------------------------------------------------------------------------------------------
# Serialising (json, not orjson: it writes bare NaN/Infinity and integers past 2**64)
# ---------------------------------------------------------------------------------------------

DEEP = re.compile(r'"@@DEEP([ld])(\d+)@@"')


def _deep_text(match: re.Match) -> str:
    depth = int(match.group(2))
    if match.group(1) == "l":
        return "[" * depth + "1" + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def dumps(doc, layout: str = "kineto", ensure_ascii: bool = True) -> bytes:
    """JSON text of a (mutated) trace in one of the layouts real files have.

    kineto: top-level keys, then one event per line at an indent of 2 (what Kineto writes);
    keys_after: the same with traceEvents first and the other keys after it;
    indent2: json.dumps(indent=2); compact: one line; crlf: kineto with CRLF line ends.
    """
    def enc(value, **kw) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=True, **kw)

    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list) or layout in ("indent2", "compact"):
        text = enc(doc, indent=2) if layout == "indent2" else enc(doc, separators=(",", ":")) if layout == "compact" else enc(doc)
    else:
        top = [(k, v) for k, v in doc.items() if k != "traceEvents"]
        events = ",\n".join("  " + enc(e) for e in doc["traceEvents"])
        array = f'"traceEvents": [\n{events}\n  ]' if doc["traceEvents"] else '"traceEvents": []'
        head = ",\n".join(f"  {enc(k)}: {enc(v)}" for k, v in top)
        if layout == "keys_after":
            body = ",\n  ".join(x for x in (array, head.strip()) if x)
        else:
            body = ",\n  ".join(x for x in (head.strip(), array) if x)
        text = "{\n  " + body + "\n}\n"
        if layout == "crlf":
            text = text.replace("\n", "\r\n")
    text = DEEP.sub(_deep_text, text)
    return text.encode("utf-8", "surrogatepass")


def gz(data: bytes, level: int = 6) -> bytes:
    return gzip.compress(data, level, mtime=0)


# ---------------------------------------------------------------------------------------------
# Mutants
# ---------------------------------------------------------------------------------------------


@dataclass
class Mutant:
    index: int
    cls: str
    base: Base
    info: str
    data: bytes | None  # None: a path that is not a file (see ``kind``)
    suffix: str = ".json"
    kind: str = "file"  # file | missing | directory | fifo | fifo_entry | device (see m_non_regular)
    expect: str = ""  # "cut" (cut off mid-write) or "corrupt": expect exit 2 and a one-line warning or error
    same_as_base: bool = False  # a re-serialisation: expect the same summary as the base
    warns: str = ""  # text of a warning the summary must print (the one way it may differ from the base's)
    lossless: bool = False  # every event the base has is read: as many rows, no more losses
    isolate: bool = False  # measure in a fresh process (decompression bombs)

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0

    def filename(self) -> str:
        return f"m{self.index:06d}_{self.cls}{self.suffix}"


class Ctx:
    """What a mutator gets: the base, a fresh parsed copy of it, and a seeded RNG."""

    _text: dict[str, bytes] = {}

    def __init__(self, rng: random.Random, base: Base, bases: list[Base]):
        self.serialize = True
        self.rng = rng
        self.base = base
        self.bases = bases

    def text(self) -> bytes:
        """The base's JSON, uncompressed, byte for byte (whole seeds keep their exact layout)."""
        if self.base.path not in Ctx._text:
            if len(Ctx._text) > 64:
                Ctx._text.clear()
            Ctx._text[self.base.path] = read_bytes(self.base.path)
        return Ctx._text[self.base.path]

    def doc(self) -> dict:
        return parse_doc(self.text())


def _events(doc: dict) -> list:
    events = doc.get("traceEvents")
    return events if isinstance(events, list) else []


CATS = ("kernel", "cpu_op", "cuda_runtime", "cuda_driver", "python_function", "user_annotation",
        "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "Trace", "cpu_instant_event", "ac2g")
EVENT_FIELDS = ("ts", "dur", "pid", "tid", "ph", "cat", "name", "args", "id", "s", "bp")
ARG_FIELDS = ("External id", "correlation", "Python id", "Python parent id", "device", "stream", "grid", "block",
              "registers per thread", "shared memory", "est. achieved occupancy %", "bytes", "Bytes", "cbid",
              "Sequence number", "kernel_hash", "Input Dims", "Input type", "name", "labels", "sort_index",
              "Record function id", "Ev Idx", "Concrete Inputs", "context", "queued", "warps per SM",
              "blocks per SM", "Python module id", "Fwd thread id", "Total Allocated", "Addr")
TOP_FIELDS = ("deviceProperties", "baseTimeNanoseconds", "kerneltui", "schemaVersion", "record_shapes",
              "with_stack", "profile_memory", "traceName", "displayTimeUnit", "cuda_driver_version",
              "cuda_runtime_version", "cupti_version", "distributedInfo", "trace_id", "traceEvents")
HUGE = (1e308, -1e308, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64 + 1, 10**30, -(10**30), 2**31, -1,
        -5000, -1.5, 0, 5e-324, 1.7976931348623157e308, 9007199254740993, 10**400,
        4e15, -4e15, 2**52 - 1, 4503599627370495.5, 9.2e15, 1e15)  # around the loader's limit of 2**52 µs
NON_FINITE = (math.nan, math.inf, -math.inf)
CONTROL = ("\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b[31m", "\x1b]0;title\x07", "\x1b[2J", "\r",
           "\n", "\t", "\x7f", "\x85", "\x9b", "\u2028", "\u202e", "\ufeff", "\ud800", "\udfff")
BAD_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
            b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80")


def _pick(rng: random.Random, events: list, k: int | None = None, cats=None) -> list[dict]:
    """Some dict events, often all of one category (kernels, ops...)."""
    dicts = [e for e in events if isinstance(e, dict)]
    if not dicts:
        return []
    if cats is None and rng.random() < 0.6:
        cats = (rng.choice(CATS),)
    if cats:
        chosen = [e for e in dicts if e.get("cat") in cats]
        dicts = chosen or dicts
    if k is None:
        k = rng.choice((1, 1, 2, 3, 5, 10, len(dicts)))
    return rng.sample(dicts, min(k, len(dicts)))


def _type_of(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return {int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(type(value), "other")


def _retyped(rng: random.Random, value):
    """The value as another JSON type (string <-> int <-> float <-> list <-> dict <-> null <-> bool)."""
    makers = {
        "str": lambda: str(value) if not isinstance(value, str) else rng.choice(("", "abc", "12", "1e3", "NaN", "0x1f")),
        "int": lambda: rng.choice((0, 1, -1, 7, 2**31, 123456789012)),
        "float": lambda: rng.choice((0.5, -0.0, 1e-9, 3.25, 1e20, 12.3456789)),
        "list": lambda: rng.choice(([], [value], [1, 2, 3], [[1]], ["a"], [None])),
        "dict": lambda: rng.choice(({}, {"x": value}, {"name": "n"}, {"id": 0})),
        "null": lambda: None,
        "bool": lambda: rng.choice((True, False)),
    }
    current = _type_of(value)
    choice = rng.choice([t for t in makers if t != current])
    return makers[choice]()


def _set_field(rng, e: dict, name: str, value) -> None:
    if name in EVENT_FIELDS:
        e[name] = value
    else:
        args = e.get("args")
        if not isinstance(args, dict):
            args = e["args"] = {}
        args[name] = value


def _get(e: dict, name: str):
    if name in e:
        return e[name]
    args = e.get("args")
    return args.get(name) if isinstance(args, dict) else None


def _field_names(rng, e: dict) -> list[str]:
    names = [k for k in e if k != "args"]
    if isinstance(e.get("args"), dict):
        names += list(e["args"])
    names += [rng.choice(EVENT_FIELDS), rng.choice(ARG_FIELDS)]
    return names


def _finish(ctx: Ctx, cls: str, doc, info: str, **kw) -> Mutant:
    """Serialise in a random layout, gzip some of the time."""
    rng = ctx.rng
    if not ctx.serialize:
        return None  # one step of a combo: the document is mutated in place
    layout = kw.pop("layout", None) or rng.choice(("kineto", "kineto", "kineto", "indent2", "compact", "keys_after"))
    data = dumps(doc, layout, ensure_ascii=kw.pop("ensure_ascii", rng.random() < 0.7))
    compress = kw.pop("compress", None)
    if compress is None:
        compress = rng.random() < 0.4
    if compress:
        data, suffix = gz(data, rng.choice((1, 6, 9))), ".json.gz"
    else:
        suffix = ".json"
    return Mutant(0, cls, ctx.base, f"{info}; layout={layout}{'; gzip' if compress else ''}", data, suffix, **kw)


# -- structural mutators ------------------------------------------------------------------------


def m_drop_field(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    notes = []
    if rng.random() < 0.25:
        key = rng.choice(TOP_FIELDS)
        doc.pop(key, None)
        notes.append(f"top {key}")
    events = _events(doc)
    field_name = rng.choice(EVENT_FIELDS[:8] + ARG_FIELDS[:18])
    chosen = _pick(rng, events)
    for e in chosen:
        name = field_name if rng.random() < 0.7 else rng.choice(_field_names(rng, e))
        if name in e:
            del e[name]
        elif isinstance(e.get("args"), dict):
            e["args"].pop(name, None)
    notes.append(f"{field_name} from {len(chosen)} events")
    return _finish(ctx, "drop_field", doc, "dropped " + ", ".join(notes))


def m_retype_field(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    field_name = rng.choice(EVENT_FIELDS[:8] + ARG_FIELDS)
    chosen = _pick(rng, events)
    same = rng.random() < 0.5  # the same new value everywhere, or one per event
    new = _retyped(rng, _get(chosen[0], field_name) if chosen else None)
    for e in chosen:
        name = field_name if rng.random() < 0.8 else rng.choice(_field_names(rng, e))
        _set_field(rng, e, name, new if same else _retyped(rng, _get(e, name)))
    return _finish(ctx, "retype_field", doc, f"retyped {field_name} in {len(chosen)} events to {new!r:.40}")


def _top_value(rng: random.Random, key: str, old):
    if key == "deviceProperties":
        device = {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320, "computeMajor": 9,
                  "computeMinor": 0, "numSms": 132}
        bad = dict(device)
        k = rng.choice(list(device))
        bad[k] = _retyped(rng, device[k]) if rng.random() < 0.7 else rng.choice(HUGE + NON_FINITE)
        return rng.choice(("H200", 5, {"name": "x"}, [1, "a", None], [bad], [bad, device], [[device]], None, [],
                           [{"name": "\x1b[31mNVIDIA\x00H200"}], [{"id": "zero"}], [{"id": 1.5e308}],
                           [{"name": "a100 " * 20000}]))
    if key == "kerneltui":
        capture = {"name": "m", "mode": "eager", "torch": "2.13", "params": {"n": 1}, "device": "cpu",
                   "profiled_calls": 3, "warmup_calls": 1, "compile_seconds": 1.5, "compile_mode": "default"}
        k = rng.choice(list(capture))
        capture[k] = _retyped(rng, capture[k])
        return rng.choice(([], "x", 5, None, {"capture": []}, {"capture": "s"}, {"capture": 5}, {"capture": capture},
                           {"capture": {"device": ["a"]}}, {"capture": {"params": [1, 2]}}))
    if key == "baseTimeNanoseconds":
        return rng.choice(("123", "abc", 1.5, -1, [], {}, True, None) + HUGE + NON_FINITE)
    if key == "traceEvents":
        return rng.choice(("events", 5, None, {}, {"a": {"ph": "X"}}, [1, "x", None, [], True], [[{"ph": "X"}]]))
    return _retyped(rng, old) if rng.random() < 0.7 else rng.choice(HUGE + NON_FINITE)


def m_top_level(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    keys = rng.sample(TOP_FIELDS, rng.choice((1, 1, 2, 3)))
    for key in keys:
        doc[key] = _top_value(rng, key, doc.get(key))
    return _finish(ctx, "top_level", doc, "top-level " + ", ".join(f"{k}={doc[k]!r:.50}" for k in keys))


NUMERIC = ("ts", "dur", "pid", "tid", "External id", "correlation", "Python id", "Python parent id", "device",
           "stream", "registers per thread", "shared memory", "est. achieved occupancy %", "bytes", "Bytes", "cbid",
           "Sequence number", "sort_index", "grid", "block")


def _numeric_mutation(ctx: Ctx, cls: str, values: tuple) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    name = rng.choice(NUMERIC)
    value = rng.choice(values)
    chosen = _pick(rng, events)
    for e in chosen:
        v = value if rng.random() < 0.8 else rng.choice(values)
        if name in ("grid", "block"):
            v = [v, 1, 1] if rng.random() < 0.7 else [v, v, v]
        _set_field(rng, e, name, v)
    if rng.random() < 0.15:
        doc["baseTimeNanoseconds"] = rng.choice(values)
    if rng.random() < 0.15 and isinstance(doc.get("deviceProperties"), list) and doc["deviceProperties"]:
        d = doc["deviceProperties"][0]
        if isinstance(d, dict):
            d[rng.choice(("totalGlobalMem", "numSms", "id", "computeMajor"))] = rng.choice(values)
    return _finish(ctx, cls, doc, f"{name}={value!r:.30} in {len(chosen)} events")


def m_nan_inf(ctx: Ctx) -> Mutant:
    return _numeric_mutation(ctx, "nan_inf", NON_FINITE)


def m_huge_numbers(ctx: Ctx) -> Mutant:
    return _numeric_mutation(ctx, "huge_numbers", HUGE)


def m_float_ts(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    mode = rng.choice(("fraction", "scale", "exponent", "integer", "tiny"))
    for e in _events(doc):
        if not isinstance(e, dict):
            continue
        for k in ("ts", "dur"):
            v = e.get(k)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if mode == "fraction":
                e[k] = v + rng.random()
            elif mode == "scale":
                e[k] = v * rng.choice((1e3, 1e6, 1e-3))
            elif mode == "exponent":
                e[k] = float(f"{v:.6e}") + 1e15
            elif mode == "integer":
                e[k] = int(v)
            else:
                e[k] = v * 1e-9
    return _finish(ctx, "float_ts", doc, f"timestamps {mode}")


def _text_fields(rng, e: dict) -> list[tuple[dict, str]]:
    spots = [(e, k) for k in ("name", "cat", "tid", "pid") if k in e]
    args = e.get("args")
    if isinstance(args, dict):
        spots += [(args, k) for k in ("name", "labels", "kernel_hash", "Input type") if k in args]
    return spots


def m_control_chars(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    chosen = _pick(rng, _events(doc))
    for e in chosen:
        spots = _text_fields(rng, e)
        if not spots:
            continue
        where, key = rng.choice(spots)
        value = where[key]
        text = value if isinstance(value, str) else str(value)
        c = rng.choice(CONTROL)
        at = rng.randrange(len(text) + 1)
        where[key] = text[:at] + c + text[at:]
    data_raw = rng.random() < 0.2  # raw control bytes inside strings: not valid JSON
    m = _finish(ctx, "control_chars", doc, f"control characters in {len(chosen)} events", compress=False,
                ensure_ascii=rng.random() < 0.5)
    if data_raw:
        data = bytearray(m.data)
        spots = [i for i in range(len(data)) if data[i : i + 1] == b'"'][1::2]
        for i in rng.sample(spots, min(3, len(spots))):
            data[i:i] = bytes([rng.randrange(0, 32)])
        m.data, m.info = bytes(data), m.info + "; raw control bytes"
    return m


def m_invalid_utf8(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    data = bytearray(dumps(ctx.doc(), "kineto") if rng.random() < 0.5 else ctx.text())
    quotes = [m.start() for m in re.finditer(rb'"name": "', data[: 1 << 22])] or [0]
    notes = []
    for _ in range(rng.choice((1, 2, 5))):
        at = rng.choice(quotes) + 9
        bad = rng.choice(BAD_UTF8)
        data[at:at] = bad
        notes.append(bad.hex())
    compress = rng.random() < 0.4
    out = gz(bytes(data)) if compress else bytes(data)
    return Mutant(0, "invalid_utf8", ctx.base, f"bytes {','.join(notes)} in names", out, ".json.gz" if compress else ".json")


def m_long_names(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    size = rng.choice((1 << 20, 1 << 20, 300_000, 2 << 20))
    chosen = _pick(rng, _events(doc), rng.choice((1, 1, 2)))
    kind = rng.choice(("repeat", "template", "unicode", "words"))
    for e in chosen:
        if kind == "repeat":
            name = "k" * size
        elif kind == "template":
            name = "void at::native::kernel<" * (size // 48) + ">" * (size // 48) + "(int)"
        elif kind == "unicode":
            name = "é漢" * (size // 5)
        else:
            name = "_".join("add" for _ in range(size // 4))
        where, key = rng.choice(_text_fields(rng, e) or [(e, "name")])
        where[key] = name
    return _finish(ctx, "long_names", doc, f"{kind} names of {size:,} chars in {len(chosen)} events")


ODD_NAMES = {
    "user_annotation": ("ProfilerStep#" + "9" * 30, "ProfilerStep#99999999999999999999", "ProfilerStep#-1",
                        "ProfilerStep#\u0663", "ProfilerStep#", "ProfilerStep#1 ", "## Call CompiledFxGraph ##", "",
                        "Optimizer.step#SGD.step", "a" * 100_000),
    "python_function": ("nn.Module: ", "nn.Module: A/B", "nn.Module: " + "M/" * 5000, "x.py(99999999999999999999): f",
                        "x.py(1): ", "(1): f", "torch/x.py(1): f", "\x1b[31mx.py(1): f", "x.py(1): f" * 20000),
    "kernel": ("triton_poi_fused__0", "triton_poi_fused_" + "_".join(["add"] * 20000) + "_0", "triton_poi_fused_0",
               "triton__fused_add_1", "void f<" * 5000, "Memcpy HtoD", "", "::", "operator()", "<(>)"),
    "cpu_op": ("", "::", "aten::", "triton_poi_fused_add_0", "aten::" + "_" * 100_000, "aten::add_", "aten::mm",
               "cudaGraphLaunch", "ProfilerStep#1"),
    "cuda_runtime": ("cudaGraphLaunch", "cuLaunchKernel", "", "hipGraphLaunch"),
}


def m_odd_names(ctx: Ctx) -> Mutant:
    """Names that the name parsers (steps, frames, Triton, modules, device table) read specially."""
    rng, doc = ctx.rng, ctx.doc()
    notes = []
    for _ in range(rng.choice((1, 2, 3))):
        cat = rng.choice(sorted(ODD_NAMES))
        name = rng.choice(ODD_NAMES[cat])
        chosen = _pick(rng, _events(doc), rng.choice((1, 3, 10, 100)), cats=(cat,))
        for e in chosen:
            e["name"] = name
        notes.append(f"{len(chosen)} {cat} named {name!r:.40}")
    if rng.random() < 0.3:
        doc["deviceProperties"] = [{"id": 0, "name": rng.choice(("a100 " * 20000, "NVIDIA " * 30000 + "H100 pcie",
                                                                 "h100" + " 80gb" * 20000, "\x00H200"))}]
        notes.append("a long device name")
    return _finish(ctx, "odd_names", doc, "; ".join(notes))


def m_shuffle(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    mode = rng.choice(("all", "reverse", "swaps"))
    if mode == "all":
        rng.shuffle(events)
    elif mode == "reverse":
        events.reverse()
    else:
        for _ in range(max(1, len(events) // 20)):
            i, j = rng.randrange(len(events) or 1), rng.randrange(len(events) or 1)
            if events:
                events[i], events[j] = events[j], events[i]
    return _finish(ctx, "shuffle", doc, f"events shuffled ({mode})")


def m_ids(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = [e for e in _events(doc) if isinstance(e, dict)]
    key = rng.choice(("External id", "correlation", "Python id", "Python parent id"))
    mode = rng.choice(("dangling", "colliding", "all_same", "swap", "cycle", "self", "negative"))
    holders = [e for e in events if isinstance(e.get("args"), dict) and key in e["args"]] or events
    chosen = rng.sample(holders, min(len(holders), rng.choice((1, 3, 10, len(holders)))))
    for n, e in enumerate(chosen):
        args = e.setdefault("args", {}) if isinstance(e.get("args"), dict) or "args" not in e else None
        if args is None:
            continue
        if mode == "dangling":
            args[key] = 10**9 + n
        elif mode in ("colliding", "all_same"):
            args[key] = 1 if mode == "all_same" else rng.choice((1, 2, 3))
        elif mode == "swap" and chosen:
            other = rng.choice(chosen).get("args")
            if isinstance(other, dict):
                args[key], other[key] = other.get(key, -1), args.get(key, -1)
        elif mode == "cycle":
            args["Python id"] = n
            args["Python parent id"] = (n + 1) % len(chosen)
        elif mode == "self":
            args["Python parent id"] = args.get("Python id", 0)
        else:
            args[key] = -rng.randrange(1, 10**6)
    return _finish(ctx, "ids", doc, f"{mode} {key} in {len(chosen)} events")


def m_bare_array(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    if rng.random() < 0.3:
        events = [e for e in events if isinstance(e, dict) and e.get("ph") != "M"]
    layout = rng.choice(("kineto_list", "indent2", "compact"))
    if layout == "kineto_list":
        text = ("[\n" + ",\n".join("  " + json.dumps(e) for e in events) + "\n]\n").encode()
        compress = rng.random() < 0.4
        return Mutant(0, "bare_array", ctx.base, f"bare array, one event a line{'; gzip' if compress else ''}",
                      gz(text) if compress else text, ".json.gz" if compress else ".json")
    return _finish(ctx, "bare_array", events, "bare array", layout=layout)


def m_begin_end(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    share = rng.choice((0.1, 0.5, 1.0))
    placement = rng.choice(("adjacent", "end", "sorted"))
    broken = rng.random() < 0.3
    out, tail = [], []
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and rng.random() < share:
            begin = {k: v for k, v in e.items() if k != "dur"}
            begin["ph"] = "B"
            end = {"ph": "E", "pid": e.get("pid"), "tid": e.get("tid"), "name": e.get("name"), "cat": e.get("cat")}
            dur = e.get("dur", 0)
            end["ts"] = e.get("ts", 0) + dur if isinstance(dur, (int, float)) and isinstance(e.get("ts"), (int, float)) else 0
            out.append(begin)
            if broken and rng.random() < 0.2:
                continue  # a B without its E
            (out if placement == "adjacent" else tail).append(end)
        else:
            out.append(e)
    out += tail
    if placement == "sorted":
        out.sort(key=lambda e: e.get("ts", 0) if isinstance(e, dict) and isinstance(e.get("ts"), (int, float)) else 0)
    doc["traceEvents"] = out
    return _finish(ctx, "begin_end", doc, f"B/E pairs for {share:.0%} of X events, {placement}{', unbalanced' if broken else ''}")


def m_deep_nesting(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    depth = rng.choice((1001, 1025, 2000, 10_000, 100_000, 300_000))
    kind = rng.choice("ld")
    where = rng.choice(("args.extra", "Input Dims", "args", "name", "top"))
    marker = f"@@DEEP{kind}{depth}@@"
    chosen = _pick(rng, _events(doc), rng.choice((1, 2)), cats=("cpu_op",) if where == "Input Dims" else None)
    for e in chosen:
        if where == "args":
            e["args"] = marker
        elif where == "name":
            e["name"] = marker
        elif where == "Input Dims":
            _set_field(rng, e, "Input Dims", marker)
        else:
            _set_field(rng, e, "Deep", marker)
    if where == "top" or not chosen:
        doc["extra"] = marker
    if where == "Input Dims":
        doc["record_shapes"] = 1
    return _finish(ctx, "deep_nesting", doc, f"{'list' if kind == 'l' else 'dict'} nested {depth} deep in {where}")


DIMS = ([[[1, 2], [3]]], [[1000000, [2]]], [["a"]], [[-1]], [[2**63]], [[1e308]], [[None]], "string", 5, {"a": 1},
        [[1] * 100], [[10**6] * 8], [[0]], [[]], [[[[]]]], [[1.5, 2.5]], [[True, 2]], [[-(2**63)]], [[10**30]],
        [[10**6] * 30], [[math.nan]], [[2, 3], [3, 2]], None)
TYPES = (["float", "float"], ["TensorList"], ["float"], [["float"]], [{"a": 1}], [None], "float", 5, [],
         ["c10::BFloat16", "Scalar"], ["TensorList", "float"], ["ScalarList"], [1, 2], ["unknown"])


def m_input_dims(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    doc["record_shapes"] = 1
    ops = [e for e in _events(doc) if isinstance(e, dict) and e.get("cat") == "cpu_op"] or _pick(rng, _events(doc))
    chosen = rng.sample(ops, min(len(ops), rng.choice((1, 3, 10, len(ops) or 1))))
    dims, types = rng.choice(DIMS), rng.choice(TYPES)
    gemm = rng.random() < 0.3
    for e in chosen:
        d = dims if rng.random() < 0.8 else rng.choice(DIMS)
        t = types if rng.random() < 0.5 else rng.choice(TYPES)
        if isinstance(d, list) and rng.random() < 0.5 and d and isinstance(d[0], list):
            d = [d[0]] * (len(t) if isinstance(t, list) else 1)  # as many dims as types
        _set_field(rng, e, "Input Dims", d)
        if rng.random() < 0.8:
            _set_field(rng, e, "Input type", t)
        if gemm:
            e["name"] = rng.choice(("aten::mm", "aten::addmm", "aten::linear", "aten::bmm", "aten::mv", "aten::dot"))
    return _finish(ctx, "input_dims", doc, f"Input Dims {dims!r:.40} types {types!r:.40} in {len(chosen)} ops"
                   f"{' (as GEMMs)' if gemm else ''}")


def m_reserialize(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    layout = rng.choice(("indent2", "keys_after", "compact", "crlf", "kineto", "bom", "indent2_keys_after"))
    if layout == "bom":
        data = _BOM + dumps(doc, "kineto")
        return Mutant(0, "reserialize", ctx.base, "UTF-8 byte-order mark first", data)
    if layout == "indent2_keys_after":
        doc = {"traceEvents": doc.get("traceEvents"), **{k: v for k, v in doc.items() if k != "traceEvents"}}
        layout = "indent2"
    return _finish(ctx, "reserialize", doc, "re-serialised", layout=layout, same_as_base=True)


def m_empty_events(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    mode = rng.choice(("empty", "metadata_only", "missing", "one_instant", "no_gpu", "only_gpu"))
    events = _events(doc)
    if mode == "empty":
        doc["traceEvents"] = []
    elif mode == "metadata_only":
        doc["traceEvents"] = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    elif mode == "missing":
        doc.pop("traceEvents", None)
    elif mode == "one_instant":
        doc["traceEvents"] = [{"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 1}]
    elif mode == "no_gpu":
        doc["traceEvents"] = [e for e in events if isinstance(e, dict) and e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    else:
        doc["traceEvents"] = [e for e in events if isinstance(e, dict) and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return _finish(ctx, "empty_events", doc, f"traceEvents {mode}")


def _decoy_events(events: list) -> list[dict]:
    """What a decoy array would show instead of the trace: its first complete events renamed, 999 µs long."""
    decoys = [{**e, "name": f"decoy_{e.get('name')}", "dur": 999.0}
              for e in events[:200] if isinstance(e, dict) and e.get("ph") == "X"][:50]
    return decoys or [{"ph": "X", "cat": "kernel", "name": "decoy", "pid": 0, "tid": 7, "ts": 0, "dur": 999.0}]


def _array_text(events: list | None, layout: str, indent: int = 2) -> str:
    """An events array as a member value: one event a line at ``indent`` spaces (Kineto's layout), or one line."""
    if events is None:
        return "null"
    if layout != "lines" or not events:
        return json.dumps(events, separators=(",", ":"))
    pad = " " * indent
    return "[\n" + ",\n".join(pad + json.dumps(e) for e in events) + "\n" + pad[:-2] + "]"


def _object_text(members: list[tuple[str, str]]) -> str:
    """A top-level object of written members ((quoted key, value text)), one a line; keys may repeat."""
    return "{\n  " + ",\n  ".join(f"{key}: {value}" for key, value in members) + "\n}\n"


def _top_members(doc: dict) -> list[tuple[str, str]]:
    return [(json.dumps(k), json.dumps(v, allow_nan=True)) for k, v in doc.items() if k != "traceEvents"]


def _maybe_gz(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    return (gz(data), ".json.gz") if rng.random() < 0.4 else (data, ".json")


NESTINGS = ("object", "list", "string_key", "in_string")


def m_nested_events(ctx: Ctx) -> Mutant:
    """A decoy events array under a "traceEvents" that is no top-level key (nested in another value, or a
    string that only looks like the key), before or after the trace's own: it must read as if it were not there."""
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    nesting, where = rng.choice(NESTINGS), rng.choice(("before", "after"))
    layout, indent = rng.choice(("lines", "lines", "compact")), rng.choice((2, 4))
    decoy = _array_text(_decoy_events(events), layout, indent)
    extra = {"object": [('"extra"', f'{{"traceEvents": {decoy}}}')],
             "list": [('"extra"', f'[{{"traceEvents": {decoy}}}]')],
             "string_key": [('"kind"', '"traceEvents"'), ('"extra"', decoy)],
             "in_string": [('"note"', json.dumps('"traceEvents": [')), ('"extra"', decoy)]}[nesting]
    real = [('"traceEvents"', _array_text(events, rng.choice(("lines", "lines", "compact"))))]
    members = _top_members(doc)
    members = extra + members + real if where == "before" else members + real + extra
    data, suffix = _maybe_gz(rng, _object_text(members).encode())
    return Mutant(0, "nested_events", ctx.base, f"decoy traceEvents ({nesting}, {layout}) {where} the events"
                  f"{'; gzip' if suffix.endswith('gz') else ''}", data, suffix, same_as_base=True)


REPEAT_WARNING = "repeats its top-level traceEvents key"


def m_repeated_events(ctx: Ctx) -> Mutant:
    """traceEvents twice at the top level: JSON readers take the last, and so must kerneltui, saying so."""
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    kind = rng.choice(("decoy", "decoy", "empty", "null", "same"))
    first = {"decoy": _decoy_events(events), "empty": [], "null": None, "same": events}[kind]
    first_layout = rng.choice(("lines", "compact"))
    # a file decoded whole is looked at for repeated keys where "traceEvents" is written so twice
    streamed = kind == "null" or (first_layout == "lines" and bool(first))
    key = rng.choice(('"traceEvents"', '"trace\\u0045vents"')) if streamed else '"traceEvents"'
    members = _top_members(doc)
    at = rng.randrange(len(members) + 1)
    members.insert(at, ('"traceEvents"', _array_text(first, first_layout)))
    members.insert(rng.randrange(at + 1, len(members) + 1), (key, _array_text(events, rng.choice(("lines", "compact")))))
    data, suffix = _maybe_gz(rng, _object_text(members).encode())
    return Mutant(0, "repeated_events", ctx.base, f"traceEvents twice: first {kind} ({first_layout}), last as {key}"
                  f"{'; gzip' if suffix.endswith('gz') else ''}", data, suffix, same_as_base=True, warns=REPEAT_WARNING)


LONE_SURROGATES = ("\ud83d", "\udc00", "\ud800", "\udbff", "\udfff", "\ud83d\ud83d\ude00", "\ude00\ud83d")
_SURROGATE_ESCAPE = re.compile(rb"\\u(d[89a-f][0-9a-f]{2})")


def m_lone_surrogates(ctx: Ctx) -> Mutant:
    """Lone surrogate escapes (json.dumps writes one as "\\ud83d") in names and other strings: JSON readers
    that refuse them would drop the event; kerneltui keeps every event, the escape as text."""
    rng, doc = ctx.rng, ctx.doc()
    chosen = _pick(rng, _events(doc))
    for e in chosen:
        # not pid/tid: a B and its E on other lanes would no longer pair
        spots = [(where, key) for where, key in _text_fields(rng, e) if key not in ("pid", "tid")]
        if spots:
            where, key = rng.choice(spots)
            text = where[key] if isinstance(where[key], str) else str(where[key])
            at = rng.randrange(len(text) + 1)
            where[key] = text[:at] + rng.choice(LONE_SURROGATES) + text[at:]
    if rng.random() < 0.2:
        doc["traceName"] = "t" + rng.choice(LONE_SURROGATES)
    m = _finish(ctx, "lone_surrogates", doc, f"lone surrogates in {len(chosen)} events", ensure_ascii=True,
                compress=False, lossless=True)
    if rng.random() < 0.3:
        m.data = _SURROGATE_ESCAPE.sub(lambda x: b"\\u" + x.group(1).upper(), m.data)
        m.info += "; escapes in upper case"
    m.data, m.suffix = _maybe_gz(rng, m.data)
    return m


EMPTY_ARRAYS = ("[]", "[\n]", "[\n  ]", "[\n\n  ]", "[ ]", "[\r\n]")


def m_zero_events(ctx: Ctx) -> Mutant:
    """A trace of no events: an empty traceEvents list, however it is laid out, with or without the other keys."""
    rng, doc = ctx.rng, ctx.doc()
    empty, where = rng.choice(EMPTY_ARRAYS), rng.choice(("last", "first", "alone", "bare"))
    if where == "bare":
        text = empty + "\n"
    else:
        members = [] if where == "alone" else _top_members(doc)
        events = ('"traceEvents"', empty)
        text = _object_text([events, *members] if where == "first" else [*members, events])
    data, suffix = _maybe_gz(rng, text.encode())
    return Mutant(0, "zero_events", ctx.base, f"no events: {empty!r} {where}{'; gzip' if suffix.endswith('gz') else ''}",
                  data, suffix)


NON_REGULAR = ("fifo", "fifo", "fifo_entry", "fifo_entry", "device")


def m_non_regular(ctx: Ctx) -> Mutant:
    """Files that are no regular file: the trace as a named pipe (what ``<(zcat t.json.gz)`` hands a
    command: read, uncached, as the base), a FIFO planted where the trace's cache entry goes (with the
    cache on: it must neither block nor be read), and a character device (/dev/null: empty)."""
    rng = ctx.rng
    kind = rng.choice(NON_REGULAR)
    data, suffix = (ctx.text(), ".json") if rng.random() < 0.6 else (gz(ctx.text()), ".json.gz")
    if kind == "device":
        return Mutant(0, "non_regular", ctx.base, "a character device (/dev/null)", b"", ".json", kind=kind)
    what = {"fifo": "the trace through a named pipe", "fifo_entry": "a FIFO in place of the cache entry"}[kind]
    return Mutant(0, "non_regular", ctx.base, f"{what}{'; gzip' if suffix.endswith('gz') else ''}", data, suffix,
                  kind=kind, same_as_base=True)


def _kernel_template(events: list) -> tuple[dict, dict | None]:
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation") if isinstance(e.get("args"), dict) else None
            launch = next((r for r in events if isinstance(r, dict) and r.get("cat") in ("cuda_runtime", "cuda_driver")
                           and isinstance(r.get("args"), dict) and r["args"].get("correlation") == corr), None)
            return e, launch
    return ({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 1,
             "args": {"correlation": 1, "device": 0, "stream": 7}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 1,
             "args": {"correlation": 1}})


def m_many_kernels(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    kernel, launch = _kernel_template(events)
    n = rng.choice((20_000, 20_000, 5_000))
    style = rng.choice(("plain", "triton", "template"))
    t0 = kernel.get("ts", 0) if isinstance(kernel.get("ts"), (int, float)) else 0
    new = []
    for i in range(n):
        name = {"plain": f"kernel_{i}", "triton": f"triton_poi_fused_add_{i % 97}_{i}",
                "template": f"void at::native::f<{i}, at::native::Op{i}<float>>(int)"}[style]
        corr = 5_000_000 + i
        new.append({"ph": "X", "cat": "kernel", "name": name, "pid": kernel.get("pid", 0), "tid": kernel.get("tid", 7),
                    "ts": t0 + 2 * i, "dur": 1, "args": {"correlation": corr, "stream": 7, "device": 0}})
        if launch is not None and i % 2 == 0:
            new.append({"ph": "X", "cat": launch.get("cat"), "name": launch.get("name"), "pid": launch.get("pid"),
                        "tid": launch.get("tid"), "ts": t0 + 2 * i - 1, "dur": 1, "args": {"correlation": corr}})
    doc["traceEvents"] = events + new
    return _finish(ctx, "many_kernels", doc, f"{n:,} distinct {style} kernel names", layout="compact",
                   compress=rng.random() < 0.7)


def m_subset(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = [e for e in _events(doc) if isinstance(e, dict)]
    keep = []
    if rng.random() < 0.6:
        kernel, launch = _kernel_template(events)
        keep = [kernel] + ([launch] if launch is not None else [])
        if rng.random() < 0.5:
            ext = (kernel.get("args") or {}).get("External id") if isinstance(kernel.get("args"), dict) else None
            keep += [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")
                     and isinstance(e.get("args"), dict) and e["args"].get("External id") == ext][:1]
    others = [e for e in events if e not in keep]
    keep += rng.sample(others, min(len(others), rng.choice((0, 1, 2, 5, 10))))
    if rng.random() < 0.3:
        keep += [e for e in events if e.get("ph") == "M"]
    doc["traceEvents"] = keep
    return _finish(ctx, "subset", doc, f"{len(keep)} events kept")


def m_remove_kind(ctx: Ctx) -> Mutant:
    rng, doc = ctx.rng, ctx.doc()
    events = _events(doc)
    cats = sorted({e.get("cat") for e in events if isinstance(e, dict) and isinstance(e.get("cat"), str)})
    drop = set(rng.sample(cats, min(len(cats), rng.choice((1, 1, 2)))))
    doc["traceEvents"] = [e for e in events if not (isinstance(e, dict) and isinstance(e.get("cat"), str)
                                                    and e["cat"] in drop)]
    return _finish(ctx, "remove_kind", doc, f"removed every {', '.join(sorted(drop))} event")


STRUCTURAL = ("drop_field", "retype_field", "top_level", "nan_inf", "huge_numbers", "float_ts", "ids", "shuffle",
              "begin_end", "input_dims", "subset", "remove_kind", "odd_names")


def m_combo(ctx: Ctx) -> Mutant:
    """Several structural mutations, one after another."""
    rng = ctx.rng
    steps = rng.sample(STRUCTURAL, rng.choice((2, 3, 4)))
    doc = ctx.doc()
    infos = []
    for name in steps:
        sub = Ctx(rng, ctx.base, ctx.bases)
        sub.doc = lambda d=doc: d  # mutate the same document in place
        sub.serialize = False
        MUTATORS[name](sub)
        infos.append(name)
    return _finish(ctx, "combo", doc, " + ".join(infos))


# -- byte-level mutators ------------------------------------------------------------------------


def _plain_or_raw(ctx: Ctx) -> bytes:
    """The base's exact bytes (its own layout) or a random re-serialisation of it."""
    if not ctx.base.parsed or ctx.rng.random() < 0.6:
        return ctx.text()
    return dumps(ctx.doc(), ctx.rng.choice(("kineto", "indent2", "compact", "keys_after")))


def _cut_point(rng: random.Random, data: bytes) -> int:
    mode = rng.random()
    if mode < 0.15:
        return rng.randrange(0, min(len(data), 64))  # in the header
    if mode < 0.3:
        return len(data) - rng.randrange(1, min(len(data), 64))  # near the end
    if mode < 0.45:
        seps = [m.start() for m in re.finditer(rb"\n\s*\{", data[: 1 << 24])]
        if seps:
            return rng.choice(seps) + rng.choice((0, 1, 2, 3))
    return rng.randrange(0, len(data))


def m_truncate(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    data = _plain_or_raw(ctx)
    cut = _cut_point(rng, data)
    lost = data[cut:].strip()
    return Mutant(0, "truncate", ctx.base, f"cut at byte {cut:,} of {len(data):,}", data[:cut], expect="cut" if lost else "")


def m_truncate_gz(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    data = gz(_plain_or_raw(ctx), rng.choice((1, 6, 9)))
    mode = rng.random()
    cut = rng.randrange(10, len(data)) if mode < 0.7 else len(data) - rng.randrange(1, 9) if mode < 0.9 else rng.randrange(0, 10)
    return Mutant(0, "truncate_gz", ctx.base, f"gzip cut at byte {cut:,} of {len(data):,}", data[:cut], ".json.gz",
                  expect="cut")


def m_gzip_corrupt(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    plain = _plain_or_raw(ctx)
    data = bytearray(gz(plain, rng.choice((1, 6, 9))))
    mode = rng.choice(("flip", "flip_many", "crc", "isize", "header_flags", "trailing_garbage", "double_gzip",
                       "empty_member", "zero_run"))
    if mode == "flip":
        at = rng.randrange(10, max(11, len(data) - 8))
        data[at] ^= 1 << rng.randrange(8)
    elif mode == "flip_many":
        for _ in range(rng.choice((2, 5, 20))):
            at = rng.randrange(10, max(11, len(data) - 8))
            data[at] = rng.randrange(256)
    elif mode == "crc":
        data[-8:-4] = struct.pack("<I", (zlib.crc32(plain) ^ 0xDEADBEEF) & 0xFFFFFFFF)
    elif mode == "isize":
        data[-4:] = struct.pack("<I", rng.randrange(2**32))
    elif mode == "header_flags":
        data[3] = rng.choice((0x04, 0x08, 0x10, 0x02, 0xE0))  # FEXTRA/FNAME/FCOMMENT/FHCRC/reserved without the fields
    elif mode == "trailing_garbage":
        data += rng.choice((b"garbage", b"\x00" * 10, b"\x1f\x8b", b"\x1f\x8b\x08\x00" + bytes(6)))
    elif mode == "double_gzip":
        data = bytearray(gz(bytes(data)))
    elif mode == "empty_member":
        data = bytearray(gz(b"")) + data if rng.random() < 0.5 else data + gz(b"")
    else:
        at = rng.randrange(10, max(11, len(data) - 8))
        data[at : at + 64] = bytes(min(64, len(data) - at))
    return Mutant(0, "gzip_corrupt", ctx.base, f"gzip {mode}", bytes(data), ".json.gz",
                  expect="corrupt" if mode in ("flip", "flip_many", "zero_run", "crc", "isize") else "")


def m_gzip_concat(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    plain = _plain_or_raw(ctx)
    mode = rng.choice(("split", "split", "split_many", "two_docs"))
    if mode == "two_docs":
        other = rng.choice([b for b in ctx.bases if b.parsed] or [ctx.base])
        data = gz(plain) + gz(read_bytes(other.path))
        return Mutant(0, "gzip_concat", ctx.base, f"two whole traces as two gzip members (+{other.name})", data, ".json.gz")
    cuts = sorted(rng.sample(range(1, len(plain)), min(len(plain) - 1, 1 if mode == "split" else rng.choice((3, 10)))))
    parts = [plain[a:b] for a, b in zip([0, *cuts], [*cuts, len(plain)])]
    data = b"".join(gz(p, rng.choice((1, 9))) for p in parts)
    return Mutant(0, "gzip_concat", ctx.base, f"one trace as {len(parts)} gzip members", data, ".json.gz",
                  same_as_base=ctx.base.parsed)


STRAY = (b",", b"]", b"}", b"{", b"[", b'"', b"\x00", b"\n  {", b"\n  {\n", b"],", b"\\", b"\xff", b"null", b"1",
         b" ", b"\n", b":", b"}]}", b'"traceEvents": [', b"\r\n", b"NaN", b"-")


def m_stray_bytes(ctx: Ctx) -> Mutant:
    rng = ctx.rng
    data = bytearray(_plain_or_raw(ctx))
    notes = []
    for _ in range(rng.choice((1, 1, 2, 3, 10))):
        stray = rng.choice(STRAY) if rng.random() < 0.7 else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        if rng.random() < 0.4:
            seps = [m.start() for m in re.finditer(rb"\n  \{", bytes(data[: 1 << 24]))]
            at = rng.choice(seps) if seps else rng.randrange(len(data) + 1)
        else:
            at = rng.randrange(len(data) + 1)
        if rng.random() < 0.2:
            del data[at : at + rng.randrange(1, 4)]
            notes.append(f"-@{at}")
        else:
            data[at:at] = stray
            notes.append(f"{stray!r:.12}@{at}")
    compress = rng.random() < 0.3
    out = gz(bytes(data)) if compress else bytes(data)
    return Mutant(0, "stray_bytes", ctx.base, "stray bytes " + " ".join(notes[:5]), out, ".json.gz" if compress else ".json")


def m_foreign(ctx: Ctx) -> Mutant:
    """Not a trace at all: other formats, other JSON, nothing."""
    rng = ctx.rng
    choices = {
        "missing": None,
        "directory": None,
        "binary": bytes(rng.randrange(256) for _ in range(rng.choice((1, 100, 5000)))),
        "text": b"hello, this is not a trace\n",
        "number": b"42",
        "string": b'"traceEvents"',
        "null": b"null",
        "object": b'{"a": 1}',
        "events_not_dicts": b'{"traceEvents": [1, "x", null, [], true, 2.5]}',
        "events_dict": b'{"traceEvents": {"0": {"ph": "X"}}}',
        "events_null": b'{"traceEvents": null}',
        "whitespace": b" \n\t\r\n" * rng.choice((1, 1000)),
        "one_brace": b"{",
        "one_bracket": b"[",
        "utf16": dumps(ctx.doc(), "compact").decode("utf-8", "replace").encode("utf-16") if ctx.base.parsed else "[]".encode("utf-16"),
        "bom_only": _BOM,
        "gzip_of_text": gz(b"not json at all"),
        "gzip_empty": gz(b""),
        "gzip_magic_only": b"\x1f\x8b",
        "zip": b"PK\x03\x04" + bytes(30),
        "pickle": b"\x80\x04\x95\x00",
        "html": b"<!DOCTYPE html><html><body>404</body></html>",
        "protobuf_xplane": bytes([0x0A, 0x10]) + b"/host:CPU" + bytes(20),
        "counters_only": b'{"traceEvents": [{"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"v": 1}}]}',
        "jsonl": b'{"ph": "X", "name": "a", "ts": 1, "dur": 1}\n{"ph": "X", "name": "b", "ts": 2, "dur": 1}\n',
        "nul_bytes": bytes(rng.choice((1, 4096))),
        "trailing_data": b'{"traceEvents": []} {"x": 1}',
        "ndjson_array": b"[]\n[]",
        "duplicate_keys": b'{"traceEvents": [], "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "pid": 0, "tid": 7}]}',
    }
    mode = rng.choice(sorted(choices))
    data = choices[mode]
    kind = mode if mode in ("missing", "directory") else "file"
    return Mutant(0, "foreign", ctx.base, f"foreign: {mode}", data, ".json.gz" if data and data[:2] == b"\x1f\x8b" else ".json",
                  kind=kind)


BOMBS: dict[str, bytes] = {}


def _bomb(kind: str, inflated: int) -> bytes:
    """Gzip of ~``inflated`` bytes of whitespace around a tiny valid trace (cached: it takes seconds)."""
    key = f"{kind}:{inflated}"
    if key in BOMBS:
        return BOMBS[key]
    path = DEFAULT_CACHE / f"bomb_{kind}_{inflated}.json.gz"
    if path.exists():
        BOMBS[key] = path.read_bytes()
        return BOMBS[key]
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"stream": 7}}'
    head = b'{"traceEvents": [\n  ' + event if kind == "inside" else b" " if kind == "before" else b'{"pad": "'
    tail = b",\n  " + event + b"\n]}" if kind == "inside" else (b'{"traceEvents": [\n  ' + event + b"\n]}" if kind == "before" else b'", "traceEvents": [\n  ' + event + b"\n]}")
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [comp.compress(head)]
    block = (b" " if kind != "string" else b"a") * (16 << 20)
    for _ in range(inflated // len(block)):
        out.append(comp.compress(block))
    out.append(comp.compress(tail))
    out.append(comp.flush())
    data = b"".join(out)
    DEFAULT_CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    BOMBS[key] = data
    return data


def m_huge(ctx: Ctx) -> Mutant:
    """Big inputs under 5 MB: many tiny events, one giant string, megabytes of padding, and decompression bombs."""
    rng = ctx.rng
    mode = rng.choice(("many_events", "padding", "big_args", "bomb", "many_lanes", "long_ops"))
    if mode == "bomb":
        kind = rng.choice(("inside", "before", "string"))
        size = rng.choice((256 << 20, 256 << 20, 1 << 30))
        return Mutant(0, "huge", ctx.base, f"gzip bomb: {size >> 20} MB of padding {kind} the events",
                      _bomb(kind, size), ".json.gz", isolate=True)
    doc = ctx.doc() if ctx.base.parsed else {"traceEvents": []}
    events = _events(doc)
    if mode == "many_events":
        n = rng.choice((50_000, 100_000))
        cat = rng.choice(("kernel", "cpu_op", "cuda_runtime", "python_function"))
        events += [{"ph": "X", "cat": cat, "name": f"e{i % 50}", "pid": 0, "tid": 7, "ts": i, "dur": 1}
                   for i in range(n)]
        info = f"{n:,} tiny {cat} events"
    elif mode == "padding":
        doc["pad"] = " " * (4 << 20)
        info = "4 MB of padding in a top-level string"
    elif mode == "big_args":
        for e in _pick(rng, events, 3):
            _set_field(rng, e, "Big", list(range(200_000)))
        info = "args with 200,000-item lists"
    elif mode == "many_lanes":
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": i, "tid": i, "ts": i, "dur": 1}
                   for i in range(30_000)]
        info = "30,000 threads with one op each"
    else:
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::op", "pid": 1, "tid": 1, "ts": 0, "dur": 10**7 - i}
                   for i in range(20_000)]
        info = "20,000 ops nested on one thread"
    doc["traceEvents"] = events
    return _finish(ctx, "huge", doc, info, layout="compact", compress=rng.random() < 0.5)


MUTATORS = {
    "truncate": m_truncate,
    "truncate_gz": m_truncate_gz,
    "drop_field": m_drop_field,
    "retype_field": m_retype_field,
    "top_level": m_top_level,
    "nan_inf": m_nan_inf,
    "huge_numbers": m_huge_numbers,
    "float_ts": m_float_ts,
    "control_chars": m_control_chars,
    "invalid_utf8": m_invalid_utf8,
    "long_names": m_long_names,
    "odd_names": m_odd_names,
    "shuffle": m_shuffle,
    "ids": m_ids,
    "bare_array": m_bare_array,
    "begin_end": m_begin_end,
    "gzip_corrupt": m_gzip_corrupt,
    "gzip_concat": m_gzip_concat,
    "stray_bytes": m_stray_bytes,
    "deep_nesting": m_deep_nesting,
    "input_dims": m_input_dims,
    "reserialize": m_reserialize,
    "empty_events": m_empty_events,
    "zero_events": m_zero_events,
    "nested_events": m_nested_events,
    "repeated_events": m_repeated_events,
    "lone_surrogates": m_lone_surrogates,
    "non_regular": m_non_regular,
    "many_kernels": m_many_kernels,
    "subset": m_subset,
    "remove_kind": m_remove_kind,
    "combo": m_combo,
    "foreign": m_foreign,
    "huge": m_huge,
}
CLASSES = tuple(MUTATORS)
BYTE_LEVEL = frozenset({"truncate", "truncate_gz", "gzip_corrupt", "gzip_concat", "stray_bytes", "invalid_utf8", "foreign"})


def make_mutant(index: int, seed: int, bases: list[Base], classes: tuple[str, ...] = CLASSES) -> Mutant:
    """The index-th mutant of a run: deterministic in (seed, index, bases, classes)."""
    rng = random.Random(f"{seed}:{index}")
    cls = classes[index % len(classes)]
    usable = bases if cls in BYTE_LEVEL else [b for b in bases if b.parsed]
    base = rng.choice(usable)
    mutant = MUTATORS[cls](Ctx(rng, base, bases))
    mutant.index = index
    mutant.cls = cls
    return mutant


# ---------------------------------------------------------------------------------------------
# Running a mutant
# ---------------------------------------------------------------------------------------------


class StageTimeout(BaseException):
    """Raised in the main thread when a stage runs past HARD_S (BaseException: nothing swallows it)."""


@dataclass
class Failure:
    kind: str  # exception | exit-status | traceback-text | stderr | warning | slow | memory | output-json | ...
    stage: str
    type: str = ""
    place: str = ""  # innermost kerneltui frame: "kerneltui/trace/link.py:OpStack.innermost_op"
    line: int = 0
    message: str = ""
    frames: list[str] = field(default_factory=list)  # the last frames of the traceback, innermost last
    command: str = ""

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.kind, self.type, self.place)


@dataclass
class Result:
    index: int
    cls: str
    base: str
    info: str
    size: int
    failures: list[Failure]
    wall: dict[str, float]
    rss_growth_kb: int = 0
    peak_kb: int = 0
    saved: str = ""
    codes: dict = field(default_factory=dict)  # exit status per stage
    skipped: bool = False  # not run (a decompression bomb where only quick mutants are wanted)


def _relative(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        parts = Path(filename).parts
        for anchor in ("site-packages", "lib"):
            if anchor in parts:
                return "/".join(parts[parts.index(anchor) + 1 :])
        return filename


def _is_ours(filename: str) -> bool:
    try:
        Path(filename).resolve().relative_to(PACKAGE_DIR)
        return True
    except ValueError:
        return False


def place_of(frames: list[traceback.FrameSummary], outermost_in_file: bool = False) -> tuple[str, int, list[str]]:
    """(innermost kerneltui frame as file:function, its line, the last few frames as text).

    ``outermost_in_file``: name the outermost function of that file on the stack instead (for a
    slow stage, where the innermost frame is wherever the clock happened to stop it).
    """
    ours = [f for f in frames if _is_ours(f.filename)]
    text = [f"{_relative(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()[:100]}" for f in frames[-5:]]
    if not ours:
        return ("(outside kerneltui) " + (_relative(frames[-1].filename) if frames else "?")), (frames[-1].lineno or 0) if frames else 0, text
    f = ours[-1]
    if outermost_in_file:
        f = next(x for x in ours if x.filename == f.filename)
    return f"{_relative(f.filename)}:{f.name}", f.lineno or 0, text


def exception_failure(exc: BaseException, stage: str, command: str, snapshot=None) -> Failure:
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, StageTimeout) and snapshot:
        frames = snapshot
    place, line, text = place_of(frames, isinstance(exc, StageTimeout))
    kind = "slow" if isinstance(exc, StageTimeout) else "memory" if isinstance(exc, MemoryError) else "exception"
    return Failure(kind, stage, type(exc).__name__, place, line, str(exc)[:300].splitlines()[0] if str(exc) else "",
                   text, command)


_SNAPSHOT: list = []  # the main thread's stack when a stage passed SLOW_S


def _on_alarm(signum, frame):
    if not _SNAPSHOT:
        _SNAPSHOT.append(traceback.extract_stack(frame))
        signal.setitimer(signal.ITIMER_REAL, max(0.1, HARD_S - SLOW_S))
        return
    raise StageTimeout(f"still running after {HARD_S:.0f} s")


@contextlib.contextmanager
def _deadline():
    _SNAPSHOT.clear()
    in_main = hasattr(signal, "setitimer") and _main_thread()
    if in_main:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, SLOW_S)
    try:
        yield
    finally:
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


SHOWN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


@dataclass
class Stage:
    name: str
    argv: list[str]
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall: float = 0.0
    error: BaseException | None = None
    snapshot: list | None = None
    warned: list = field(default_factory=list)
    peak_kb: int = 0  # measured in a child process only


def run_stage(name: str, fn, argv: list[str]) -> Stage:
    """Run fn() with stdout/stderr captured, warnings recorded and a deadline; never raises."""
    stage = Stage(name, argv)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            with _deadline(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                stage.rc = fn()
        except SystemExit as exc:  # argparse
            stage.rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - everything is a finding
            if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, StageTimeout):
                raise
            stage.error = exc
        stage.wall = time.perf_counter() - start
        stage.snapshot = _SNAPSHOT[0] if _SNAPSHOT else None
        stage.warned = [w for w in caught if not issubclass(w.category, SHOWN_WARNINGS)]
    for buffer, attr in ((out, "stdout"), (err, "stderr")):
        try:
            setattr(stage, attr, buffer.getvalue())
        except ValueError:  # closed (the CLI closes stderr on a broken pipe)
            pass
    return stage


def judge(stage: Stage, mutant: Mutant, allowed: frozenset[int], fmt: str, command: str) -> list[Failure]:
    """What is wrong with one stage's outcome."""
    out: list[Failure] = []
    if stage.error is not None:
        out.append(exception_failure(stage.error, stage.name, command, stage.snapshot))
    elif stage.rc not in allowed:
        out.append(Failure("exit-status", stage.name, f"exit {stage.rc}", f"(exit {stage.rc})", 0,
                           stage.stderr.strip()[:200], [], command))
    if stage.wall > SLOW_S and stage.error is None:
        place, line, text = place_of(stage.snapshot or [], True)
        out.append(Failure("slow", stage.name, f">{SLOW_S:.0f}s", place, line, f"{stage.wall:.1f} s", text, command))
    for text, where in ((stage.stderr, "stderr"), (stage.stdout, "stdout")):
        if stage.error is not None and stage.name == "browser":
            break  # Textual printed the error it raised: counted once, as the exception
        if "Traceback (most recent call last)" in text or (stage.name == "browser" and "Error: " in text):
            tail = [line for line in text.splitlines() if line.strip()][-4:]
            out.append(Failure("traceback-text", stage.name, where, _traceback_place(text), 0, tail[-1][:200] if tail else "",
                               tail, command))
    lines = [line for line in stage.stderr.splitlines()]
    stray = [line for line in lines if not line.startswith("kerneltui: ")]
    if stage.error is not None and stage.name == "browser":
        stray = []  # Textual's own print of the error counted as the exception
    if stray and not any(f.kind == "traceback-text" for f in out):
        out.append(Failure("stderr-format", stage.name, "not one 'kerneltui: ...' line", f"({stage.name} stderr)", 0,
                           repr(stray[0][:120]), [repr(x[:120]) for x in stray[:3]], command))
    if stage.error is None and stage.rc == 2 and not stage.stderr.strip() and stage.name not in ("load", "browser"):
        out.append(Failure("silent-exit", stage.name, "exit 2, nothing on stderr", f"({stage.name})", 0, "", [], command))
    if stage.error is None and stage.rc == 0 and not stage.stdout.strip() and fmt != "none":
        out.append(Failure("no-output", stage.name, "exit 0, no output", f"({stage.name})", 0, "", [], command))
    if fmt == "json" and stage.stdout.strip() and stage.error is None:
        try:
            orjson.loads(stage.stdout)
        except orjson.JSONDecodeError as exc:
            out.append(Failure("output-json", stage.name, "invalid JSON on stdout", f"({stage.name} --format json)", 0,
                               str(exc)[:200], [], command))
    if fmt in ("table", "markdown") and _CONTROL.search(stage.stdout):  # CSV to a pipe stays exact, by design
        ch = _CONTROL.search(stage.stdout).group()
        out.append(Failure("output-control", stage.name, "raw control character on stdout", f"({stage.name} --format {fmt})",
                           0, f"{ch!r} in {_line_with(stage.stdout, ch)!r:.120}", [], command))
    for w in stage.warned:
        out.append(Failure("warning", stage.name, w.category.__name__, f"{_relative(w.filename)}:{w.lineno}", w.lineno,
                           str(w.message)[:200], [], command))
    return out


def _line_with(text: str, ch: str) -> str:
    at = text.find(ch)
    return text[max(0, at - 60) : at + 20]


def _traceback_place(text: str) -> str:
    files = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text)
    ours = [f for f in files if "kerneltui" in f[0] and "/tests/" not in f[0]]
    if ours:
        return f"{_relative(ours[-1][0])}:{ours[-1][2]}"
    return f"(outside kerneltui) {_relative(files[-1][0])}" if files else "(no frames)"


def _exercise(path: str) -> int:
    """load_trace and every derived table the screens read; TraceError is the one allowed error."""
    from kerneltui.errors import UserError
    from kerneltui.trace import load_trace
    from kerneltui.trace.summary import kernel_stats, launches_in, summarize
    from kerneltui.analysis.traffic import compute_traffic

    try:
        trace = load_trace(path)
    except UserError:
        return 2
    g = trace.gpu
    trace.gpu_sources
    summarize(trace)
    kernel_stats(trace)
    compute_traffic(trace)
    start, end = trace.window
    launches_in(trace, start, end)
    for r in list(g["launch_row"].to_numpy()[:3]) + list(g["launch_row"].to_numpy()[-3:]):
        trace.ancestors(int(r))
    for r in list(g["op_row"].to_numpy()[:3]):
        if r >= 0:
            trace.shapes(int(r))
    return 0


BROWSER_KEYS = ("down", "down", "enter", "v", "down", "t", "plus", "minus", "comma", "full_stop", "z", "w",
                "right_square_bracket", "left_square_bracket", "n", "p", "d", "f", "1", "2", "3", "slash", "a",
                "escape", "question_mark", "escape", "tab", "end", "home", "pagedown", "s")


async def _browse(path: str, keys: list[str], size=(100, 30)) -> int:
    from kerneltui.tui.app import build_app

    app = build_app(path)
    errors: list[BaseException] = []
    handle = app._handle_exception  # every unhandled error of the app passes here: keep it, with its frames

    def caught(error):
        errors.append(error)
        return handle(error)

    app._handle_exception = caught
    try:
        await _drive(app, keys, size)
    except BaseException:
        if errors:
            raise errors[0] from None
        raise
    if errors:
        raise errors[0]
    if app.error and "\n" in app.error.strip():
        print(f"multi-line error in the app: {app.error!r}", file=sys.stderr)
    return 2 if app.error else 0


async def _drive(app, keys: list[str], size) -> None:
    from tests.tui.helpers import settle

    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        if not app.error:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()


def commands_for(mutant: Mutant, path: str, partner: str, rng: random.Random, browser: bool) -> list[tuple]:
    """(stage, argv or special, allowed exit statuses, output format) for one mutant."""
    from kerneltui.cli import main

    ok = frozenset({0, 2})
    summary_variant = rng.choice((["--format", "csv"], ["--launches"], ["--launches", "--format", "json"],
                                  ["--top", "3"], ["--filter", "kernel"], ["--filter", "/[a-z]+_\\d"],
                                  ["--full-names"], ["--launches", "--top", "2", "--format", "csv"]))
    diff_variant = rng.choice((["--format", "table"], ["--format", "markdown"], ["--fail-if-slower", "5"],
                               ["--format", "markdown", "--fail-if-slower", "0%"], ["--format", "table", "--top", "3"]))
    variant_fmt = summary_variant[summary_variant.index("--format") + 1] if "--format" in summary_variant else "table"
    diff_fmt = diff_variant[diff_variant.index("--format") + 1] if "--format" in diff_variant else "table"
    stages = [
        ("load", None, ok, "none"),
        ("summary", ["summary", path], ok, "table"),
        ("summary-json", ["summary", path, "--format", "json"], ok, "json"),
        ("summary-variant", ["summary", path, *summary_variant], ok, variant_fmt),
        ("diff-ab", ["diff", path, partner, "--format", "json"], ok, "json"),
        ("diff-ba", ["diff", partner, path, "--format", "json"], ok, "json"),
        ("diff-variant", ["diff", path, partner, *diff_variant], frozenset({0, 1, 2, 3}) if "--fail-if-slower" in diff_variant else ok,
         diff_fmt),
    ]
    if browser:
        keys = rng.sample(BROWSER_KEYS, rng.randrange(4, 12))
        stages.append(("browser", ["open", path, "#keys:" + ",".join(keys)], ok, "none"))
    return [(name, argv, allowed, fmt, main) for name, argv, allowed, fmt in stages]


_BASE_SUMMARY: dict[str, dict] = {}


def _summary_facts(path: str) -> dict | None:
    """The summary JSON without what differs between files of one trace (path, size)."""
    from kerneltui.cli import main

    stage = run_stage("equivalence", lambda: main(["summary", path, "--format", "json"]), [])
    if stage.rc != 0 or stage.error is not None:
        return None
    try:
        doc = orjson.loads(stage.stdout)
    except orjson.JSONDecodeError:
        return None
    doc.get("trace", {}).pop("path", None)
    doc.get("summary", {}).pop("path", None)
    return doc


def write_mutant(mutant: Mutant, folder: Path) -> str:
    path = folder / mutant.filename()
    if mutant.kind == "missing":
        return str(folder / ("missing_" + mutant.filename()))
    if mutant.kind == "directory":
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    if mutant.kind == "device":
        path.unlink(missing_ok=True)
        path.symlink_to(os.devnull)
        return str(path)
    if mutant.kind == "fifo":
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        return str(path)
    path.write_bytes(mutant.data or b"")
    return str(path)


class _PipeWriter:
    """A named pipe at ``path`` that serves ``data`` once, as a shell's ``<(zcat ...)`` does. ``rearm``
    makes a new one for the next stage (a FIFO reused would hand a reader still open the next copy)."""

    def __init__(self, path: str, data: bytes):
        self.path, self.data, self.thread = path, data, None

    def rearm(self) -> None:
        import threading

        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.mkfifo(self.path)
        self.thread = threading.Thread(target=self._serve, args=(self.path,), daemon=True)
        self.thread.start()

    def _serve(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_WRONLY)  # waits for the reader
        except OSError:
            return
        try:
            view = memoryview(self.data)
            while view:
                view = view[os.write(fd, view[: 1 << 16]) :]
        except OSError:  # the reader stopped early (BrokenPipe)
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.thread is None:
            return
        with contextlib.suppress(OSError):  # a writer still waiting in open() gets this reader, and stops
            os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))
        self.thread.join(timeout=5)
        self.thread = None


@contextlib.contextmanager
def _non_regular(mutant: Mutant, path: str, workdir: Path):
    """While a mutant's stages run: its FIFO's writer, or the cache on (in a private folder of its own)
    with a FIFO where the trace's entry goes."""
    if mutant.kind == "fifo":
        writer = _PipeWriter(path, mutant.data or b"")
        try:
            yield writer.rearm
        finally:
            writer.close()
        return
    if mutant.kind != "fifo_entry":
        yield lambda: None
        return
    from kerneltui.trace import cache

    home = workdir / f"cache-home-{mutant.index}"
    home.mkdir(mode=0o700, exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "KERNELTUI_CACHE")}
    os.environ["XDG_CACHE_HOME"], os.environ["KERNELTUI_CACHE"] = str(home), "1"
    try:
        directory = cache.cache_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.mkfifo(cache.entry_path(cache.entry_key(path), directory))
        yield lambda: None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


STAGES = ("load", "summary", "summary-json", "summary-variant", "diff-ab", "diff-ba", "diff-variant", "browser",
          "decoders")


def decoders_differ(path: str) -> str | None:
    """How loading ``path`` with the C scanner differs from loading it with the Python decoder
    (None: not at all, or no scanner built). Both must read every text alike, damaged ones too:
    the scanner hands the Python path whatever it does not read exactly as msgspec would."""
    from kerneltui.trace import scanner
    from kerneltui.trace.load import read_trace

    if scanner._scan is None:
        return None
    loaded = []
    before = os.environ.get("KERNELTUI_DECODER")
    try:
        for choice in ("python", "c"):
            os.environ["KERNELTUI_DECODER"] = choice
            try:
                loaded.append(read_trace(path))
            except Exception as exc:  # noqa: BLE001 - the two must fail alike, whatever they raise
                loaded.append(f"{type(exc).__name__}: {exc}")
    finally:
        if before is None:
            os.environ.pop("KERNELTUI_DECODER", None)
        else:
            os.environ["KERNELTUI_DECODER"] = before
    python, scanned = loaded
    if isinstance(python, str) or isinstance(scanned, str):
        return None if python == scanned else f"python: {str(python)[:200]}; c: {str(scanned)[:200]}"
    return raw_difference(python, scanned)


def _same(x, y) -> bool:
    """x == y, iteratively: top-level keys can be nested past Python's recursion limit."""
    stack = [(x, y)]
    while stack:
        a, b = stack.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif isinstance(a, (list, tuple)):
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b))
        elif a != b and not (a != a and b != b):  # NaN is NaN here
            return False
    return True


def raw_difference(left, right) -> str | None:
    """The first difference between two loads ((RawTrace, TraceMeta) pairs), None if there is none."""
    import numpy as np

    (a, meta_a), (b, meta_b) = left, right
    if a.columns.keys() != b.columns.keys():
        return f"columns {sorted(a.columns)} vs {sorted(b.columns)}"
    for name, column in a.columns.items():
        other = b.columns[name]
        if column.dtype != other.dtype or not np.array_equal(column, other, equal_nan=column.dtype.kind == "f"):
            rows = len(column), len(other)
            return f"column {name} ({column.dtype}, {rows[0]} rows vs {other.dtype}, {rows[1]} rows)"
    for field_name in ("names", "lanes", "metadata", "shapes_blob", "flow_events", "top", "truncated", "end_damaged"):
        if not _same(getattr(a, field_name), getattr(b, field_name)):
            return f"{field_name}: {str(getattr(a, field_name))[:120]} vs {str(getattr(b, field_name))[:120]}"
    if a.memory != b.memory:  # the [memory] events' side table
        for name in a.memory.columns:
            if a.memory[name].dtype != b.memory[name].dtype or not np.array_equal(a.memory[name], b.memory[name]):
                return f"memory {name} ({len(a.memory[name])} rows vs {len(b.memory[name])} rows)"
        return f"memory {a.memory} vs {b.memory}"
    if a.kernel_fields != b.kernel_fields:  # the kernels' side table
        return f"kernel fields {a.kernel_fields} vs {b.kernel_fields}"
    if a.losses.events != b.losses.events or a.losses.fields != b.losses.fields:
        return f"losses {dict(a.losses.events)}/{dict(a.losses.fields)} vs {dict(b.losses.events)}/{dict(b.losses.fields)}"
    if meta_a != meta_b:
        return f"meta {meta_a} vs {meta_b}"
    return None


_SUMMARY_NOW: dict[str, dict | None] = {}


def _run_stages(stages: list[tuple], path: str, before_each) -> list[tuple]:
    results = []
    for name, argv, allowed, fmt, main in stages:
        before_each()
        if name == "load":
            stage = run_stage(name, lambda: _exercise(path), ["load", path])
        elif name == "browser":
            keys = argv[-1][len("#keys:") :].split(",")
            stage = run_stage(name, lambda: asyncio.run(_browse(path, keys)), argv[:2])
        else:
            stage = run_stage(name, lambda argv=argv: main(argv), argv)
        results.append((stage, allowed, fmt))
    return results


def run_mutant(mutant: Mutant, workdir: Path, browser: bool = False, keep: Path | None = None,
               stages_wanted: tuple[str, ...] = STAGES) -> Result:
    """Every check on one mutant, in this process (see ``run_isolated`` for the bombs)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = write_mutant(mutant, workdir)
    rng = random.Random(f"checks:{mutant.index}:{mutant.cls}")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    failures: list[Failure] = []
    wall: dict[str, float] = {}
    codes: dict[str, int | None] = {}
    partner = mutant.base.path
    stages = [st for st in commands_for(mutant, path, partner, rng, browser) if st[0] in stages_wanted]
    if mutant.isolate:
        results = run_isolated(stages, path)
    else:
        with _non_regular(mutant, path, workdir) as before_each:
            results = _run_stages(stages, path, before_each)
            if mutant.same_as_base and mutant.kind != "file":  # the pipe and the cache are there for this too
                before_each()
                _SUMMARY_NOW[path] = _summary_facts(path)
    for stage, allowed, fmt in results:
        command = "kerneltui " + " ".join(stage.argv) if stage.name not in ("load", "browser") else (
            f"python -c 'from kerneltui.trace import load_trace; load_trace(\"{path}\")'" if stage.name == "load"
            else f"headless browser on {path} (keys {' '.join(stage_keys(stages))})")
        failures += judge(stage, mutant, allowed, fmt, command)
        wall[stage.name] = round(stage.wall, 3)
        codes[stage.name] = stage.rc
    by_name = {stage.name: stage for stage, _, _ in results}
    summary = by_name.get("summary")
    if mutant.expect and summary is not None and summary.error is None and summary.rc == 0:
        what = "cut-off" if mutant.expect == "cut" else "corrupt"
        failures.append(Failure(f"{mutant.expect}-accepted", "summary", f"{what} file exits 0",
                                f"(loader: {what} file not noticed)", 0, mutant.info, [], f"kerneltui summary {path}"))
    if mutant.warns and summary is not None and summary.error is None and mutant.warns not in summary.stderr:
        failures.append(Failure("warning-missing", "summary", "no warning", "(loader: a warning not given)", 0,
                                f"expected {mutant.warns!r}; {mutant.info}", [], f"kerneltui summary {path}"))
    if mutant.lossless and summary is not None and summary.rc == 0:
        lost = _events_lost(path, mutant.base.path)
        if lost:
            failures.append(Failure("events-lost", "load", "fewer events than the base", "(loader: events lost)", 0,
                                    lost, [], f"python -c 'from kerneltui.trace.load import read_trace; read_trace(\"{path}\")'"))
    if mutant.same_as_base and summary is not None and summary.rc == 0 and not mutant.isolate:
        if mutant.base.path not in _BASE_SUMMARY:
            _BASE_SUMMARY[mutant.base.path] = _summary_facts(mutant.base.path)
        mine = _SUMMARY_NOW.pop(path) if path in _SUMMARY_NOW else _summary_facts(path)
        want = _BASE_SUMMARY[mutant.base.path]
        if want is not None and mine is not None and _strip_file(mine, mutant.warns) != _strip_file(want):
            failures.append(Failure("not-equivalent", "summary-json", "same trace, other summary",
                                    "(loader: layout changes the result)", 0, _first_difference(want, mine), [],
                                    f"kerneltui summary {path} --format json  vs  {mutant.base.path}"))
    if "decoders" in stages_wanted and mutant.kind == "file" and not mutant.isolate:
        difference = decoders_differ(path)
        if difference is not None:
            failures.append(Failure("decoders-differ", "decoders", "C scanner vs Python decoder",
                                    "(loader: trace/_scan.c)", 0, difference, [],
                                    f"KERNELTUI_DECODER=python and KERNELTUI_DECODER=c: load {path}"))
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = max((stage.peak_kb for stage, _, _ in results), default=0)
    if not mutant.isolate and (rss_after - rss_before > MEMORY_SUSPECT_KB or rss_after > MEMORY_LIMIT_KB):
        # this process's high-water mark rose: measure each command alone, in a fresh process
        for stage, _, _ in results:
            if stage.name == "browser":
                continue
            child = run_child(stage.argv if stage.name != "load" else ["load", path], capture=False)
            stage.peak_kb = child.peak_kb
            peak = max(peak, child.peak_kb)
    if mutant.size < SMALL_INPUT:
        for stage, _, _ in results:
            if stage.peak_kb > MEMORY_LIMIT_KB:
                failures.append(Failure("memory", stage.name, f">{MEMORY_LIMIT_KB >> 20} GB", f"({stage.name})", 0,
                                        f"peak {stage.peak_kb / 1024:,.0f} MB for a {mutant.size / 1024:,.0f} KB input",
                                        [], "kerneltui " + " ".join(stage.argv)))
    result = Result(mutant.index, mutant.cls, mutant.base.name, mutant.info, mutant.size, failures, wall,
                    rss_after - rss_before, peak, codes=codes)
    if failures and keep is not None:
        kept = str(Path(keep) / Path(path).name)
        for f in failures:  # the commands name the kept copy: the work folder is emptied
            f.command = f.command.replace(path, kept)
        result.saved = save_repro(mutant, keep, failures)
    return result


def stage_keys(stages) -> list[str]:
    for name, argv, *_ in stages:
        if name == "browser":
            return argv[-1][len("#keys:") :].split(",")
    return []


def _strip_file(doc: dict, warning: str = "") -> dict:
    """The summary without what differs between files of one trace, nor the warnings holding ``warning``."""
    doc = json.loads(json.dumps(doc))
    for k in ("path", "file_bytes", "compressed"):
        doc.get("trace", {}).pop(k, None)
    if warning:
        _drop_warnings(doc, warning)
    return doc


def _drop_warnings(value, warning: str) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("warnings"), list):
                item["warnings"] = [w for w in item["warnings"] if not (isinstance(w, str) and warning in w)]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


_BASE_COUNTS: dict[str, tuple | None] = {}


def _event_counts(path: str) -> tuple | None:
    """(rows, events skipped by cause, fields dropped by cause) of a load, None if it fails."""
    from kerneltui.errors import UserError
    from kerneltui.trace.load import read_trace

    try:
        raw, _ = read_trace(path)
    except UserError:
        return None
    return len(raw.columns["ts"]), dict(raw.losses.events), dict(raw.losses.fields)


def _events_lost(path: str, base: str) -> str:
    """How a load of ``path`` read less than one of ``base`` ("" if it did not)."""
    if base not in _BASE_COUNTS:
        _BASE_COUNTS[base] = _event_counts(base)
    want, got = _BASE_COUNTS[base], _event_counts(path)
    return "" if want is None or got == want else f"base {want} vs {got}"


def _first_difference(a, b, where="") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{where}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
    return f"{where}: {a!r:.60} vs {b!r:.60}"


def save_repro(mutant: Mutant, folder: Path, failures: list[Failure]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    if mutant.kind in ("fifo", "fifo_entry"):  # kept as the bytes the pipe or the traced file held
        path = str(folder / mutant.filename())
        Path(path).write_bytes(mutant.data or b"")
    else:
        path = write_mutant(mutant, folder)
    notes = [f"mutant {mutant.index} class {mutant.cls} base {mutant.base.name} ({mutant.base.path})", mutant.info, ""]
    for f in failures:
        notes += [f"{f.kind} {f.type} at {f.place}:{f.line} [{f.stage}] {f.message}", f"  {f.command}",
                  *("    " + x for x in f.frames)]
    Path(path + ".txt").write_text("\n".join(notes) + "\n")
    return path


CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
argv = json.loads(sys.argv[1])
if argv[0] == "load":
    from tests.fuzzing import _exercise
    code = _exercise(argv[1])
else:
    from kerneltui.cli import main
    code = main(argv)
sys.stdout.flush()
sys.exit(code)
"""


def run_child(argv: list[str], timeout: float = HARD_S + 30, capture: bool = True) -> Stage:
    """One command in a fresh interpreter; ``peak_kb`` is its own peak RSS (wait4), not this process's."""
    import tempfile

    stage = Stage(argv[0] if argv[0] != "load" else "load", argv)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(argv), str(ROOT)], stdout=out, stderr=err,
                                cwd=ROOT, preexec_fn=_child_limits)
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout and not killed:
                proc.kill()
                killed = True
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stage.wall = time.perf_counter() - start
        stage.peak_kb = usage.ru_maxrss
        stage.rc = proc.returncode
        if capture:
            out.seek(0)
            err.seek(0)
            stage.stdout = out.read().decode("utf-8", "replace")
            stage.stderr = err.read().decode("utf-8", "replace")
    if killed:
        stage.error = StageTimeout(f"killed after {timeout:.0f} s")
    elif stage.rc < 0:
        stage.error = MemoryError(f"killed by signal {-stage.rc} (out of memory?)")
    return stage


ISOLATED_STAGES = ("load", "summary", "diff-ab")


CHILD_AS_LIMIT = 6 << 30  # a child past 2 GB is a failure anyway: keep it from taking the machine


def _child_limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_AS_LIMIT, CHILD_AS_LIMIT))


def run_isolated(stages, path: str) -> list:
    """The main CLI stages, each in a fresh interpreter: exact peak memory and wall time (decompression bombs)."""
    results = []
    for name, argv, allowed, fmt, _ in stages:
        if name not in ISOLATED_STAGES:
            continue
        stage = run_child(["load", path] if argv is None else argv)
        stage.name = name
        results.append((stage, allowed, fmt))
    return results


# ---------------------------------------------------------------------------------------------
# Shrinking a failing mutant to a small reproducer
# ---------------------------------------------------------------------------------------------


def failure_of(path: str, argv_template: list[str]) -> set[tuple]:
    """The failure groups of one CLI command on a file ("{}" in the template is the file)."""
    from kerneltui.cli import main

    argv = [a.replace("{}", path) for a in argv_template]
    fmt = argv[argv.index("--format") + 1] if "--format" in argv else "table"
    allowed = frozenset({0, 1, 2, 3}) if "--fail-if-slower" in argv else frozenset({0, 2})  # 3: not comparable
    stage = run_stage(argv[0], lambda: main(argv), argv)
    return {f.group for f in judge(stage, Mutant(0, "", None, "", b""), allowed, fmt, "")}


def shrink(path: str, argv_template: list[str], out: str, layout: str = "kineto", rounds: int = 400) -> tuple[int, int]:
    """Delta-debug a failing JSON trace: drop events, args and top-level keys while the same failure stays.

    Writes the smallest file found to ``out``; returns (events before, events after).
    """
    target = failure_of(path, argv_template)
    if not target:
        raise ValueError(f"{path}: no failure to keep")
    doc = parse_doc(read_bytes(path))
    events = _events(doc)
    before = len(events)
    tries = [0]

    def still_fails(candidate: dict) -> bool:
        tries[0] += 1
        Path(out).write_bytes(dumps(candidate, layout))
        return bool(failure_of(out, argv_template) & target)

    def with_events(evs):
        return {**doc, "traceEvents": evs}

    chunk = max(1, len(events) // 2)
    while chunk >= 1 and tries[0] < rounds:
        i, changed = 0, False
        while i < len(events) and tries[0] < rounds:
            candidate = events[:i] + events[i + chunk :]
            if still_fails(with_events(candidate)):
                events, changed = candidate, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    for key in [k for k in doc if k != "traceEvents"]:
        if tries[0] >= rounds:
            break
        trial = {k: v for k, v in doc.items() if k != key}
        if still_fails({**trial, "traceEvents": events}):
            doc = trial
    for e in events:  # then the fields of what is left
        for key in [k for k in (e if isinstance(e, dict) else {}) if k not in ("ph", "cat", "name", "ts")]:
            if tries[0] >= rounds:
                break
            value = e.pop(key)
            if not still_fails(with_events(events)):
                e[key] = value
        args = e.get("args") if isinstance(e, dict) else None
        for key in list(args) if isinstance(args, dict) else []:
            if tries[0] >= rounds:
                break
            value = args.pop(key)
            if not still_fails(with_events(events)):
                args[key] = value
    Path(out).write_bytes(dumps(with_events(events), layout))
    assert failure_of(out, argv_template) & target
    return before, len(events)
