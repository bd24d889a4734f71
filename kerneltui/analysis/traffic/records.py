"""Reading a record_shapes record: tensors, their sizes and dtypes, and Concrete Inputs."""

from __future__ import annotations

import math
import re

# record_shapes "Input type" -> (itemsize, dtype tag). Types not listed are not tensors.
ITEMSIZE: dict[str, tuple[int, str]] = {
    "float": (4, "f32"), "double": (8, "f64"), "c10::Half": (2, "f16"), "c10::BFloat16": (2, "bf16"),
    "Half": (2, "f16"), "BFloat16": (2, "bf16"), "long int": (8, "i64"), "long": (8, "i64"),
    "int": (4, "i32"), "short int": (2, "i16"), "short": (2, "i16"), "signed char": (1, "i8"),
    "unsigned char": (1, "u8"), "bool": (1, "bool"), "unsigned int": (4, "u32"),
    "unsigned long": (8, "u64"), "unsigned short": (2, "u16"),
    "c10::complex<float>": (8, "c64"), "c10::complex<double>": (16, "c128"),
    "c10::complex<c10::Half>": (4, "c32"), "c10::Float8_e4m3fn": (1, "f8"), "c10::Float8_e5m2": (1, "f8"),
    "c10::Float8_e4m3fnuz": (1, "f8"), "c10::Float8_e5m2fnuz": (1, "f8"), "c10::Float8_e8m0fnu": (1, "f8"),
    "c10::qint8": (1, "i8"), "c10::quint8": (1, "u8"), "c10::qint32": (4, "i32"),
}
SKIPPED_TYPES = frozenset({"Scalar", "ScalarList", "", "GenericList", "None"})


def short_op(name: str) -> str:
    """aten::clamp_min -> clamp_min; triton_poi_fused_add_relu_0 unchanged."""
    return name.rsplit("::", 1)[-1]


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W]+", name.lower()) if t]


MAX_TENSOR_BYTES = 2**62  # a record past this is not a tensor any device holds: the record is unusable


def _shape(value) -> list[int] | None:
    """A tensor shape as record_shapes writes it (a list of non-negative ints), else None."""
    if not isinstance(value, list) or not all(type(d) is int and d >= 0 for d in value):
        return None  # nested lists, strings, floats, booleans, negatives: not a shape
    return value if math.prod(value) <= MAX_TENSOR_BYTES else None


def _tensors(dims: list, types: list, fallback: tuple[int, str] | None) -> list[tuple[list[int], int, str]] | None:
    """(shape, itemsize, tag) for every tensor argument, TensorLists flattened; None if the record is malformed.

    A tensor argument whose shape is not a shape makes the whole record unusable: counting the
    other arguments only would give a byte count that looks right and is not.
    """
    out = []
    for shape, kind in zip(dims, types):
        if not isinstance(kind, str):
            return None
        if kind == "TensorList":
            # a TensorList's element dtype is not recorded: use the op's other tensors' dtype,
            # else the elements are tagged "unknown" (itemsize 0) and op_traffic counts no bytes
            size = fallback or (0, "unknown")
            if not isinstance(shape, list):
                return None
            for element in shape:
                element = _shape(element)
                if element is None:
                    return None
                out.append((element, size[0], size[1]))
        elif kind in ITEMSIZE:
            size, tag = ITEMSIZE[kind]
            checked = _shape(shape)
            if checked is None or math.prod(checked) * size > MAX_TENSOR_BYTES:
                return None
            out.append((checked, size, tag))
    return out


def _numel(shape: list) -> int:
    return math.prod(int(d) for d in shape)


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    """numpy broadcasting of the shapes, or None where they are incompatible."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for shape in shapes:
        for i, d in enumerate(shape, start=ndim - len(shape)):
            if d != 1 and out[i] not in (1, d):
                return None
            out[i] = max(out[i], d)
    return out


Tensor = tuple[list[int], int, str]  # (shape, itemsize, dtype tag)
UNKNOWN = (math.nan, math.nan, 0.0)  # a rule's (bytes, flops, output bytes) when it cannot tell


def _nbytes(t: Tensor | None) -> int:
    return _numel(t[0]) * t[1] if t is not None else 0


def _arguments(dims: list, types: list) -> list[Tensor | None]:
    """Per recorded argument: (shape, itemsize, tag) for a tensor, None for anything else.

    Only called on a record that _tensors accepted, so every tensor argument's shape is a shape.
    """
    out: list[Tensor | None] = []
    for shape, kind in zip(dims, types):
        checked = _shape(shape) if kind in ITEMSIZE else None
        out.append((checked, *ITEMSIZE[kind]) if checked is not None else None)
    return out


def _arg(args: list[Tensor | None], i: int | None) -> Tensor | None:
    return args[i] if i is not None and 0 <= i < len(args) else None


def _concrete(shapes: dict, n: int) -> list[str] | None:
    """The record's Concrete Inputs, one string per argument ("[2, 2]", "True", "1"), if the loader kept them."""
    values = shapes.get("concrete")
    if not isinstance(values, list) or len(values) != n or not all(isinstance(v, str) for v in values):
        return None
    return values


def _strides(shapes: dict, i: int, ndim: int) -> list[int] | None:
    """Input Strides of argument i, if the loader kept them."""
    values = shapes.get("strides")
    value = values[i] if isinstance(values, list) and 0 <= i < len(values) else None
    if not isinstance(value, list) or len(value) != ndim or not all(type(s) is int for s in value):
        return None
    return value


def _at(values: list[str] | None, i: int | None) -> str | None:
    return values[i] if values is not None and i is not None and 0 <= i < len(values) else None


_INT = re.compile(r"-?\d{1,18}")
_WORDS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def _items(text: str | None) -> list[str] | None:
    if text is None:
        return None
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [p.strip() for p in inner.split(",")] if inner else []
    return [text] if text else None


def _ints(text: str | None) -> list[int] | None:
    """A Concrete Inputs int or int list ("2", "[2, 2]", "[]") as a list; None for anything else."""
    parts = _items(text)
    if parts is None or not all(_INT.fullmatch(p) for p in parts):
        return None
    return [int(p) for p in parts]


def _flags(text: str | None) -> list[bool] | None:
    """A Concrete Inputs bool or bool list ("True", "[True, True, False]"); None for anything else."""
    parts = _items(text)
    if not parts or not all(p in _WORDS for p in parts):
        return None
    return [_WORDS[p] for p in parts]


def _spatial(value: list[int] | None, nd: int) -> list[int] | None:
    """A per-spatial-dimension list (stride, padding, dilation) of nd entries; one entry stands for all."""
    if value is None:
        return None
    if len(value) == 1:
        return value * nd
    return value if len(value) == nd else None


def _window_out(size: list[int], kernel: list[int], stride: list[int], padding: list[int],
                dilation: list[int], ceil: bool = False) -> list[int] | None:
    """Output extent of a sliding window (convolution, pooling) per spatial dimension; None if not one."""
    out = []
    for h, r, s, p, d in zip(size, kernel, stride, padding, dilation):
        if s <= 0 or d <= 0 or p < 0 or r <= 0:
            return None
        span = h + 2 * p - d * (r - 1) - 1
        if span < 0:
            return None
        o = (span + (s - 1 if ceil else 0)) // s + 1
        if ceil and (o - 1) * s >= h + p:  # the last window must start inside the input or its left padding
            o -= 1
        out.append(o)
    return out
