"""The columnar cache: a trace's decoded columns kept on disk, so a second load is near-instant.

The first load of a trace writes what ``read_trace`` returned (the RawTrace and its
TraceMeta) as one Arrow IPC file under ``$XDG_CACHE_HOME/kerneltui`` (else
``~/.cache/kerneltui``); later loads memory-map it. An entry is found by a key
made of the file's identity and content and of the loader's own version, so a
trace replaced in place, or a newer decoder, never sees stale columns.

Layout: ``<cache dir>/<path digest>-<entry digest>.arrow``, one record batch of
one row: each event column as a ``large_list`` of its numpy dtype (read back
zero-copy from a private, copy-on-write mapping), the side tables of the ``[memory]``
events and of the kernels' fields the same way (``memory_row``, ``memory_allocated``, ...:
schema.MEMORY_COLUMNS under MEMORY_PREFIX; ``kernel_row``, ``kernel_grid_x``, ...:
schema.KERNEL_COLUMNS under KERNEL_PREFIX), ``shapes`` (the shapes blob)
and ``info`` (JSON: names, lanes, metadata events, top-level keys, losses, the
TraceMeta, the key it was written for and a CRC32 of every column).

The cache only ever costs speed: an entry that cannot be read is removed and
rebuilt, with one line added to the TraceMeta's warnings (which every command
prints); a cache directory that cannot be written to is passed over silently.
Writes go to a temporary file in the same directory, then ``os.replace``, so a
reader, or a second process writing the same entry, sees a whole file or none.
The directory is bounded (``KERNELTUI_CACHE_MAX``, default 10 GB): least
recently used entries go first; a read touches its entry.

Only this user's own files are trusted (a planted entry could show any numbers): the
cache directory must be theirs, not a symbolic link and private (kerneltui creates it
0700, and chmods one of theirs that is open to others), in a directory no other user
may write to (a sticky one, like /tmp, will do), else it is not used at all and one
line on stderr says why. An entry is opened without following a link or waiting on a
FIFO, and used only if it is a regular file of this user's; the sweeps (stale
temporary files, eviction, ``kerneltui cache --clear``) remove only such files, by
the names kerneltui gives them. A trace that is no regular file (a pipe, a FIFO, a
device) is read as it comes, uncached: its stat says nothing of its content.
"""

from __future__ import annotations

import dataclasses
import hashlib
import mmap
import os
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

from kerneltui import __version__
from kerneltui.trace import heap, pool, scanner
from kerneltui.trace.blocks import size_and_compression
from kerneltui.trace.cache_dir import (  # noqa: F401 - the directory's rules, named here as before
    DEFAULT_MAX_BYTES,
    EDGE_BYTES,
    ENTRY_NAME,
    SUFFIX,
    TEMP_NAME,
    TEMP_PREFIX,
    CacheStats,
    RefusedEntry,
    UnsafeDir,
    _entries,
    _free_or_ours,
    _ours,
    _remove,
    _tell,
    _touch,
    cache_dir,
    clear,
    enabled,
    evict,
    file_identity,
    max_bytes,
    open_entry,
    parse_size,
    path_digest,
    private_dir,
    regular_file,
    stats,
)
from kerneltui.trace.load import RawTrace, read_trace
from kerneltui.trace.repair import Losses
from kerneltui.trace.schema import (
    KERNEL_COLUMNS,
    KERNEL_PREFIX,
    MEMORY_COLUMNS,
    MEMORY_PREFIX,
    ROW_COLUMNS,
    Device,
    KernelColumns,
    MemoryColumns,
    TraceMeta,
)

# Bump whenever what read_trace returns changes shape or meaning (columns, RawTrace or TraceMeta
# fields, what a field holds). The key also holds a digest of the loader's source (LOADER_MODULES),
# so an edited decoder misses the cache even where this was not bumped.
SCHEMA_VERSION = 3  # 2: the [memory] events' side table (RawTrace.memory); 3: the kernels' (RawTrace.kernel_fields)
LOADER_MODULES = ("load", "ahead", "decode", "scanner", "worker", "events", "blocks", "repair", "begin_end", "pool", "meta",
                  "schema", "fits", "heap", "threads", "top_level", "whole_file", "sink")



# -- where and how much -------------------------------------------------------








# -- the key ------------------------------------------------------------------
_code_digest: str | None = None


def loader_digest() -> str:
    """A digest of the loader's source files and of the compiled scanner: any edit to the decoder,
    or a rebuild of the scanner, is a new cache generation."""
    global _code_digest
    if _code_digest is None:
        h = hashlib.blake2b(digest_size=16)
        here = Path(__file__).resolve().parent
        for name in LOADER_MODULES:
            try:
                h.update(name.encode() + b"\0" + (here / f"{name}.py").read_bytes() + b"\0")
            except OSError:
                h.update(name.encode() + b"\0?\0")  # installed without sources: the version constants still count
        built = getattr(scanner._scan, "__file__", None)  # built or not; KERNELTUI_DECODER changes no output
        try:
            h.update(b"_scan\0" + (Path(built).read_bytes() if built else b"python") + b"\0")
        except OSError:
            h.update(b"_scan\0?\0")
        _code_digest = h.hexdigest()
    return _code_digest


def entry_key(path: str | os.PathLike) -> dict:
    """What an entry is for: the file (cache_dir.file_identity) and the loader."""
    return {**file_identity(path), "schema": SCHEMA_VERSION, "kerneltui": __version__, "loader": loader_digest()}


def entry_path(key: dict, directory: Path | None = None) -> Path:
    directory = cache_dir() if directory is None else directory
    by_path = path_digest(key["path"])
    by_all = hashlib.blake2b(orjson.dumps(key, option=orjson.OPT_SORT_KEYS), digest_size=12).hexdigest()
    return directory / f"{by_path}-{by_all}{SUFFIX}"


# -- loading --------------------------------------------------------------------
def start_workers_for(paths: list[str], cache: bool | None = None) -> bool:
    """Call from the main thread before the load's thread or an app starts: fork the decode workers now
    if a trace among ``paths`` will be read cold and is big enough to want them (trace/pool.py says why).
    The program's malloc keeps freed memory from here on where one is large (trace/heap.py), set while
    this process has one thread."""
    heap.before_loads(paths)
    sizes = []
    for path in paths:
        if holds(path, cache):
            continue
        try:
            sizes.append(size_and_compression(path))
        except OSError:
            continue  # the load itself words the error
    return pool.start_workers(sizes)


def load(
    path: str | os.PathLike,
    progress: Callable[[float], None] | None = None,
    cache: bool | None = None,
    write_later: bool = False,
) -> tuple[RawTrace, TraceMeta]:
    """``read_trace(path, progress)``, from the cache where it holds this very file.

    ``write_later``: write a new entry from a background thread, so that the caller (an app
    showing its first screen) need not wait; the process still finishes the write before it exits.
    """
    if not enabled(cache) or not regular_file(path):
        return read_trace(path, progress)
    try:
        key = entry_key(path)
    except OSError:
        return read_trace(path, progress)  # missing or unreadable: read_trace words the error
    directory = cache_dir()
    try:
        private_dir(directory)
    except UnsafeDir as exc:
        _tell(exc)
        return read_trace(path, progress)
    except OSError:
        pass  # not a directory, or none this user may open: no entry, and the write fails silently
    where = entry_path(key, directory)
    note = None
    try:
        raw, meta = read_entry(where, key)
    except (FileNotFoundError, NotADirectoryError, PermissionError, RefusedEntry):
        pass  # no entry, or none this user may read or trust: a plain miss (what is there stays)
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with the entry, the trace is read again
        note = f"the cached columns of this trace could not be read ({_why(exc)}): rebuilt them from the trace"
        _remove(where)
    else:
        _touch(where)
        if progress is not None:
            progress(1.0)
        return raw, dataclasses.replace(meta, path=str(Path(path)))
    raw, meta = read_trace(path, progress)
    if write_later:
        threading.Thread(target=write_entry, args=(where, key, raw, meta), name="kerneltui-cache-write").start()
    else:
        write_entry(where, key, raw, meta)
    if note is not None:
        meta = dataclasses.replace(meta, warnings=(*meta.warnings, note))
    return raw, meta


def holds(path: str | os.PathLike, cache: bool | None = None) -> bool:
    """Whether a load of ``path`` would come from the cache (an entry for this very file exists)."""
    if not enabled(cache) or not regular_file(path):
        return False
    try:
        directory = cache_dir()
        return private_dir(directory) and _ours(os.lstat(entry_path(entry_key(path), directory)))
    except UnsafeDir as exc:  # told here too: the apps ask before their screen starts, and load after
        _tell(exc)
        return False
    except OSError:
        return False




def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__


class StaleEntry(ValueError):
    """An entry written for another file, or by another loader."""






def read_entry(where: Path, key: dict) -> tuple[RawTrace, TraceMeta]:
    """The RawTrace and TraceMeta kept in ``where``; raises when it is missing, damaged or not for ``key``
    (RefusedEntry when it is no regular file of this user's)."""
    import pyarrow as pa

    with os.fdopen(open_entry(where), "rb") as f:
        # Private and copy-on-write: the columns behave as ordinary writable arrays, and a later
        # os.replace or unlink of the entry leaves this mapping as it was.
        view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    whole = pa.py_buffer(view)
    reader = pa.ipc.open_file(whole)
    if reader.num_record_batches != 1:
        raise ValueError(f"{reader.num_record_batches} record batches, not 1")
    batch = reader.get_batch(0)
    if batch.num_rows != 1:
        raise ValueError(f"{batch.num_rows} rows, not 1")
    info_blob = _binary(batch, "info")
    expected = (batch.schema.metadata or {}).get(b"info_crc32")
    if expected is None or int(expected) != zlib.crc32(info_blob):
        raise ValueError("the entry's description fails its checksum")
    info = orjson.loads(info_blob)
    if info.get("key") != key:
        raise StaleEntry("written for another file or loader")
    columns = {name: _column(batch, name, dtype, view, whole, info) for name, dtype in ROW_COLUMNS.items()}
    memory = {name: _column(batch, MEMORY_PREFIX + name, dtype, view, whole, info) for name, dtype in MEMORY_COLUMNS.items()}
    kernels = {name: _column(batch, KERNEL_PREFIX + name, dtype, view, whole, info) for name, dtype in KERNEL_COLUMNS.items()}
    shapes = _binary(batch, "shapes")
    if zlib.crc32(shapes) != info["crc32"]["shapes"]:
        raise ValueError("the shapes fail their checksum")
    lengths = {len(c) for c in columns.values()}
    if len(lengths) != 1:
        raise ValueError("columns of different lengths")
    n = lengths.pop()
    rows = memory["row"]
    if len({len(c) for c in memory.values()}) != 1 or (len(rows) and not (0 <= rows.min() and rows.max() < n)):
        raise ValueError("the [memory] side table does not fit the columns")
    rows = kernels["row"]
    if len({len(c) for c in kernels.values()}) != 1 or (len(rows) and not (
            0 <= rows[0] and rows[-1] < n and (rows[1:] > rows[:-1]).all())):
        raise ValueError("the kernels' side table does not fit the columns")  # Trace.gpu searches its rows
    raw = _raw(columns, shapes, info["raw"])
    raw.memory = MemoryColumns(memory)
    raw.kernel_fields = KernelColumns(kernels)
    return raw, _meta(info["meta"])


def _column(batch, name: str, dtype: str, view: mmap.mmap, whole, info: dict) -> np.ndarray:
    """The column ``name`` of the entry, zero-copy from the mapping, its dtype and checksum checked."""
    import pyarrow as pa

    values = batch.column(name).values
    if values.type != pa.from_numpy_dtype(np.dtype(dtype)) or values.null_count:
        raise ValueError(f"column {name} is {values.type}, not {dtype}")
    if len(values) == 0:  # a trace without events: Arrow may keep an empty column's buffer anywhere
        column = np.empty(0, dtype=dtype)
    else:
        buffer = values.buffers()[1]
        at = buffer.address - whole.address + values.offset * np.dtype(dtype).itemsize
        if not 0 <= at <= len(view) - len(values) * np.dtype(dtype).itemsize:
            raise ValueError(f"column {name} lies outside the file")
        column = np.frombuffer(view, dtype=dtype, count=len(values), offset=at)  # writable: the mapping is private
    if zlib.crc32(column) != info["crc32"][name]:
        raise ValueError(f"column {name} fails its checksum")
    return column


def _binary(batch, name: str) -> bytes:
    column = batch.column(name)
    value = column[0].as_py()
    if not isinstance(value, bytes):
        raise ValueError(f"{name} is not bytes")
    return value


def _raw(columns: dict, shapes: bytes, d: dict) -> RawTrace:
    raw = RawTrace.__new__(RawTrace)  # the decoder it is built from is not kept: fill the fields it left
    raw.columns = columns
    raw.memory = MemoryColumns()  # read_entry sets the entry's
    raw.kernel_fields = KernelColumns()  # likewise
    raw.names = d["names"]
    raw.lanes = [tuple(lane) for lane in d["lanes"]]
    raw.metadata = [tuple(m) for m in d["metadata"]]
    raw.flow_events = d["flow_events"]
    raw.shapes_blob = shapes
    raw.top = d["top"]
    raw.truncated = d["truncated"]
    raw.end_damaged = d["end_damaged"]
    losses = Losses()
    losses.events = Counter(d["losses"]["events"])
    losses.fields = Counter(d["losses"]["fields"])
    raw.losses = losses
    return raw


def _raw_info(raw: RawTrace) -> dict:
    return {
        "names": raw.names,
        "lanes": raw.lanes,
        "metadata": raw.metadata,
        "flow_events": raw.flow_events,
        "top": raw.top,
        "truncated": raw.truncated,
        "end_damaged": raw.end_damaged,
        "losses": {"events": dict(raw.losses.events), "fields": dict(raw.losses.fields)},
    }


# Every field of a RawTrace that the cache keeps (tests compare it with a cold load's fields).
RAW_FIELDS = frozenset(("columns", "memory", "kernel_fields", "names", "lanes", "metadata", "flow_events", "shapes_blob", "top",
                        "truncated", "end_damaged", "losses"))


def _meta(d: dict) -> TraceMeta:
    d = dict(d)
    d["devices"] = tuple(Device(**x) for x in d["devices"])
    d["warnings"] = tuple(d["warnings"])
    return TraceMeta(**d)


def _meta_info(meta: TraceMeta) -> dict:
    d = dataclasses.asdict(meta)
    if _meta(orjson.loads(orjson.dumps(d))) != meta:  # a field JSON cannot carry: keep nothing rather than less
        raise ValueError("the TraceMeta does not survive JSON")
    return d


# -- writing --------------------------------------------------------------------
def write_entry(where: Path, key: dict, raw: RawTrace, meta: TraceMeta) -> bool:
    """Keep ``raw`` and ``meta`` in ``where`` (atomically); False, silently, when it cannot."""
    tmp = None
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401

        directory = where.parent
        private_dir(directory, create=True)
        cap = max_bytes()
        n = len(raw.columns["ts"])
        k, g = len(raw.memory), len(raw.kernel_fields)
        estimate = (sum(n * np.dtype(t).itemsize for t in ROW_COLUMNS.values())
                    + sum(k * np.dtype(t).itemsize for t in MEMORY_COLUMNS.values())
                    + sum(g * np.dtype(t).itemsize for t in KERNEL_COLUMNS.values()) + len(raw.shapes_blob))
        if estimate > cap:
            return False
        # the event columns and the side tables, by their names in the entry
        kept = {**{name: (raw.columns[name], dtype) for name, dtype in ROW_COLUMNS.items()},
                **{MEMORY_PREFIX + name: (raw.memory[name], dtype) for name, dtype in MEMORY_COLUMNS.items()},
                **{KERNEL_PREFIX + name: (raw.kernel_fields[name], dtype) for name, dtype in KERNEL_COLUMNS.items()}}
        crc = {name: zlib.crc32(np.ascontiguousarray(column, dtype=dtype)) for name, (column, dtype) in kept.items()}
        crc["shapes"] = zlib.crc32(raw.shapes_blob)
        raw_info = _raw_info(raw)
        small = {k: v for k, v in raw_info.items() if k != "names"}
        if _raw_info(_raw({}, b"", {**orjson.loads(orjson.dumps(small)), "names": []})) | {"names": raw.names} != raw_info:
            return False  # a value JSON does not carry as it is: keep nothing rather than something else
        info = orjson.dumps({"key": key, "crc32": crc, "raw": raw_info, "meta": _meta_info(meta)})
        arrays = [
            pa.LargeListArray.from_arrays(pa.array([0, len(column)], pa.int64()),
                                          pa.array(np.ascontiguousarray(column, dtype=dtype)))
            for column, dtype in kept.values()
        ]
        arrays.append(pa.array([raw.shapes_blob], pa.large_binary()))
        arrays.append(pa.array([info], pa.large_binary()))
        schema = pa.schema(
            [pa.field(name, a.type) for name, a in zip([*kept, "shapes", "info"], arrays)],
            metadata={"info_crc32": str(zlib.crc32(info)), "kerneltui": __version__, "schema": str(SCHEMA_VERSION)},
        )
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        fd, tmp = _temp_file(directory)
        with os.fdopen(fd, "wb") as f:
            with pa.ipc.new_file(f, schema) as writer:
                writer.write_batch(batch)
            f.flush()
        if not _free_or_ours(where):
            return False  # a link, a FIFO or another user's file at this name: left alone
        os.replace(tmp, where)
        tmp = None
        _drop_older_entries(where)
        evict(directory, cap, keep=where)
        return True
    except UnsafeDir as exc:  # made unsafe since the load looked
        _tell(exc)
        return False
    except Exception:  # noqa: BLE001 - a full disk, a read-only directory, names JSON cannot hold: no cache, no error
        return False
    finally:
        if tmp is not None:
            _remove(Path(tmp))


def _temp_file(directory: Path) -> tuple[int, str]:
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=SUFFIX, dir=directory)  # 0600
    return fd, tmp


def _drop_older_entries(where: Path) -> None:
    """Column entries for the same path but another key (the trace was replaced, or the loader changed).
    Only columns: the same file's kept reports and screens (other suffixes, keyed by their own command
    and terminal) are not stale because the columns were written, often after them."""
    prefix = where.name.split("-", 1)[0] + "-"
    for other, _ in _entries(where.parent):
        if other.name.startswith(prefix) and other.name.endswith(where.suffix) and other.name != where.name:
            _remove(other)


# -- the directory ----------------------------------------------------------------










_told: set[str] = set()




















