"""Kernel-name normalization: short, distinct display names for GPU events.

Implements section 5 of ``docs/kineto-trace-format.md``. Kineto records the
demangled C++ name of every CUDA kernel; for ATen kernels these run to 1100+
characters of nested templates and lambdas, and the obvious shortenings collide
(torch's own 52-character truncation, or the bare function name, which turns
eleven different kernels into ``vectorized_elementwise_kernel``).

``short_name`` keeps the parts that tell kernels apart::

    short = base<key>[dtype]

* ``base``  - the kernel function itself (last ``::`` segment before ``<``);
* ``key``   - the first template-argument identifier that is not a namespace,
  scalar type, or generic wrapper: usually the functor or the op that
  instantiated the kernel (``CUDAFunctor_add``, ``launch_clamp_scalar``,
  ``MulFunctor``, ``sum_functor``); ``,scalar`` is appended when the op is
  wrapped in ``AUnaryFunctor``/``BUnaryFunctor`` (tensor-with-scalar form);
* ``dtype`` - the earliest scalar type among the template arguments, as a short
  tag (``f32``, ``bf16``, ``i64``...).

Names with nothing to shorten are returned unchanged: Triton kernels
(``triton_*``), flat library names (``nvjet_*``, ``sm80_xmma_*``, ``cudnn_*``,
``cutlass_*``: anything without ``::``, ``<`` or ``(``) and the
memcpy/memset activity names (``Memcpy HtoD (Pinned -> Device)``).

Three more rules, for library kernels:

* A name the trace kept mangled (``_ZN17cutlass__5x_cudnn6Kernel...``, 1,600+
  characters) is demangled first (``trace.demangle``) and shortened like the
  rest; one that does not demangle is shown as it is.
* Generic entry points that only launch their first type argument,
  ``cutlass::Kernel<Op>`` (``Kernel2``, ``device_kernel``) and
  ``ck_tile::kentry<N, Op>``, are named by ``Op``: ``Kernel<cutlass_80_..._align8>``
  is the flat ``cutlass_80_..._align8``, and
  ``Kernel<conv::kernel::ImplicitGemmConvolution<...>>`` is
  ``ImplicitGemmConvolution<...>``.
* A CUTLASS threadblock tile (the first ``GemmShape<M, N, K>``) is added to the
  key as ``,MxNxK``: cuDNN runs several tilings of one convolution, and the tile
  is what tells them apart (``ImplicitGemmConvolution<ImplicitGemmMultistage,64x128x32>[bf16]``).

The rules do not guarantee distinct results for every possible input, so
``short_names`` maps a whole set of names and adds ``#2``, ``#3``... to any that
still collide. Aggregate by *full* name; short names are for display only.

Pure string scanning (no regular expressions), linear in the name length.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from kerneltui.trace.demangle import demangle, is_mangled

__all__ = ["short_name", "short_names"]

# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------

# Single-identifier scalar types (after any namespace qualifier is dropped:
# ``c10::BFloat16`` is looked up as ``BFloat16``). Multi-word C++ integer types
# (``unsigned long long``...) are handled by ``_builtin_int_tag``.
_SCALAR_TAGS: dict[str, str] = {
    "float": "f32",
    "double": "f64",
    "bool": "bool",
    "Half": "f16",
    "__half": "f16",
    "half": "f16",
    "BFloat16": "bf16",
    "__nv_bfloat16": "bf16",
    "Float8_e4m3fn": "f8e4m3fn",
    "Float8_e4m3fnuz": "f8e4m3fnuz",
    "Float8_e5m2": "f8e5m2",
    "Float8_e5m2fnuz": "f8e5m2fnuz",
    "Float8_e8m0fnu": "f8e8m0fnu",
    "Float4_e2m1fn_x2": "f4e2m1fn_x2",
    "__nv_fp8_e4m3": "f8e4m3fn",
    "__nv_fp8_e5m2": "f8e5m2",
    "int8_t": "i8",
    "int16_t": "i16",
    "int32_t": "i32",
    "int64_t": "i64",
    "uint8_t": "u8",
    "uint16_t": "u16",
    "uint32_t": "u32",
    "uint64_t": "u64",
    "qint8": "qi8",
    "quint8": "qu8",
    "qint32": "qi32",
    # CUTLASS / CK / C++23 element types (``cutlass::bfloat16_t``, ``std::bfloat16_t``...)
    "bfloat16_t": "bf16",
    "half_t": "f16",
    "tfloat32_t": "tf32",
    "float_e4m3_t": "f8e4m3fn",
    "float_e5m2_t": "f8e5m2",
    "_Float16": "f16",
    "__bf16": "bf16",
}

# ``c10::complex<T>`` -> tag by T.
_COMPLEX_TAGS: dict[str, str] = {"f16": "c32", "f32": "c64", "f64": "c128"}

# Words of C++ builtin integer types, combined by ``_builtin_int_tag``.
_INT_WORDS = frozenset({"unsigned", "signed", "char", "short", "int", "long"})

# Identifiers that are never the ``key``: C++ keywords, namespaces, scalar
# types and generic wrappers whose template arguments carry the real op.
# Namespace qualifiers are mostly skipped anyway (any identifier directly
# followed by ``::`` is a qualifier); listing the common ones keeps them out of
# the key even when they appear unqualified.
_STOP: frozenset[str] = frozenset(
    {
        # keywords / literals
        "void", "const", "volatile", "true", "false", "operator", "auto",
        "struct", "class", "enum", "typename", "decltype", "nullptr",
        "lambda", "unnamed", "anonymous", "namespace",
        # namespaces
        "at", "native", "std", "c10", "cuda", "cub", "detail", "at_cuda_detail",
        "thrust", "memory", "binary_internal", "impl", "internal",
        "cutlass", "cute", "cudnn", "fusion", "radix", "radix_sort", "scan",
        "unique_by_key", "__4", "__1", "_V2",
        # elementwise/reduce wrappers
        "gpu_kernel_impl_nocast", "gpu_kernel_impl", "BinaryFunctor",
        "AUnaryFunctor", "BUnaryFunctor", "ReduceOp", "func_wrapper_t",
        "OffsetCalculator", "TrivialOffsetCalculator", "IntDivider",
        "LoadWithCast", "StoreWithCast", "LoadWithoutCast", "StoreWithoutCast",
        "array", "Array", "pair", "tuple", "function_traits", "result_type",
        "type", "TensorIteratorBase", "TensorIterator", "Tensor", "Scalar",
        "AccumulateType", "OpaqueType",
        # multi-tensor (foreach / fused optimizer) metadata
        "TensorListMetadata", "FusedOptimizerTensorListMetadata",
        "TensorListScalarListMetadata",
        # cub/thrust plumbing
        "policy_hub", "ScanTileState", "identity_decomposer_t", "use_default",
        "SortOrder", "VSMemHelper", "vsmem_t",
        # CUTLASS / CK shape descriptors (the tile shape is read by ``_gemm_tile``)
        "GemmShape", "MatrixShape", "PitchLinearShape", "sequence",
    }
    | _INT_WORDS
    | set(_SCALAR_TAGS)
    | {"complex"}
)

_STD_OPS = frozenset(
    {
        "plus", "minus", "multiplies", "divides", "modulus", "negate",
        "logical_and", "logical_or", "logical_not", "bit_and", "bit_or", "bit_xor",
        "equal_to", "not_equal_to", "greater", "less", "greater_equal", "less_equal",
    }
)

_SCALAR_WRAPPERS = frozenset({"AUnaryFunctor", "BUnaryFunctor"})

_ANON = "(anonymous namespace)::"


def _is_ident_start(c: str) -> bool:
    return c == "_" or c.isalpha()


def _is_ident_char(c: str) -> bool:
    return c == "_" or c.isalnum()


def _ident_end(s: str, i: int) -> int:
    """Index just past the identifier that starts at s[i]."""
    j = i + 1
    while j < len(s) and _is_ident_char(s[j]):
        j += 1
    return j


def _is_policy(word: str) -> bool:
    """cub's ``Policy1000``-style tuning-policy names (never a useful key)."""
    return word.startswith("Policy") and word[6:].isdigit() and len(word) > 6


# --------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------

_OPEN = "<({["
_CLOSE = ">)}]"


def _skip_operator(s: str, i: int) -> int:
    """``s[i:]`` follows the word ``operator``: return the index after the
    operator's symbol, so ``operator()``, ``operator<`` or ``operator->`` do
    not disturb bracket depth."""
    n = len(s)
    while i < n and s[i] == " ":
        i += 1
    if s.startswith("()", i) or s.startswith("[]", i):
        return i + 2
    j = i
    while j < n and s[j] in "<>=!+-*/%&|^~":
        j += 1
    return j


def _scan_structure(s: str) -> tuple[int, int, int]:
    """Return ``(cut, lt, gt)`` for ``s``.

    ``cut``: index of the first ``(`` at bracket depth 0 (``len(s)`` if none):
    where the parameter list starts. ``lt``/``gt``: indices of the first
    depth-0 ``<`` before ``cut`` and of its matching ``>`` (``-1`` if none).
    """
    n = len(s)
    depth = 0
    lt = gt = -1
    i = 0
    while i < n:
        c = s[i]
        if _is_ident_start(c):
            j = _ident_end(s, i)
            if s[i:j] == "operator":
                j = _skip_operator(s, j)
            i = j
            continue
        if c == "-" and i + 1 < n and s[i + 1] == ">":
            i += 2
            continue
        if c in _OPEN:
            if depth == 0:
                if c == "(":
                    return i, lt, gt
                if c == "<" and lt < 0:
                    lt = i
            depth += 1
        elif c in _CLOSE:
            if depth > 0:
                depth -= 1
                if depth == 0 and lt >= 0 and gt < 0:
                    gt = i
        i += 1
    return n, lt, gt


_PAIRS = {">": "<", ")": "(", "]": "[", "}": "{"}


def _without_return_type(s: str) -> str:
    """``s`` from the function's own name on: drop a leading C++ return type.

    ``void f<T>(...)`` and ``std::enable_if<(N>0), void>::type vllm::kernel<T>(...)``
    both start at the kernel. The return type ends at the last space outside any
    brackets before the parameter list; a ``>`` inside parentheses is a comparison.
    """
    stack: list[str] = []
    last_space = -1
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if _is_ident_start(c):
            j = _ident_end(s, i)
            i = _skip_operator(s, j) if s[i:j] == "operator" else j
            continue
        if c in "<([{":
            if c == "(" and not stack:
                break  # the parameter list
            stack.append(c)
        elif c in _PAIRS:
            if stack and stack[-1] == _PAIRS[c]:
                stack.pop()
            elif c != ">":
                break  # unbalanced: leave the name as it is
        elif c == " " and not stack:
            last_space = i
        i += 1
    return s[last_space + 1 :].lstrip() if last_space >= 0 else s


def _builtin_int_tag(words: list[str]) -> str | None:
    """Tag for a run of C++ builtin type words, e.g. ``unsigned long long``.

    Plain ``char`` gets no tag: in ATen it is the byte type of data pointers
    (``std::array<char*, 3>``), not an element dtype. LP64: ``long`` is 64-bit.
    """
    unsigned = "unsigned" in words
    signed = "signed" in words
    longs = words.count("long")
    if "char" in words:
        if unsigned:
            return "u8"
        return "i8" if signed else None
    if "short" in words:
        bits = 16
    elif longs:
        bits = 64
    else:  # int / unsigned / signed
        bits = 32
    return f"{'u' if unsigned else 'i'}{bits}"


def _tokens(s: str) -> list[tuple[str, bool, bool]]:
    """Identifiers of ``s`` in order, as ``(word, qualifier, joined)``:
    ``qualifier`` when it is directly followed by ``::`` (a namespace or class
    qualifier; not ``Foo::operator``, where ``Foo`` is the functor itself), ``joined`` when only spaces separate it from the previous
    identifier (so ``unsigned long long`` can be read as one type, but
    ``long, long`` cannot). Numbers such as ``4``, ``2u`` or ``3ul`` are
    skipped whole; so is the symbol after ``operator``."""
    out: list[tuple[str, bool, bool]] = []
    n = len(s)
    i = 0
    joined = False  # only spaces since the previous identifier
    while i < n:
        c = s[i]
        if _is_ident_start(c):
            j = _ident_end(s, i)
            word = s[i:j]
            # ``Foo::operator()`` names a functor class, not a namespace.
            qualifier = s.startswith("::", j) and not (
                s.startswith("::operator", j)
                and not (j + 10 < n and _is_ident_char(s[j + 10]))
            )
            out.append((word, qualifier, joined))
            i = _skip_operator(s, j) if word == "operator" else j
            joined = word != "operator"
        elif c.isdigit():
            j = _ident_end(s, i)
            i = j
            joined = False
        else:
            if c != " ":
                joined = False
            i += 1
    return out


def _key_and_dtype(targs: str) -> tuple[str | None, str | None]:
    toks = _tokens(targs)
    key: str | None = None
    scalar_wrapped = False
    dtype: str | None = None
    n = len(toks)
    k = 0
    while k < n:
        word, qualifier, _ = toks[k]
        # dtype: earliest scalar type.
        if dtype is None and not qualifier:
            if word in _INT_WORDS:
                run = [word]
                m = k + 1
                while m < n and toks[m][2] and toks[m][0] in _INT_WORDS:
                    run.append(toks[m][0])
                    m += 1
                dtype = _builtin_int_tag(run)
                k = m
                continue
            if word == "complex":
                # complex<T>: T is the next unqualified word (c10::Half...).
                m = k + 1
                while m < n and toks[m][1]:
                    m += 1
                inner = _SCALAR_TAGS.get(toks[m][0]) if m < n else None
                dtype = _COMPLEX_TAGS.get(inner or "", "complex")
                k = m + 1
                continue
            elif word in _SCALAR_TAGS:
                dtype = _SCALAR_TAGS[word]
        # key: first identifier that is not a qualifier / on the stoplist.
        if key is None and not qualifier:
            if word in _SCALAR_WRAPPERS:
                scalar_wrapped = True
            elif word not in _STOP and not _is_policy(word):
                key = word
        if key is not None and dtype is not None:
            break
        k += 1
    if scalar_wrapped:
        key = f"{key},scalar" if key else "scalar"
    tile = _gemm_tile(targs)
    if tile:
        key = f"{key},{tile}" if key else tile
    if key is not None and key.endswith("Functor"):
        # foreach kernels carry their op as a std functional (``std::plus<float>``)
        # after a generic functor: ``_foreach_add_`` and ``_foreach_mul_`` differ only there.
        op = next((w for (q, qual, _), (w, _, _) in zip(toks, toks[1:]) if q == "std" and qual and w in _STD_OPS), None)
        if op:
            key = f"{key},{op}"
    return key, dtype


def _gemm_tile(targs: str) -> str | None:
    """``MxNxK`` of the first ``GemmShape<M, N, K>``: a CUTLASS kernel's threadblock tile,
    what tells its instantiations apart (cuDNN runs several of one convolution)."""
    i = targs.find("GemmShape<")
    if i < 0:
        return None
    i += len("GemmShape<")
    j = targs.find(">", i)
    dims = [d.strip() for d in targs[i:j].split(",")] if j > i else []
    if len(dims) == 3 and all(d.isdigit() for d in dims):
        return "x".join(dims)
    return None


# Generic entry points that only launch the operator given as their first type
# argument: CUTLASS's ``cutlass::Kernel<Op>`` / ``Kernel2`` / ``device_kernel``
# and CK's ``ck_tile::kentry<N, Op>``. Value: the namespace the wrapper must be in.
_WRAPPERS = {"Kernel": "cutlass", "Kernel2": "cutlass", "device_kernel": "cutlass", "kentry": "ck_tile"}


def _first_type_arg(targs: str) -> str | None:
    """The first depth-0 template argument that is a type (not ``1``, ``true``, ``(E)0``)."""
    depth = 0
    start = 0
    n = len(targs)
    for i in range(n + 1):
        c = targs[i] if i < n else ","
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0:
            arg = targs[start:i].strip()
            if arg and _is_ident_start(arg[0]) and arg not in ("true", "false"):
                return arg
            start = i + 1
    return None


def _is_passthrough(name: str) -> bool:
    if name.startswith("triton_"):
        return True
    if name.startswith(("Memcpy ", "Memset ")) or name in ("Memcpy", "Memset"):
        return True
    return "::" not in name and "<" not in name and "(" not in name


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


@lru_cache(maxsize=16384)
def short_name(full: str) -> str:
    """Short display name of one GPU event name (see module docstring).

    >>> short_name("void at::native::vectorized_elementwise_kernel<4, "
    ...            "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    ...            "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
    'vectorized_elementwise_kernel<CUDAFunctor_add>[f32]'
    >>> short_name("nvjet_sm90_tst_128x128_64x6_2x4_h_bz_NTT")
    'nvjet_sm90_tst_128x128_64x6_2x4_h_bz_NTT'
    """
    if is_mangled(full):
        # ``_ZN...``: the trace kept the mangled name. Shorten its demangled form;
        # one that does not demangle is shown as it is.
        demangled = demangle(full)
        return full if demangled == full else _shorten(demangled)
    return _shorten(full)


def _shorten(full: str, unwrap: bool = True) -> str:
    if _is_passthrough(full):
        return full
    s = full.strip()
    if _ANON in s:
        s = s.replace(_ANON, "")
    s = _without_return_type(s)
    cut, lt, gt = _scan_structure(s)
    if lt >= 0:
        head = s[:lt]
        targs = s[lt + 1 : gt if gt >= 0 else cut]
    else:
        head = s[:cut]
        targs = ""
    base = head.rstrip().rsplit("::", 1)[-1].strip()
    if not base:
        # Not a shape these rules understand (e.g. a leading operator or
        # an unbalanced name): show it as it is rather than guess.
        return full
    if unwrap and targs and base in _WRAPPERS and _WRAPPERS[base] in head:
        # ``cutlass::Kernel<Op>``: the kernel is Op (a flat config name is shown whole)
        inner = _first_type_arg(targs)
        if inner:
            return _shorten(inner, unwrap=False)
    key, dtype = _key_and_dtype(targs) if targs else (None, None)
    out = base
    if key:
        out += f"<{key}>"
    if dtype:
        out += f"[{dtype}]"
    return out


def short_names(full_names: Iterable[str]) -> dict[str, str]:
    """Map each distinct name in ``full_names`` to a short name, all distinct.

    Keys keep the order of first appearance. Where different full names share
    a short name, the group is ordered by full name (so the result does not
    depend on input order): the first keeps the short name, the others get
    ``#2``, ``#3``... (skipping any suffix already taken by another name).
    """
    out: dict[str, str] = {}
    for full in full_names:
        if full not in out:
            out[full] = short_name(full)
    groups: dict[str, list[str]] = {}
    for full, short in out.items():
        groups.setdefault(short, []).append(full)
    taken = set(groups)
    for short, fulls in groups.items():
        if len(fulls) < 2:
            continue
        fulls.sort()
        n = 1
        for full in fulls[1:]:
            n += 1
            while f"{short}#{n}" in taken:
                n += 1
            out[full] = f"{short}#{n}"
            taken.add(out[full])
    return out
