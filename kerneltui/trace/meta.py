"""TraceMeta from a trace's top-level keys, whatever their types: a bad value is an absent one."""

from __future__ import annotations

import math

from kerneltui.trace.schema import Device, TraceMeta

# The top-level keys read (here, and traceEvents by the loader): a file that repeats one gets a warning.
TOP_KEYS_READ = frozenset((
    "traceEvents", "deviceProperties", "baseTimeNanoseconds", "schemaVersion", "traceName", "record_shapes",
    "with_stack", "profile_memory", "cuda_driver_version", "cuda_runtime_version", "cupti_version", "kerneltui",
    "distributedInfo",
))


def trace_meta(stream, raw, repeated: tuple[str, ...] = ()) -> TraceMeta:
    """``repeated``: the keys of TOP_KEYS_READ the file holds more than once at its top level."""
    top = raw.top if isinstance(raw.top, dict) else {}
    properties = top.get("deviceProperties")
    devices = tuple(
        _device(i, d) for i, d in enumerate(properties if isinstance(properties, list) else []) if isinstance(d, dict)
    )
    n = len(raw.columns["ts"])
    warnings = []
    if raw.truncated:
        warnings.append(f"trace is cut off (a profiler stopped mid-write?): loaded the {n:,} complete events before the cut")
    elif raw.end_damaged:
        warnings.append(f"the end of the trace (after its {n:,} events) is cut off or damaged: top-level keys after the events are lost")
    if repeated:
        warnings.append(f"the trace repeats its top-level {', '.join(repeated)} key{'s' if len(repeated) > 1 else ''}: "
                        "the last of each is used, as JSON readers do")
    warnings.extend(raw.losses.warnings())
    block = top.get("kerneltui")
    capture = block.get("capture") if isinstance(block, dict) else None
    distributed = top.get("distributedInfo")  # torch.distributed's rank, world_size, process groups
    versions = {
        k: str(top[k])
        for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version")
        if isinstance(top.get(k), (str, int, float)) and not isinstance(top.get(k), bool)
    }
    schema_version = _int(top.get("schemaVersion"), None)
    return TraceMeta(
        path=str(stream.path),
        file_bytes=stream.file_bytes,
        compressed=stream.compressed,
        base_time_ns=_int(top.get("baseTimeNanoseconds"), 0),
        devices=devices,
        producer="kineto" if "schemaVersion" in top or "deviceProperties" in top else "chrome-trace",
        trace_name=_str(top.get("traceName"), ""),
        schema_version=schema_version,
        record_shapes=bool(_int(top.get("record_shapes"), 0)),
        with_stack=bool(_int(top.get("with_stack"), 0)),
        profile_memory=bool(_int(top.get("profile_memory"), 0)),
        versions=versions,
        capture=_scalars(capture) if isinstance(capture, dict) else None,
        distributed=_scalars(distributed) if isinstance(distributed, dict) else None,
        provenance=block.get("provenance") if isinstance(block, dict) and isinstance(block.get("provenance"), dict)
        else None,
        truncated=raw.truncated,
        end_damaged=raw.end_damaged,
        skipped_events=raw.losses.skipped,
        corrupt_events=raw.losses.corrupt,
        repaired_durations=raw.losses.fields.get("dur", 0),
        flow_events=raw.flow_events,
        metadata_events=len(raw.metadata),
        warnings=tuple(warnings),
    )


def _device(i: int, d: dict) -> Device:
    major, minor = _int(d.get("computeMajor"), None), _int(d.get("computeMinor"), None)
    return Device(
        index=_int(d.get("id"), i),
        name=_str(d.get("name"), "unknown device"),
        memory_bytes=max(0, _int(d.get("totalGlobalMem"), 0)),
        sm_count=max(0, _int(d.get("numSms"), 0)),
        compute_capability=f"{'?' if major is None else major}.{'?' if minor is None else minor}",
    )


def _int(value, default):
    """An int64 from an int, an integral float or a numeric string; else the default."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    elif isinstance(value, str):
        try:
            value = int(value.strip(), 0)
        except ValueError:
            return default
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return default


def _str(value, default: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return default


def _scalars(block: dict) -> dict:
    """The capture block, keeping values a report can print (nested settings as they are)."""
    return {str(k): v for k, v in block.items() if isinstance(v, (str, int, float, bool, list, dict)) or v is None}
