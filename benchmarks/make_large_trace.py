"""Generate a large Kineto trace by replicating a real one.

Each copy of the source trace's events is shifted in time by the source's span
(plus a gap) and every id that links events (External id, correlation, flow id,
Python id/parent id, Sequence number) is offset so that ids stay unique. The
text of each event is kept as Kineto wrote it, so the loader sees real layout.

    python benchmarks/make_large_trace.py SRC.json.gz OUT.json --mb 100 [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path

ID_FIELDS = rb'"External id"|"correlation"|"id"|"Python id"|"Python parent id"|"Sequence number"'
NUMBER_FIELD = re.compile(rb'(' + ID_FIELDS + rb'|"ts"): (-?\d+(?:\.\d+)?)')
EVENT_START = b"\n  {\n"


def split_trace(text: bytes) -> tuple[bytes, list[bytes], bytes]:
    """Header up to the first event, the event texts, and the tail after the last."""
    array_start = text.index(b"[", text.index(b'"traceEvents"')) + 1
    array_end = text.rindex(b"]", 0, text.rindex(b'"traceName"') if b'"traceName"' in text else len(text))
    body = text[array_start:array_end]
    parts = body.split(EVENT_START)
    events = [(b"\n  {\n" + p).rstrip().rstrip(b",") for p in parts[1:]]
    return text[:array_start], events, text[array_end:]


def ns(number: bytes) -> int:
    whole, _, frac = number.partition(b".")
    return int(whole) * 1000 + int((frac + b"000")[:3]) * (-1 if whole.startswith(b"-") else 1)


def make(src: Path, dst: Path, target_mb: float, compress: bool) -> int:
    text = gzip.open(src).read() if src.read_bytes()[:2] == b"\x1f\x8b" else src.read_bytes()
    header, events, tail = split_trace(text)
    metadata = [e for e in events if b'"ph": "M"' in e]
    replicated = [e for e in events if b'"ph": "M"' not in e]
    stamps = [ns(m.group(2)) for e in replicated for m in NUMBER_FIELD.finditer(e) if m.group(1) == b'"ts"']
    span_ns = max(stamps) - min(stamps) + 1_000_000
    id_stride = 1 + max(
        (int(m.group(2)) for e in replicated for m in NUMBER_FIELD.finditer(e) if m.group(1) != b'"ts"'),
        default=0,
    )
    copy_text = b",".join(replicated)
    target = int(target_mb * 1e6)
    opener = gzip.open if compress else open
    written = copies = 0
    with opener(dst, "wb") as out:
        out.write(header)
        out.write(b",".join(metadata))
        while written < target:
            def shift(m: re.Match, k=copies) -> bytes:
                if m.group(1) == b'"ts"':
                    t = ns(m.group(2)) + k * span_ns
                    return b'"ts": %d.%03d' % divmod(t, 1000)
                return m.group(1) + b": %d" % (int(m.group(2)) + k * id_stride)

            chunk = b"," + NUMBER_FIELD.sub(shift, copy_text)
            out.write(chunk)
            written += len(chunk)
            copies += 1
        out.write(b"\n" + tail.lstrip())
    return copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    copies = make(args.src, args.dst, args.mb, args.gzip)
    print(f"{args.dst}: {copies} copies of {args.src.name}")


if __name__ == "__main__":
    main()
