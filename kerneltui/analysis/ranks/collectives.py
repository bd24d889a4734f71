"""Which GPU kernels are communication, and what collective each one is.

Recognised by name, since that is what every trace has: NCCL's ``ncclKernel_<Kind>_...``
(NCCL < 2.19) and ``ncclDevKernel_<Kind>_...`` (2.19 and newer; RCCL writes the same names),
PyTorch's symmetric-memory all-reduce/all-gather kernels, and vLLM's custom all-reduce. The
collective record that newer Kineto writes on the kernel itself ("Collective name", message
sizes, process group) refines the kind when the name is generic (``ncclDevKernel_Generic``).
"""

from __future__ import annotations

import re

# Kinds whose every rank finishes at about the same moment: their ends line the clocks up.
SYNCHRONISING = frozenset(("allreduce", "allgather", "reducescatter", "broadcast", "alltoall"))

_NCCL = re.compile(r"^(?:void\s+)?(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_NCCL_KINDS = {
    "allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
    "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv", "send": "send", "recv": "recv",
    "alltoall": "alltoall", "alltoallv": "alltoall", "generic": "collective",
}
# Kernels of other libraries, by a fragment of the (demangled) name.
_OTHERS = (
    (re.compile(r"multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|multimem_one_shot_all_reduce"
                r"|cross_device_reduce|custom_all_reduce|allreduce_kernel|all_reduce_kernel"), "allreduce"),
    (re.compile(r"multimem_all_gather|all_gather_kernel|allgather_kernel"), "allgather"),
    (re.compile(r"reduce_scatter_kernel|reducescatter_kernel"), "reducescatter"),
    (re.compile(r"all_to_all_kernel|alltoall_kernel"), "alltoall"),
)
# torch.distributed's names in "Collective name" -> a kind above.
_RECORDED = {
    "allreduce": "allreduce", "all_reduce": "allreduce", "allreduce_coalesced": "allreduce",
    "allgather": "allgather", "all_gather": "allgather", "_allgather_base": "allgather",
    "allgather_into_tensor_coalesced": "allgather", "all_gather_into_tensor": "allgather",
    "reduce_scatter": "reducescatter", "_reduce_scatter_base": "reducescatter",
    "reduce_scatter_tensor": "reducescatter", "reduce_scatter_tensor_coalesced": "reducescatter",
    "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
    "all_to_all": "alltoall", "alltoall": "alltoall", "alltoall_base": "alltoall",
    "barrier": "allreduce",  # NCCL implements a barrier as a one-element all-reduce
}
DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "int": 4, "int32": 4, "long": 8, "int64": 8, "byte": 1, "uint8": 1, "char": 1, "int8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "short": 2, "int16": 2,
}


def kind_of_name(name: str) -> str | None:
    """The collective a kernel name says it is ("collective" when it says only that), else None."""
    m = _NCCL.match(name)
    if m:
        word = m.group(1).lower()
        for prefix in sorted(_NCCL_KINDS, key=len, reverse=True):  # "AllReduce" before "Reduce"
            if word.startswith(prefix):
                return _NCCL_KINDS[prefix]
        return "collective"
    for pattern, kind in _OTHERS:
        if pattern.search(name):
            return kind
    return None


def kind_of_record(collective: object) -> str | None:
    """The kind torch.distributed's "Collective name" stands for, else None."""
    if not isinstance(collective, str):
        return None
    return _RECORDED.get(collective.strip().lower())


def message_bytes(record: dict) -> int | None:
    """Bytes of a collective's larger message, from its record's element count and dtype."""
    nelems = max((v for v in (record.get("in_nelems"), record.get("out_nelems"))
                  if isinstance(v, int) and not isinstance(v, bool) and v >= 0), default=None)
    size = DTYPE_BYTES.get(str(record.get("dtype", "")).lower())
    if nelems is None or size is None:
        return None
    return nelems * size
