"""Parsing an Itanium-mangled name into nodes (tuples, kind first: vocabulary.py lists them)."""

from __future__ import annotations

from kerneltui.trace.demangle.vocabulary import (
    _BINARY,
    _BUILTIN,
    _BUILTIN_D,
    _OPERATORS,
    _STD_SUBST,
    _UNARY,
    _VOID,
    MAX_DEPTH,
    _class_name,
    _Fail,
    _is_template_function,
)


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
