"""Printing parsed nodes the way GNU c++filt (libiberty) does."""

from __future__ import annotations

from kerneltui.trace.demangle.vocabulary import (
    _LITERAL_SUFFIX,
    MAX_DEPTH,
    MAX_OUTPUT,
    _Fail,
    _template_args_of,
)


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
