"""Itanium C++ demangling for kernel names that a trace records mangled (``_ZN...``).

CUPTI and roctracer usually give demangled names, but not always: cuDNN's
CUTLASS convolution kernels come through as 1,600-character ``_ZN17cutlass__5x_cudnn6Kernel...``
(deep enough that the vendor demanglers give up), and AMD CK kernels as
``_ZN7ck_tile6kentry...`` (``DF16b``, the C++23 bfloat16 mangling). ``demangle``
turns them into the ``void ns::kernel<args>(params)`` form the other names have,
so ``names.short_name`` can shorten them with the same rules.

Why a small demangler of our own, rather than one of the two usual ways:

* ``ctypes`` + ``__cxa_demangle`` (libstdc++ / libc++abi): on this project's
  Linux machines (libstdc++ from GCC 12) it fails on every mangled name in the
  test traces (status -2: the CUTLASS names exceed its recursion limit, and it
  predates ``DF16b``); its output differs between libstdc++ and macOS's
  libc++abi, so exact-string tests could not hold on both; and a C demangler
  fed an untrusted name runs outside Python's control (it cannot be
  interrupted, and a stack overflow ends the viewer, not just the name).
* ``itanium_demangler`` 1.1 (pure Python, unmaintained since 2022): raises
  ``KeyError`` on ``DF16b`` (the CK names), ``NotImplementedError`` on lambdas
  (``Ul...E``) and local names (``Z...E``), which CUDA kernels are full of, and
  prints ``(int)64`` for literals, which the short-name rules would read as an
  ``int`` type.

This module covers the part of the Itanium ABI that kernel names use (nested
and template names, substitutions, template parameters and packs, literals,
lambdas and local names, function, pointer, reference, array and
pointer-to-member types, ``DF<N>b/_`` floats) and prints it the way GNU
``c++filt`` (libiberty) does, since that is the form CUPTI's demangled names
already take (``std::array<char*, 3ul> >``, ``void const*``,
``{lambda(float)#1}``). Anything else (expressions, ``decltype``, special
names such as vtables) is reported as a failure, never guessed.

Names come from untrusted files, so ``demangle`` never raises and never takes
long: input over ``MAX_MANGLED`` characters is not tried, nesting deeper than
``MAX_DEPTH`` fails, output over ``MAX_OUTPUT`` characters fails (substitutions
can make output exponential in the input), and printing is memoized per node so
shared substitutions cost their size once. On any failure the name comes back
unchanged.
"""

from __future__ import annotations

from functools import lru_cache

from kerneltui.trace.demangle.parse import _Parser
from kerneltui.trace.demangle.printer import _Printer
from kerneltui.trace.demangle.vocabulary import (
    MAX_DEPTH,
    MAX_MANGLED,
    MAX_OUTPUT,
    _Fail,
)

__all__ = ["MAX_DEPTH", "MAX_MANGLED", "MAX_OUTPUT", "demangle", "is_mangled"]


def is_mangled(name: str) -> bool:
    return name.startswith(("_Z", "__Z"))


@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-mangled name; ``name`` itself when it is
    not one, is over the limits, or cannot be demangled. Never raises.

    >>> demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_")
    'void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)'
    >>> demangle("_Z3fooPKcRf")
    'foo(char const*, float&)'
    >>> demangle("_Z3foo!")
    '_Z3foo!'
    """
    if not isinstance(name, str) or not is_mangled(name) or len(name) > MAX_MANGLED:
        return name
    try:
        out = _Printer().top(_Parser(name).mangled_name())
    except (_Fail, RecursionError, IndexError, ValueError, KeyError, TypeError):
        return name
    return out if out else name
