"""The demangler's vocabulary, shared by its parser and printer: limits, builtin types, operators, node shapes."""

from __future__ import annotations

MAX_MANGLED = 32_768  # characters tried; the longest real kernel name seen is 1,677
MAX_DEPTH = 96  # nesting of types / names / template arguments (real kernels: under 20)
MAX_OUTPUT = 262_144  # characters of demangled output (real kernels: 10,655 from 1,677)


class _Fail(Exception):
    """Not a name this demangler understands (or over a limit)."""


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


# What a node says about itself

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


def _template_args_of(name: tuple) -> tuple | None:
    """The template arguments a function's ``T_`` parameters refer to."""
    while name[0] in ("qual", "local", "abi"):
        name = name[2] if name[0] != "abi" else name[1]
    return name[2] if name[0] == "tmpl" else None
