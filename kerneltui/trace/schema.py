"""What the engine keeps of a trace: event kinds, column names, and the trace's metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

import numpy as np


class Kind(IntEnum):
    """What an event is, decided once at load time from its phase and category."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    CPU_OP = 3
    ANNOTATION = 4  # user_annotation: ProfilerStep#N, record_function, ## Call CompiledFxGraph ##
    PYTHON = 5  # python_function (with_stack)
    RUNTIME = 6  # cuda_runtime (and hip runtime)
    DRIVER = 7  # cuda_driver
    GPU_ANNOTATION = 8  # synthetic span Kineto draws on the GPU for an annotation
    OVERHEAD = 9  # profiler's own cost, pid -1
    MEMORY = 10  # [memory] allocator instant events
    INSTANT = 11  # other instant events
    SPAN = 12  # the profiler's own window ("PyTorch Profiler (0)", cat Trace)
    OTHER = 13  # anything else with a duration
    PROFILER_RANGE = 14  # CUPTI range profiler: a kernel's hardware counters, at a synthetic time


GPU_WORK = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
LAUNCH_API = (Kind.RUNTIME, Kind.DRIVER)
KIND_LABEL = {
    Kind.KERNEL: "kernel",
    Kind.MEMCPY: "memcpy",
    Kind.MEMSET: "memset",
    Kind.CPU_OP: "cpu_op",
    Kind.ANNOTATION: "annotation",
    Kind.PYTHON: "python",
    Kind.RUNTIME: "runtime",
    Kind.DRIVER: "driver",
    Kind.GPU_ANNOTATION: "gpu_annotation",
    Kind.OVERHEAD: "overhead",
    Kind.MEMORY: "memory",
    Kind.INSTANT: "instant",
    Kind.SPAN: "span",
    Kind.OTHER: "other",
    Kind.PROFILER_RANGE: "profiler_range",
}

# Categories as Kineto writes them, and as older Kineto (torch < 1.13) and ROCm wrote them.
KIND_BY_CATEGORY = {
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "driver": Kind.DRIVER,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "overhead": Kind.OVERHEAD,
    "trace": Kind.SPAN,
    "cuda_profiler_range": Kind.PROFILER_RANGE,
}

# Phases: events kept as rows; flow arrows (counted); metadata and B/E halves (kept aside).
KEPT_PHASES = frozenset(("X", "i", "I"))
FLOW_PHASES = frozenset(("s", "f", "t"))
ASIDE_PHASES = frozenset(("M", "B", "E"))


def kind_of(ph_is_complete: bool, category: str) -> int:
    """The Kind of a kept event: an instant event's by its category, a complete one's from KIND_BY_CATEGORY."""
    if not ph_is_complete:
        return Kind.MEMORY if category == "cpu_instant_event" else Kind.INSTANT
    return int(KIND_BY_CATEGORY.get(category.lower(), Kind.OTHER))


# Columns of a decoded chunk (all numpy, one row per kept event; -1 = absent). The event table has them
# but the kernels' fields (ROW_COLUMNS), which the loader keeps aside (KERNEL_FIELDS, below).
EVENT_COLUMNS = {
    "kind": "int8",
    "name": "int32",  # code into Trace.names
    "lane": "int32",  # code into Trace.lanes: one (pid, tid) pair
    "ts": "int64",  # ns since baseTimeNanoseconds (exact)
    "dur": "int64",  # ns
    "external_id": "int64",
    "correlation": "int64",
    "device": "int16",
    "stream": "int64",
    "grid_x": "int32",
    "grid_y": "int32",
    "grid_z": "int32",
    "block_x": "int32",
    "block_y": "int32",
    "block_z": "int32",
    "registers": "int32",
    "shared_memory": "int64",
    "occupancy": "float32",  # est. achieved occupancy %, NaN when unknown
    "bytes": "int64",  # memcpy/memset size; memory events: allocation delta
    "cbid": "int32",
    "python_id": "int64",
    "python_parent": "int64",
    "sequence": "int64",
    "kernel_hash": "int32",  # code into Trace.names (Inductor's cpu_op), -1 if none
    "shapes_at": "int64",  # offset of this op's record_shapes JSON in Trace.shapes_blob
    "shapes_len": "int32",
}

# The allocator's instant events (Kind.MEMORY rows: ph i/I, cat cpu_instant_event) carry fields no
# other event has; they are kept in a side table of those rows alone, not as columns of every row
# (a 1 GB trace holds millions of events and a few thousand of these). -1 = absent.
MEMORY_COLUMNS = {
    "row": "int64",  # the event's row in the event table (ascending)
    "allocated": "int64",  # Total Allocated: the allocator's total after the event
    "reserved": "int64",  # Total Reserved
    "device_type": "int64",  # Device Type: 1 CUDA, 0 the host
    "device_id": "int64",  # Device Id
    "addr": "int64",  # Addr: the block's address
}
# A decoded chunk's dict carries the side table under these names (its rows counted within the chunk).
MEMORY_PREFIX = "memory_"


class SideColumns:
    """A side table (``SPEC``'s columns): one array per field, all of one length, one entry per row of the
    event table that has one, in row order. Equal when every array is (dtype and values, NaN equal to NaN)."""

    SPEC: ClassVar[dict[str, str]] = {}
    __slots__ = ("columns",)

    def __init__(self, columns: dict[str, np.ndarray] | None = None):
        if columns is None:
            columns = {name: np.empty(0, dtype) for name, dtype in self.SPEC.items()}
        self.columns: dict[str, np.ndarray] = columns

    def __len__(self) -> int:
        return len(self.columns["row"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.columns.keys() == other.columns.keys() and all(
            a.dtype == other.columns[k].dtype and np.array_equal(a, other.columns[k], equal_nan=a.dtype.kind == "f")
            for k, a in self.columns.items())

    __hash__ = None  # mutable arrays

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} rows)"

    @classmethod
    def joined(cls, parts: list[SideColumns]) -> SideColumns:
        """Side tables of consecutive rows, in row order, as one."""
        if not parts:
            return cls()
        return cls({name: np.concatenate([p.columns[name] for p in parts]).astype(dtype, copy=False)
                    for name, dtype in cls.SPEC.items()})


class MemoryColumns(SideColumns):
    """The [memory] events' side table (MEMORY_COLUMNS)."""

    SPEC = MEMORY_COLUMNS
    __slots__ = ()


# The fields of a GPU kernel's record (CUPTI's launch shape, registers, shared memory, occupancy). A
# decoder reads them into columns of every event of a chunk; the loader keeps them in a side table of the
# rows that have any (at 1 GB, 6% of 2.5M events: as columns of every row they were 40 bytes of each
# row's 143, 97 MB), and ``Trace.gpu`` puts them back as columns of its rows.
KERNEL_FIELDS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_memory",
                 "occupancy")
KERNEL_COLUMNS = {"row": "int64", **{name: EVENT_COLUMNS[name] for name in KERNEL_FIELDS}}
KERNEL_PREFIX = "kernel_"  # the side table's columns in a cache entry
# The event table's columns: every event's, with the kernels' fields aside
ROW_COLUMNS = {name: dtype for name, dtype in EVENT_COLUMNS.items() if name not in KERNEL_FIELDS}


def absent_value(dtype: str) -> float:
    """A field's value where an event has none: NaN for a float column, -1 for an integer one."""
    return np.nan if np.dtype(dtype).kind == "f" else -1


class KernelColumns(SideColumns):
    """The kernels' fields (KERNEL_COLUMNS) of the rows that have any (a value other than absent_value)."""

    SPEC = KERNEL_COLUMNS
    __slots__ = ()

    @classmethod
    def of_columns(cls, columns: dict[str, np.ndarray], first_row: int = 0) -> KernelColumns:
        """The side table of columns that hold every row's fields (a decoded chunk's), its rows counted
        from ``first_row``."""
        n = len(columns["ts"])
        has = np.zeros(n, bool)
        for name in KERNEL_FIELDS:
            column = columns[name]
            has |= ~np.isnan(column) if column.dtype.kind == "f" else column != -1
        rows = np.flatnonzero(has)
        side = {"row": (rows + first_row).astype(np.int64)}
        side.update({name: np.ascontiguousarray(columns[name][rows], KERNEL_COLUMNS[name]) for name in KERNEL_FIELDS})
        return cls(side)

    def at_rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Each field at the event rows ``rows`` (any order), absent_value where a row has none."""
        rows = np.asarray(rows, np.int64)
        side = self.columns["row"]
        if len(side):
            at = np.minimum(np.searchsorted(side, rows), len(side) - 1)
            found = side[at] == rows
        else:
            at, found = np.zeros(len(rows), np.intp), np.zeros(len(rows), bool)
        out = {}
        for name in KERNEL_FIELDS:
            dtype = KERNEL_COLUMNS[name]
            column = np.full(len(rows), absent_value(dtype), dtype)
            column[found] = self.columns[name][at[found]]
            out[name] = column
        return out


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    memory_bytes: int = 0
    sm_count: int = 0
    compute_capability: str = ""


@dataclass(frozen=True)
class TraceMeta:
    """Everything about a trace that is not an event."""

    path: str
    file_bytes: int
    compressed: bool
    base_time_ns: int
    devices: tuple[Device, ...]
    producer: str  # "kineto" or "chrome-trace"
    trace_name: str = ""
    schema_version: int | None = None
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    versions: dict[str, str] = field(default_factory=dict)  # cuda driver/runtime/cupti
    capture: dict | None = None  # settings written by `kerneltui capture`
    distributed: dict | None = None  # Kineto's distributedInfo: backend, rank, world_size, pg_config
    provenance: dict | None = None  # what `kerneltui capture` recorded of each compiled kernel (analysis/provenance)
    truncated: bool = False  # cut off mid-write: events after the cut are missing
    end_damaged: bool = False  # the events are whole; the keys after them are cut off or damaged
    skipped_events: int = 0  # events that could not be read (counted by cause in warnings)
    corrupt_events: int = 0  # of those, events whose bytes are not JSON (a damaged file)
    repaired_durations: int = 0  # events whose dur was negative, NaN or past 2**52 µs: read as 0 (analysis/health)
    flow_events: int = 0
    metadata_events: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def incomplete(self) -> bool:
        """The file is not whole: what was read is shown, and the commands exit 2."""
        return self.truncated or self.end_damaged or self.corrupt_events > 0

    @property
    def rank(self) -> int | None:
        return _whole(self.distributed.get("rank")) if self.distributed else None

    @property
    def world_size(self) -> int | None:
        return _whole(self.distributed.get("world_size")) if self.distributed else None

    @property
    def device_name(self) -> str:
        if self.devices:
            return self.devices[0].name
        if self.capture and self.capture.get("device"):
            return str(self.capture["device"])  # a CPU-only capture names its processor
        return "unknown device"


def _whole(value) -> int | None:
    """An int that JSON gave (not a bool, not negative), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
