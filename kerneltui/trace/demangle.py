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

__all__ = ["MAX_DEPTH", "MAX_MANGLED", "MAX_OUTPUT", "demangle", "is_mangled"]

MAX_MANGLED = 32_768  # characters tried; the longest real kernel name seen is 1,677
MAX_DEPTH = 96  # nesting of types / names / template arguments (real kernels: under 20)
MAX_OUTPUT = 262_144  # characters of demangled output (real kernels: 10,655 from 1,677)


class _Fail(Exception):
    """Not a name this demangler understands (or over a limit)."""


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


# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------

_BUILTIN = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char",
    "h": "unsigned char", "s": "short", "t": "unsigned short", "i": "int",
    "j": "unsigned int", "l": "long", "m": "unsigned long", "x": "long long",
    "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128",
    "f": "float", "d": "double", "e": "long double", "g": "__float128", "z": "...",
}
_BUILTIN_D = {
    "d": "decimal64", "e": "decimal128", "f": "decimal32", "h": "half",
    "i": "char32_t", "s": "char16_t", "u": "char8_t", "a": "auto",
    "c": "decltype(auto)", "n": "decltype(nullptr)",
}
# Literal suffixes, as libiberty prints ``L<type><value>E``: other types get ``(type)value``.
_LITERAL_SUFFIX = {
    "int": "", "unsigned int": "u", "long": "l", "unsigned long": "ul",
    "long long": "ll", "unsigned long long": "ull",
}
# Standard abbreviations: (printed form, class name for their constructors), as
# c++filt prints them (its verbose form: ``Ss`` is the full basic_string).
_STD_SUBST = {
    "a": ("std::allocator", "allocator"),
    "b": ("std::basic_string", "basic_string"),
    "s": ("std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "basic_string"),
    "i": ("std::basic_istream<char, std::char_traits<char> >", "basic_istream"),
    "o": ("std::basic_ostream<char, std::char_traits<char> >", "basic_ostream"),
    "d": ("std::basic_iostream<char, std::char_traits<char> >", "basic_iostream"),
}
_OPERATORS = {
    "nw": "new", "na": "new[]", "dl": "delete", "da": "delete[]", "ps": "+", "ng": "-",
    "ad": "&", "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/",
    "rm": "%", "an": "&", "or": "|", "eo": "^", "aS": "=", "pL": "+=", "mI": "-=",
    "mL": "*=", "dV": "/=", "rM": "%=", "aN": "&=", "oR": "|=", "eO": "^=",
    "ls": "<<", "rs": ">>", "lS": "<<=", "rS": ">>=", "eq": "==", "ne": "!=",
    "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "ss": "<=>", "nt": "!", "aa": "&&",
    "oo": "||", "pp": "++", "mm": "--", "cm": ",", "pm": "->*", "pt": "->",
    "cl": "()", "ix": "[]", "qu": "?", "aw": "co_await",
}

_UNARY = frozenset({"ps", "ng", "ad", "de", "co", "nt"})
_BINARY = frozenset(_OPERATORS) - _UNARY - {"nw", "na", "dl", "da", "pp", "mm", "cl", "ix", "qu", "aw"}

# Nodes are tuples, kind first:
#   ("name", text)                  ("qual", left, right)         ("tmpl", name, args)
#   ("builtin", text)               ("lit", type, value)          ("ptr"|"lref"|"rref", type)
#   ("cv", type, quals)             ("func", ret, params, quals)  ("array", dim, type)
#   ("ptrmem", cls, member)         ("pack", elems)               ("expand", pattern)
#   ("tparam", index)               ("local", encoding, entity)   ("enc", name, ret, params, quals)
#   ("lambda", params, number)      ("abi", node, tags)           ("vector", dim, type)
#   ("clone", node, suffix)
_VOID = ("builtin", "void")


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------


class _Parser:
    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)
        self.i = 0
        self.subs: list[tuple] = []
        self.depth = 0

    # -- cursor ---------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def eat(self, text: str) -> bool:
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.eat(text):
            raise _Fail

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Fail

    def leave(self) -> None:
        self.depth -= 1

    def number(self) -> str:
        """``[n]<digits>`` as text (``-`` for ``n``)."""
        neg = self.eat("n")
        j = self.i
        while j < self.n and self.s[j].isdigit():
            j += 1
        if j == self.i:
            raise _Fail
        text = self.s[self.i : j]
        self.i = j
        return "-" + text if neg else text

    def seq_id(self) -> int:
        """``_`` -> 0, ``<base 36>_`` -> value + 1 (substitutions, template parameters)."""
        if self.eat("_"):
            return 0
        j = self.i
        while j < self.n and (self.s[j].isdigit() or "A" <= self.s[j] <= "Z"):
            j += 1
        if j == self.i or j >= self.n or self.s[j] != "_":
            raise _Fail
        value = int(self.s[self.i : j], 36) + 1
        self.i = j + 1
        return value

    def compact_number(self) -> int:
        """``_`` -> 0, ``<number>_`` -> number + 1 (lambda / unnamed-type discriminators)."""
        if self.eat("_"):
            return 0
        value = int(self.number())
        self.expect("_")
        if value < 0:
            raise _Fail
        return value + 1

    def add(self, node: tuple) -> None:
        self.subs.append(node)

    # -- grammar ----------------------------------------------------------------
    def mangled_name(self) -> tuple:
        if not self.eat("_Z"):
            self.expect("__Z")  # Mach-O's extra underscore
        node = self.encoding()
        while self.peek() == ".":  # clones: .constprop.0, .cold ... (a word, then its numbers)
            j = self.i + 1
            while j < self.n and (self.s[j].isalpha() or self.s[j] == "_"):
                j += 1
            while j + 1 < self.n and self.s[j] == "." and self.s[j + 1].isdigit():
                j += 2
                while j < self.n and self.s[j].isdigit():
                    j += 1
            if j == self.i + 1:
                raise _Fail
            node = ("clone", node, self.s[self.i : j])
            self.i = j
        if self.i != self.n:
            raise _Fail
        return node

    def encoding(self) -> tuple:
        self.enter()
        if self.peek() in ("T", "G"):
            raise _Fail  # special names (vtables, guards, thunks): never kernels
        name, quals = self.name()
        if self.i >= self.n or self.peek() in ("E", "."):
            self.leave()
            return name
        ret = self.type() if _is_template_function(name) else None
        params = self.bare_function_type(("E", "."))
        self.leave()
        return ("enc", name, ret, params, quals)

    def bare_function_type(self, stops: tuple[str, ...]) -> tuple:
        params = []
        while self.i < self.n and self.peek() not in stops:
            params.append(self.type())
        if not params:
            raise _Fail
        if params == [_VOID]:
            return ()
        return tuple(params)

    def name(self) -> tuple[tuple, str]:
        """A name and the cv/ref qualifiers of a nested name (``NK...E``: a const member)."""
        self.enter()
        c = self.peek()
        quals = ""
        if c == "N":
            node, quals = self.nested_name()
        elif c == "Z":
            node, quals = self.local_name()
        elif c == "S" and self.peek(1) == "t":
            self.i += 2
            node = ("qual", ("name", "std"), self.unqualified_name(None))
            if self.peek() == "I":
                self.add(node)
                node = ("tmpl", node, self.template_args())
        elif c == "S":
            node = self.substitution()
            if self.peek() != "I":
                raise _Fail  # a bare substitution is a type, not a name
            node = ("tmpl", node, self.template_args())
        else:
            node = self.unqualified_name(None)
            if self.peek() == "I":
                self.add(node)
                node = ("tmpl", node, self.template_args())
        self.leave()
        return node, quals

    def nested_name(self) -> tuple[tuple, str]:
        self.expect("N")
        quals = self.cv_qualifiers()
        if self.eat("R"):
            quals += " &"
        elif self.eat("O"):
            quals += " &&"
        node: tuple | None = None
        while True:
            c = self.peek()
            if c == "":
                raise _Fail
            if c == "E":
                self.i += 1
                break
            if c == "S" and self.peek(1) == "t":
                if node is not None:
                    raise _Fail
                self.i += 2
                node = ("name", "std")
                continue  # "std" alone is not a substitution candidate
            if c == "S":
                if node is not None:
                    raise _Fail
                node = self.substitution()
                continue  # a substitution is not added again
            if c == "I":
                if node is None:
                    raise _Fail
                node = ("tmpl", node, self.template_args())
            elif c == "T":
                if node is not None:
                    raise _Fail
                node = self.template_param()
            elif c == "M":
                self.i += 1  # closure prefix of a data-member initializer's lambda
                continue
            elif c == "D" and self.peek(1) in ("t", "T"):
                raise _Fail  # decltype prefix
            else:
                part = self.unqualified_name(node)
                node = part if node is None else ("qual", node, part)
            if self.peek() != "E":
                self.add(node)
        if node is None:
            raise _Fail
        return node, quals

    def local_name(self) -> tuple[tuple, str]:
        """``Z <function> E <entity>``, and the entity's qualifiers (``NK...E``: a const member)."""
        self.expect("Z")
        enc = self.encoding()
        if enc[0] == "enc" and enc[2] is not None:
            enc = ("enc", enc[1], None, enc[3], enc[4])  # a local name's function prints without its return type
        self.expect("E")
        quals = ""
        if self.eat("s"):
            entity: tuple = ("name", "string literal")
        else:
            entity, quals = self.name()
        # discriminator: _<digit> or __<number>_ (not printed)
        if self.peek() == "_":
            if self.peek(1) == "_":
                self.i += 2
                self.number()
                self.expect("_")
            elif self.peek(1).isdigit():
                self.i += 2
        return ("local", enc, entity), quals

    def unqualified_name(self, parent: tuple | None) -> tuple:
        c = self.peek()
        if c.isdigit():
            node = ("name", self.source_name())
        elif c == "L":  # internal-linkage source name
            self.i += 1
            node = ("name", self.source_name())
            if self.peek() == "_" and self.peek(1).isdigit():
                self.i += 2
        elif c == "C" and self.peek(1) in ("1", "2", "3", "4", "5"):
            self.i += 2
            node = ("ctor", _class_name(parent))
        elif c == "C" and self.peek(1) == "I" and self.peek(2) in ("1", "2"):
            self.i += 3
            self.type()  # inheriting constructor: the base it inherits from
            node = ("ctor", _class_name(parent))
        elif c == "D" and self.peek(1) in ("0", "1", "2", "4", "5"):
            self.i += 2
            node = ("name", "~" + _class_name(parent))
        elif c == "U" and self.peek(1) == "t":
            self.i += 2
            node = ("name", f"{{unnamed type#{self.compact_number() + 1}}}")
        elif c == "U" and self.peek(1) == "l":
            self.i += 2
            params = self.bare_function_type(("E",))
            self.expect("E")
            node = ("lambda", params, self.compact_number() + 1)
        elif c.islower():
            node = self.operator_name()
        else:
            raise _Fail
        tags = []
        while self.eat("B"):
            tags.append(self.source_name())
        if tags:
            node = ("abi", node, tuple(tags))
        return node

    def operator_name(self) -> tuple:
        code = self.s[self.i : self.i + 2]
        self.i += 2
        if code == "cv":
            return ("conv", self.type())
        if code == "li":
            return ("name", f'operator"" {self.source_name()}')
        if code not in _OPERATORS:
            raise _Fail
        op = _OPERATORS[code]
        return ("name", f"operator {op}" if op[0].isalpha() else f"operator{op}")

    def source_name(self) -> str:
        length = int(self.number())
        if length <= 0 or self.i + length > self.n:
            raise _Fail
        text = self.s[self.i : self.i + length]
        self.i += length
        if text.startswith("_GLOBAL_") and len(text) > 9 and text[8] in "._$" and text[9] == "N":
            return "(anonymous namespace)"
        return text

    def cv_qualifiers(self) -> str:
        quals = ""
        if self.eat("r"):
            quals += " restrict"
        if self.eat("V"):
            quals += " volatile"
        if self.eat("K"):
            quals += " const"
        return quals

    def substitution(self) -> tuple:
        self.expect("S")
        c = self.peek()
        if c in _STD_SUBST:
            self.i += 1
            return ("stdsub", *_STD_SUBST[c])
        index = self.seq_id()
        if index >= len(self.subs):
            raise _Fail
        return self.subs[index]

    def template_param(self) -> tuple:
        self.expect("T")
        return ("tparam", self.seq_id())

    def template_args(self) -> tuple:
        self.enter()
        self.expect("I")
        args = []
        while not self.eat("E"):
            if self.i >= self.n:
                raise _Fail
            args.append(self.template_arg())
        self.leave()
        return tuple(args)

    def template_arg(self) -> tuple:
        c = self.peek()
        if c == "L":
            return self.expr_primary()
        if c == "J":
            self.enter()
            self.i += 1
            elems = []
            while not self.eat("E"):
                if self.i >= self.n:
                    raise _Fail
                elems.append(self.template_arg())
            self.leave()
            return ("pack", tuple(elems))
        if c == "X":
            self.i += 1
            node = self.expression()
            self.expect("E")
            return node
        return self.type()

    def expression(self) -> tuple:
        """The small part of ``<expression>`` that template arguments of kernels use:
        operators on template parameters and literals (``std::enable_if<(N>0)>``),
        and ``sr <type> <name>`` (``std::is_same<T, U>::value``)."""
        self.enter()
        c, code = self.peek(), self.s[self.i : self.i + 2]
        if c == "L":
            node = self.expr_primary()
        elif c == "T":
            node = self.template_param()
        elif code == "fp":
            self.i += 2
            self.cv_qualifiers()
            index = 0 if self.peek() == "_" else int(self.number()) + 1
            self.expect("_")
            node = ("name", "{parm#%d}" % (index + 1))
        elif c.isdigit():  # an unresolved name: std::is_same_v<T, U>
            node = ("name", self.source_name())
            if self.peek() == "I":
                node = ("tmpl", node, self.template_args())
        elif code == "sr":
            self.i += 2
            scope = self.type()
            member = ("name", self.source_name())
            if self.peek() == "I":
                member = ("tmpl", member, self.template_args())
            node = ("qual", scope, member)
        elif code in _UNARY:
            self.i += 2
            node = ("unary", _OPERATORS[code], self.expression())
        elif code in _BINARY:
            self.i += 2
            left = self.expression()
            node = ("binary", _OPERATORS[code], left, self.expression())
        elif code == "qu":
            self.i += 2
            cond = self.expression()
            then = self.expression()
            node = ("ternary", cond, then, self.expression())
        else:
            raise _Fail
        self.leave()
        return node

    def expr_primary(self) -> tuple:
        self.expect("L")
        if self.eat("_Z"):
            node = self.encoding()
            self.expect("E")
            return node
        t = self.type()
        if t[0] == "builtin" and t[1] in ("float", "double", "long double", "__float128"):
            j = self.s.find("E", self.i)
            if j < 0:
                raise _Fail
            value = f"[{self.s[self.i : j]}]"
            self.i = j
        elif self.peek() == "E":
            value = ""
        else:
            value = self.number()
        self.expect("E")
        return ("lit", t, value)

    def type(self) -> tuple:
        self.enter()
        node = self._type()
        self.leave()
        return node

    def _type(self) -> tuple:
        c = self.peek()
        if c in _BUILTIN:
            self.i += 1
            return ("builtin", _BUILTIN[c])
        if c in ("r", "V", "K"):
            quals = self.cv_qualifiers()
            inner = self.type()
            node = ("cv", inner, quals)
        elif c == "P":
            self.i += 1
            node = ("ptr", self.type())
        elif c == "R":
            self.i += 1
            node = ("lref", self.type())
        elif c == "O":
            self.i += 1
            node = ("rref", self.type())
        elif c == "F":
            self.i += 1
            self.eat("Y")
            ret = self.type()
            params = []
            quals = ""
            while not self.eat("E"):
                if self.i >= self.n:
                    raise _Fail
                if self.peek() in ("R", "O") and self.peek(1) == "E":
                    quals = " &" if self.peek() == "R" else " &&"
                    self.i += 1
                    continue
                params.append(self.type())
            node = ("func", ret, () if params == [_VOID] else tuple(params), quals)
        elif c == "A":
            self.i += 1
            dim = self.number() if self.peek().isdigit() else ""
            self.expect("_")
            node = ("array", dim, self.type())
        elif c == "M":
            self.i += 1
            cls = self.type()
            node = ("ptrmem", cls, self.type())
        elif c == "T":
            node = self.template_param()
            if self.peek() == "I":
                self.add(node)
                node = ("tmpl", node, self.template_args())
        elif c == "S" and self.peek(1) != "t":
            node = self.substitution()
            if self.peek() != "I":
                return node  # not added again
            node = ("tmpl", node, self.template_args())
        elif c == "D":
            d = self.peek(1)
            if d in _BUILTIN_D:
                self.i += 2
                return ("builtin", _BUILTIN_D[d])
            if d == "F":  # DF<N>_ _FloatN, DF<N>x _FloatNx, DF16b std::bfloat16_t
                self.i += 2
                bits = self.number()
                if self.eat("b") and bits == "16":
                    return ("builtin", "std::bfloat16_t")
                if self.eat("x"):
                    return ("builtin", f"_Float{bits}x")
                self.expect("_")
                return ("builtin", f"_Float{bits}")
            if d == "p":
                self.i += 2
                node = ("expand", self.type())
            elif d == "v":
                self.i += 2
                dim = self.number()
                self.expect("_")
                node = ("vector", dim, self.type())
            else:
                raise _Fail  # decltype and the rest
        elif c == "u":
            self.i += 1
            node = ("name", self.source_name())
        elif c.isdigit() or c in ("N", "Z", "S"):
            node, _ = self.name()
        else:
            raise _Fail
        self.add(node)
        return node


def _is_template_function(name: tuple) -> bool:
    """Whether an encoding's name is a function template (its signature then starts with the return type)."""
    while name[0] in ("qual", "local", "abi"):
        name = name[2] if name[0] != "abi" else name[1]
    if name[0] != "tmpl":
        return False
    inner = name[1]
    while inner[0] in ("qual", "abi"):
        inner = inner[2] if inner[0] == "qual" else inner[1]
    if inner[0] in ("conv", "ctor"):
        return False
    return not (inner[0] == "name" and inner[1].startswith("~"))


def _class_name(parent: tuple | None) -> str:
    """Name of the class whose constructor / destructor this is."""
    node = parent
    while node is not None:
        kind = node[0]
        if kind == "qual":
            node = node[2]
        elif kind in ("tmpl", "abi"):
            node = node[1]
        elif kind == "name":
            return node[1]
        elif kind == "stdsub":
            return node[2]
        else:
            break
    raise _Fail


# --------------------------------------------------------------------------
# Printing (GNU c++filt's conventions)
# --------------------------------------------------------------------------


class _Printer:
    def __init__(self) -> None:
        self.templates: list[tuple] = []  # template arguments of the enclosing function templates
        self.memo: dict[tuple[int, int, str], str] = {}
        self.depth = 0
        self.lambda_sig = 0
        self.made: list[tuple] = []  # nodes built while printing: kept alive, their ids key the memo

    def make(self, node: tuple) -> tuple:
        self.made.append(node)
        return node

    def top(self, node: tuple) -> str:
        return self.p(node)

    def check(self, text: str) -> str:
        if len(text) > MAX_OUTPUT:
            raise _Fail
        return text

    def p(self, node: tuple, inner: str = "") -> str:
        """``node`` printed with the declarator ``inner`` (``*``, ``&``, `` const`` ...) applied."""
        key = (id(node), id(self.templates[-1]) if self.templates else 0, inner, self.lambda_sig)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        self.depth += 1
        if self.depth > 4 * MAX_DEPTH:
            raise _Fail
        out = self.check(self._p(node, inner))
        self.depth -= 1
        self.memo[key] = out
        return out

    def _p(self, node: tuple, inner: str) -> str:
        kind = node[0]
        if kind == "ptr":
            return self.p(node[1], "*" + inner)
        if kind in ("lref", "rref"):
            target = node[1]
            while target[0] == "tparam" and not self.lambda_sig:
                target = self.tparam(target)
            if target[0] in ("lref", "rref"):  # reference collapsing: T& && is T&
                if kind == "rref" or target[0] == "lref":
                    return self.p(target, inner)
                return self.p(target[1], "&" + inner)
            return self.p(node[1], ("&" if kind == "lref" else "&&") + inner)
        if kind == "cv":
            target = node[1]
            while target[0] == "tparam" and not self.lambda_sig:
                target = self.tparam(target)
            if target[0] == "func":
                return self.func_type(target[1], target[2], node[2] + target[3], inner)
            if target[0] == "cv" and node[2] in target[2]:  # T const with T = U const
                return self.p(node[1], inner)
            if target[0] == "array":  # a const array is an array of const elements
                return self.p(self.make(("array", target[1], self.make(("cv", target[2], node[2])))), inner)
            return self.p(node[1], node[2] + inner)
        if kind == "func":
            return self.func_type(node[1], node[2], node[3], inner)
        if kind == "array":
            decl = f" ({inner})" if inner else ""
            return f"{self.p(node[2])}{decl} [{node[1]}]"
        if kind == "ptrmem":
            cls = self.p(node[1])
            member = node[2]
            if member[0] == "func" or (member[0] == "cv" and member[1][0] == "func"):
                return self.p(member, f"{cls}::*" + inner)
            return f"{self.p(member)} {cls}::*{inner}"
        if kind == "tparam":
            arg = self.tparam(node)
            if arg is None:
                return f"auto:{node[1] + 1}{inner}"
            if arg[0] == "pack":
                return ", ".join(self.p(e, inner) for e in arg[1])
            return self.p(arg, inner)
        return self.plain(node) + inner

    def tparam(self, node: tuple) -> tuple | None:
        """The argument a template parameter stands for (None in a lambda's signature,
        printed ``auto:N`` as libiberty does)."""
        if self.lambda_sig:
            return None
        if not self.templates or node[1] >= len(self.templates[-1]):
            raise _Fail
        return self.templates[-1][node[1]]

    def func_type(self, ret: tuple, params: tuple, quals: str, inner: str) -> str:
        decl = f"({inner})" if inner else ""
        return f"{self.p(ret)} {decl}({self.params(params)}){quals}"

    def params(self, params: tuple) -> str:
        return ", ".join(t for t in (self.param(p) for p in params) if t)

    def param(self, node: tuple) -> str:
        if node[0] == "expand":
            return self.expansion(node[1])
        return self.p(node)

    def expansion(self, pattern: tuple) -> str:
        """``Dp<pattern>``: the pattern once per element of the pack it names."""
        path, core = [], pattern
        while core[0] in ("ptr", "lref", "rref", "cv"):
            path.append(core)
            core = core[1]
        if core[0] == "tparam":
            arg = self.tparam(core)
            if arg is not None and arg[0] == "pack":
                out = []
                for e in arg[1]:
                    for m in reversed(path):  # rebuild the pattern around each element
                        e = self.make((m[0], e, m[2]) if m[0] == "cv" else (m[0], e))
                    out.append(self.p(e))
                return ", ".join(out)
        return self.p(pattern) + "..."

    def args(self, args: tuple) -> str:
        parts = []
        for a in args:
            if a[0] == "pack":
                parts.extend(self.p(e) for e in a[1])
            elif a[0] == "expand":
                parts.append(self.expansion(a[1]))
            else:
                text = self.p(a)
                if text:
                    parts.append(text)
        text = ", ".join(parts)
        return f"<{text} >" if text.endswith(">") else f"<{text}>"

    def plain(self, node: tuple) -> str:
        kind = node[0]
        if kind in ("name", "builtin", "ctor", "stdsub"):
            return node[1]
        if kind == "qual":
            return f"{self.p(node[1])}::{self.p(node[2])}"
        if kind == "tmpl":
            name = self.p(node[1])
            return name + (" " if name.endswith("<") else "") + self.args(node[2])
        if kind == "lit":
            return self.literal(node)
        if kind == "pack":
            return ", ".join(self.p(e) for e in node[1])
        if kind == "expand":
            return self.expansion(node[1])
        if kind == "local":
            return f"{self.p(node[1])}::{self.p(node[2])}"
        if kind == "enc":
            return self.encoding(node)
        if kind == "lambda":
            self.lambda_sig += 1
            sig = self.params(node[1])
            self.lambda_sig -= 1
            return f"{{lambda({sig})#{node[2]}}}"
        if kind == "abi":
            return self.p(node[1]) + "".join(f"[abi:{t}]" for t in node[2])
        if kind == "conv":
            return f"operator {self.p(node[1])}"
        if kind == "vector":
            return f"{self.p(node[2])} __vector({node[1]})"
        if kind == "unary":
            return node[1] + self.subexpr(node[2])
        if kind == "binary":
            text = f"{self.subexpr(node[2])}{node[1]}{self.subexpr(node[3])}"
            return f"({text})" if node[1] == ">" else text  # not the '>' that ends the arguments
        if kind == "ternary":
            return f"{self.subexpr(node[1])}?{self.subexpr(node[2])} : {self.subexpr(node[3])}"
        if kind == "clone":
            return f"{self.p(node[1])} [clone {node[2]}]"
        raise _Fail

    def subexpr(self, node: tuple) -> str:
        text = self.p(node)
        return text if node[0] in ("name", "qual") else f"({text})"

    def literal(self, node: tuple) -> str:
        t, value = node[1], node[2]
        if t[0] == "builtin":
            name = t[1]
            if name == "bool" and value in ("0", "1"):
                return "true" if value == "1" else "false"
            if name in _LITERAL_SUFFIX:
                return value + _LITERAL_SUFFIX[name]
            if name == "decltype(nullptr)" and not value:
                return "nullptr"
        return f"({self.p(t)}){value}"

    def encoding(self, node: tuple) -> str:
        _, name, ret, params, quals = node
        args = _template_args_of(name)
        if args is not None:
            self.templates.append(args)
        try:
            head = self.p(name)
            text = f"{head}({self.params(params)}){quals}"
            if ret is not None:
                core = ret
                while core[0] in ("ptr", "lref", "rref", "cv"):
                    core = core[1]
                if core[0] in ("func", "array") and core is not ret:
                    text = self.p(ret, text)  # returns a function pointer: void (*f(int))(float)
                else:
                    text = f"{self.p(ret)} {text}"
        finally:
            if args is not None:
                self.templates.pop()
        return text


def _template_args_of(name: tuple) -> tuple | None:
    """The template arguments a function's ``T_`` parameters refer to."""
    while name[0] in ("qual", "local", "abi"):
        name = name[2] if name[0] != "abi" else name[1]
    return name[2] if name[0] == "tmpl" else None
