"""Human units for times and sizes, shared by the reports and the screens."""

from __future__ import annotations

import math


def fmt_ns(ns: float) -> str:
    """A duration in at most 8 characters: 0.74µs, 178.9µs, 1.07ms, 2.31s."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    ns = float(ns)
    if abs(ns) < 10_000:
        return f"{ns / 1e3:.2f}µs"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f}µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.2f}ms"
    return f"{ns / 1e9:.2f}s"


_TICK_UNITS = ((1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs"), (1, "ns"))


def tick_unit(largest: int) -> int:
    """The unit (ns per unit) for tick labels of a window whose ticks reach ``|largest|`` ns."""
    largest = abs(int(largest))
    for size, _ in _TICK_UNITS:
        if largest >= size:
            return size
    return 1


def fmt_tick(ns: int, step: int, unit: int | None = None) -> str:
    """A tick time exact to its step, in one unit for the whole axis: ``17.842ms`` at a 2 µs
    step, ``17.84201ms`` at 10 ns, ``0.5s``; ``0`` for zero.

    ``unit`` (1, 1e3, 1e6 or 1e9 ns; default ``tick_unit(ns)``) should be the axis's
    ``tick_unit`` so that neighbouring labels share it. Decimals are exactly those the
    step needs, so two ticks one step apart never read the same, and the label parsed
    back is the tick time (integer arithmetic: no float rounding).
    """
    ns, step = int(ns), max(int(step), 1)
    if ns == 0:
        return "0"
    unit = tick_unit(ns) if unit is None else int(unit)
    name = dict(_TICK_UNITS)[unit]
    decimals = 0
    while decimals < 9 and (step * 10**decimals) % unit:
        decimals += 1
    whole, rest = divmod(abs(ns), unit)
    text = f"{whole:,}"
    if decimals:
        text += "." + str(rest * 10**decimals // unit).zfill(decimals)
    return ("-" if ns < 0 else "") + text + name


def plural(n: float, word: str) -> str:
    """'1 launch', '2 launches', '1,234 kernels'."""
    ending = "es" if word.endswith(("ch", "sh", "s", "x")) else "s"
    number = f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"
    return f"{number} {word}" if n == 1 else f"{number} {word}{ending}"


def fmt_bytes(n: float) -> str:
    if n is None or n < 0:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_share(x: float) -> str:
    return f"{100 * x:.1f}%"


def ellipsize(text: str, width: int) -> str:
    """Cut text to width, marking the cut with an ellipsis."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def middle_ellipsize(text: str, width: int) -> str:
    """Keep the head and the (longer) tail, where kernel names differ: `vectorize…CUDAKernelImpl>[bf16]`."""
    if len(text) <= width or width < 8:
        return ellipsize(text, width)
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


_CUT_SEPARATORS = "_ ,"  # dropped next to a "…": `dgrad…`, not `dgrad_…`
_OPENING = "<([{"  # start the piece they open: `kernel` | `<Functor>` | `[f32]`
_RARE_PIECES = 2  # pieces added for what sets a name apart in its column, beyond what tells it from its group


def _cut_tokens(name: str) -> list[str]:
    """``name`` in pieces that join back to it: opening brackets, a run of letters and
    digits, the other separators after it (``sm90_``, ``kernel``, ``<CUDAFunctor_``,
    ``add>``, ``[f32]``); a word of three or more letters is split from the number it
    labels (``tilesize`` | ``128x64x32_``)."""
    pieces: list[str] = []
    i, n = 0, len(name)
    while i < n:
        j = i
        while j < n and name[j] in _OPENING:
            j += 1
        k = j
        while k < n and name[k].isalpha():
            k += 1
        if k - j < 3 or k >= n or not name[k].isdigit():
            while k < n and name[k].isalnum():
                k += 1
            while k < n and not name[k].isalnum() and name[k] not in _OPENING:
                k += 1
        if k == i:  # a lone run of opening brackets at the end
            k = n
        pieces.append(name[i:k])
        i = k
    return pieces


def _core(piece: str) -> str:
    """What a piece says, without its brackets and separators."""
    return "".join(c for c in piece if c.isalnum()) or piece


def _render_cut(pieces: list[str], keep: list[int]) -> str:
    """The kept pieces in order (``keep`` sorted), an ellipsis for each run of dropped ones."""
    out: list[str] = []
    last = len(pieces) - 1
    kept = set(keep)
    prev = -1
    for i in keep:
        text = pieces[i]
        if i != prev + 1:
            out.append("…")
        if i != last and i + 1 not in kept:
            text = text.rstrip(_CUT_SEPARATORS) or text
        out.append(text)
        prev = i
    if prev != last:
        out.append("…")
    return "".join(out)


class _Cut:
    """The pieces of one name kept so far, within ``width``."""

    def __init__(self, pieces: list[str], keep: list[int], width: int) -> None:
        self.pieces, self.keep, self.width = pieces, sorted(keep), width
        self.used = len(_render_cut(pieces, self.keep))

    def text(self) -> str:
        return _render_cut(self.pieces, self.keep)

    def add(self, i: int) -> bool:
        """Keep piece ``i`` too, if the cut still fits."""
        if i in self.keep:
            return True
        if len(self.pieces[i].rstrip(_CUT_SEPARATORS)) > self.width - self.used + 1:
            return False  # cannot fit: no need to try
        trial = sorted([*self.keep, i])
        length = len(_render_cut(self.pieces, trial))
        if length > self.width:
            return False
        self.keep, self.used = trial, length
        return True

    def labelled(self, i: int) -> bool:
        """Whether piece ``i`` is a number glued to the word before it (``tilesize`` | ``128x64x32``)."""
        return i > 0 and self.pieces[i - 1][-1:].isalpha() and self.pieces[i][:1].isdigit()

    def add_with_label(self, i: int) -> bool:
        """Piece ``i`` with its label, or not at all (``align8``, not ``…8``)."""
        before = self.keep, self.used
        if not self.add(i):
            return False
        if self.labelled(i) and not self.add(i - 1):
            self.keep, self.used = before
            return False
        return True


def _postings(names: list[str], words: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each word: the names that have it."""
    postings: dict[str, set[str]] = {}
    for n in names:
        for w in set(words[n]):
            postings.setdefault(w, set()).add(n)
    return postings


def _distinct_group(group: list[str], column: list[str], width: int) -> dict[str, str]:
    """Cuts of names whose plain cuts collide: each keeps the pieces that tell it from
    the others of ``group``, then, room permitting, what sets it apart in ``column``.
    A name that no cut within ``width`` tells apart is left out."""
    pieces = {n: _cut_tokens(n) for n in column}
    words = {n: [_core(p) for p in ps] for n, ps in pieces.items()}
    in_group = _postings(group, words)
    in_column = _postings(column, words)
    out: dict[str, str] = {}
    for n in group:
        ps, ws = pieces[n], words[n]
        # pieces not in every name of the group, rarest first, then shorter, then earlier
        informative = sorted(
            (i for i, w in enumerate(ws) if len(in_group[w]) < len(group)),
            key=lambda i: (len(in_group[ws[i]]), len(ws[i]), i),
        )
        # the fewest of them that no other name of the group has all of
        others = set(group) - {n}
        telling_apart: list[int] = []
        for i in informative:
            if not others:
                break
            narrowed = others & in_group[ws[i]]
            if len(narrowed) < len(others):
                telling_apart.append(i)
                others = narrowed
        if others:
            continue  # the same pieces as another name
        cut = _Cut(ps, [0, *telling_apart], width)  # with the head when it fits
        if cut.used > width:
            cut = _Cut(ps, telling_apart, width)
            if cut.used > width:
                continue
        # the room left: up to two informative pieces that at most half the column has
        # (a word of one character says nothing alone; more would chop the name up),
        # labels of the numbers kept, the last piece (``[bf16]``), then the head and
        # the tail as far as each goes
        rare = sorted(
            (i for i in informative if 2 * len(in_column[ws[i]]) <= len(column) and len(ws[i]) > 1),
            key=lambda i: (len(in_column[ws[i]]), len(ws[i]), i),
        )
        added = 0
        for i in rare:
            if added == _RARE_PIECES:
                break
            if i not in cut.keep and cut.add(i):
                added += 1
        for i in list(cut.keep):
            if cut.labelled(i):
                cut.add(i - 1)
        cut.add_with_label(len(ps) - 1)
        i = 0
        while i < len(ps) and cut.add(i):
            i += 1
        i = len(ps) - 1
        while i >= 0 and cut.add_with_label(i):
            i -= 1
        out[n] = cut.text()
    return out


def distinct_cuts(names, width: int, cut=middle_ellipsize) -> dict[str, str]:
    """Fit names that are shown together (one table column) to ``width``, keeping them apart.

    Each name gets ``cut(name, width)`` (the plain middle cut by default) unless
    that collides with another name's: names that would read the same are cut
    around the pieces that differ instead, keeping the shared head and tail
    only as far as room allows (``sm90_xmma_dgrad…tilesize128x64x32…cudnn``
    beside ``sm90_xmma_dgrad…tilesize64x128x64…cudnn``). Names that fit are
    never changed; where no cut within ``width`` tells two names apart they
    keep the plain cut. Returns ``{name: shown}`` for each distinct name, in
    first-seen order. Linear in the total length of the names for the usual
    columns; names of the same group cost a set intersection per piece.
    """
    unique = list(dict.fromkeys(names))
    plain = {n: cut(n, width) for n in unique}
    out = dict(plain)
    if width < 8:
        return out
    long = [n for n in unique if len(n) > width]
    # Names that read the same are cut together. One group's cuts may meet
    # another's: groups that meet are merged and cut again (a few rounds at most).
    groups: list[set[str]] = []
    for _ in range(4):
        shown: dict[str, list[str]] = {}
        for n in long:
            shown.setdefault(out[n], []).append(n)
        clashes = [set(same) for same in shown.values() if len(same) > 1]
        if not clashes:
            break
        for clash in clashes:
            meeting = [g for g in groups if g & clash]
            groups = [g for g in groups if not g & clash]
            groups.append(clash.union(*meeting))
        for group in groups:
            ordered = [n for n in long if n in group]
            for n in ordered:
                out[n] = plain[n]
            out.update(_distinct_group(ordered, long, width))
    return out
