"""Peak memory bandwidth and dense matrix FLOP/s of common GPUs, by the trace's device name.

Kineto's ``deviceProperties`` has the device name but no clocks and no memory
bandwidth (doc section 1), so achieved bandwidth needs a table. Figures are the
vendors' datasheet numbers: bandwidth in GB/s (10^9 B/s), FLOP/s as dense
tensor-core TFLOP/s (no 2:4 sparsity) with FP32 accumulation where the vendor
gives both, and plain (non-tensor) FP32. A FLOP/s figure we are not sure of is
left out (None) rather than guessed; an unknown device gives None, and the
screens then show GB/s without a percentage.

Host<->device copies cross the host link, not HBM: each row names its link
(PCIe generation x16, or NVLink-C2C on Grace Hopper) and the link's peak per
direction, which the copies are compared against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class DeviceSpec:
    name: str  # the canonical name of the row that matched
    bandwidth_gbs: float  # peak DRAM/HBM bandwidth, GB/s
    bf16_tflops: float | None = None
    fp16_tflops: float | None = None
    fp32_tflops: float | None = None
    host_link: str = ""  # the link host<->device copies cross ("PCIe Gen5 x16"); "" when unknown

    @property
    def host_link_gbs(self) -> float | None:
        """Peak of the host link per direction, GB/s; None when the link is unknown."""
        return HOST_LINK_GBS.get(self.host_link)

    def peak_tflops(self, dtype: str) -> float | None:
        """Peak for a short dtype tag (bf16, f16, f32); None when unknown."""
        return {"bf16": self.bf16_tflops, "f16": self.fp16_tflops, "f32": self.fp32_tflops}.get(dtype)


# Peak per direction, GB/s: PCIe Gen5 x16 is 16 lanes x 32 GT/s x 128/130 / 8 = 63 GB/s (quoted
# as 64), Gen4 half that, Gen3 a quarter; NVLink-C2C (GH200) is 900 GB/s both ways together.
GEN3, GEN4, GEN5, C2C = "PCIe Gen3 x16", "PCIe Gen4 x16", "PCIe Gen5 x16", "NVLink-C2C"
HOST_LINK_GBS: dict[str, float] = {GEN3: 16.0, GEN4: 32.0, GEN5: 64.0, C2C: 450.0}

# (pattern on the normalised name, spec). Order matters: specific before general
# ("h100 pcie" before "h100", "l40s" before "l40" before "l4", "a100" before "a10").
_TABLE: tuple[tuple[str, DeviceSpec], ...] = (
    (r"\bh200\b", DeviceSpec("H200", 4800, 989, 989, 67, host_link=GEN5)),
    (r"\bgh200\b", DeviceSpec("GH200 (HBM3)", 4000, host_link=C2C)),
    (r"\bh100\b.*\bpcie\b", DeviceSpec("H100 PCIe", 2000, 756, 756, 51, host_link=GEN5)),
    (r"\bh100\b.*\bnvl\b", DeviceSpec("H100 NVL", 3900, host_link=GEN5)),
    (r"\bh100\b", DeviceSpec("H100 SXM", 3350, 989, 989, 67, host_link=GEN5)),
    (r"\bh800\b.*\bpcie\b", DeviceSpec("H800 PCIe", 2000, host_link=GEN5)),
    (r"\bh800\b", DeviceSpec("H800 SXM", 3350, host_link=GEN5)),
    (r"\bb200\b", DeviceSpec("B200", 8000, host_link=GEN5)),
    (r"\ba100\b.*80\s*gb.*\bpcie\b|\ba100\b.*\bpcie\b.*80\s*gb",
     DeviceSpec("A100 80GB PCIe", 1935, 312, 312, 19.5, host_link=GEN4)),
    (r"\ba100\b.*80\s*gb", DeviceSpec("A100 80GB SXM", 2039, 312, 312, 19.5, host_link=GEN4)),
    (r"\ba100\b", DeviceSpec("A100 40GB", 1555, 312, 312, 19.5, host_link=GEN4)),
    (r"\ba800\b", DeviceSpec("A800 80GB", 2039, host_link=GEN4)),
    (r"\bl40s\b", DeviceSpec("L40S", 864, 362, 362, 91.6, host_link=GEN4)),
    (r"\bl40\b", DeviceSpec("L40", 864, 181, 181, 90.5, host_link=GEN4)),
    (r"\bl4\b", DeviceSpec("L4", 300, 121, 121, 30.3, host_link=GEN4)),
    (r"\ba10g\b", DeviceSpec("A10G", 600, host_link=GEN4)),
    (r"\ba10\b", DeviceSpec("A10", 600, 125, 125, 31.2, host_link=GEN4)),
    (r"\ba40\b", DeviceSpec("A40", 696, 149.7, 149.7, 37.4, host_link=GEN4)),
    (r"\bv100s\b", DeviceSpec("V100S", 1134, None, 130, 16.4, host_link=GEN3)),
    (r"\bv100\b.*\bpcie\b", DeviceSpec("V100 PCIe", 900, None, 112, 14, host_link=GEN3)),
    (r"\bv100\b", DeviceSpec("V100 SXM2", 900, None, 125, 15.7, host_link=GEN3)),
    (r"\bt4\b", DeviceSpec("T4", 320, None, 65, 8.1, host_link=GEN3)),
    (r"\brtx 6000 ada\b", DeviceSpec("RTX 6000 Ada", 960, host_link=GEN4)),
    (r"\brtx a6000\b", DeviceSpec("RTX A6000", 768, host_link=GEN4)),
    (r"\brtx 4090\b", DeviceSpec("RTX 4090", 1008, 165.2, 165.2, 82.6, host_link=GEN4)),
    (r"\brtx 4080\b", DeviceSpec("RTX 4080", 717, host_link=GEN4)),
    (r"\brtx 3090 ti\b", DeviceSpec("RTX 3090 Ti", 1008, host_link=GEN4)),
    (r"\brtx 3090\b", DeviceSpec("RTX 3090", 936, 71, 71, 35.6, host_link=GEN4)),
    (r"\brtx 3080\b", DeviceSpec("RTX 3080", 760, host_link=GEN4)),
    (r"\bmi300x\b", DeviceSpec("MI300X", 5300, 1307.4, 1307.4, host_link=GEN5)),
    (r"\bmi250x\b", DeviceSpec("MI250X", 3277, host_link=GEN4)),
    (r"\bmi210\b", DeviceSpec("MI210", 1638, host_link=GEN4)),
)
_COMPILED = tuple((re.compile(pattern), spec) for pattern, spec in _TABLE)


NAME_LIMIT = 200  # device names are short; the patterns' ".*" would take quadratic time on a long one


def _normalise(name: str) -> str:
    # "NVIDIA A100-SXM4-80GB" and "Tesla V100-SXM2-16GB" use dashes where others use spaces.
    return re.sub(r"[\s\-_]+", " ", name[:NAME_LIMIT].lower()).strip()


def device_spec(name: str | None) -> DeviceSpec | None:
    """The peak figures for a ``deviceProperties.name`` string, or None for an unknown device."""
    if not name or not isinstance(name, str):
        return None
    return _spec(name)


@lru_cache(maxsize=64)
def _spec(name: str) -> DeviceSpec | None:
    text = _normalise(name)
    for pattern, spec in _COMPILED:
        if pattern.search(text):
            return spec
    return None
