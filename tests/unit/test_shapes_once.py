"""The shapes blob keeps each record_shapes (or collective) text once, however the load was cut.

Ops repeat their shapes every step: a 1 GB trace's 919k ops hold a few hundred distinct texts,
which written out once per op were 138 MB, copied three times on the way to the blob. Each op's
span still reads its own text; which op it is does not change what the blob holds.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from kerneltui.trace import decode, scanner
from kerneltui.trace.load import read_trace
from tests.unit.test_scan import COMM, KERNEL, OP, trace_text

ROOT = Path(__file__).resolve().parents[2]
SHAPE_KEYS = (("Input Dims", "dims"), ("Input type", "types"), ("Concrete Inputs", "concrete"),
              ("Input Strides", "strides"))


def canonical(record: dict) -> str:
    return json.dumps(record, sort_keys=True)


def shapes_in_json(path: Path) -> Counter:
    """Each cpu_op's record_shapes, as the trace's own JSON holds them (an independent reading)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    records = Counter()
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and args.get("Input Dims"):
            record = {short: args[key] for key, short in SHAPE_KEYS if args.get(key)}
            record.setdefault("types", [])
            records[canonical(record)] += 1
    return records


def texts_of_rows(raw) -> list[bytes]:
    at, length = raw.columns["shapes_at"], raw.columns["shapes_len"]
    kept = at >= 0
    return [raw.shapes_blob[a : a + n] for a, n in zip(at[kept].tolist(), length[kept].tolist())]


@pytest.mark.parametrize("decoder", ["scanner", "python"])
@pytest.mark.parametrize("name", ["gpt_train_eager", "resnet18_train_eager"])
def test_every_op_reads_its_own_shapes_and_the_blob_holds_each_text_once(name, decoder, monkeypatch):
    if decoder == "python":
        monkeypatch.setenv("KERNELTUI_DECODER", "python")
        monkeypatch.setattr(decode, "SUB_CHUNK", 16 << 10)  # in parts, each part's texts joined in turn
    path = ROOT / "tests" / "data" / "traces" / f"{name}.json.gz"
    expected = shapes_in_json(path)
    raw, _ = read_trace(path)
    texts = texts_of_rows(raw)
    assert Counter(canonical(json.loads(t)) for t in texts) == expected
    distinct = set(texts)
    assert len(distinct) == len(expected) < len(texts)
    assert sum(map(len, distinct)) == len(raw.shapes_blob)  # nothing else, nothing twice


def test_a_chunk_scanned_keeps_a_repeated_text_once_at_its_first_place():
    other = OP.replace(b'"Input Dims": [[2, 3], [3, 4]]', b'"Input Dims": [[5, 6], [6, 7]]')
    chunk = b"[" + b",".join([OP, other, OP, KERNEL, COMM, OP]) + b"]"
    columns, *_, blob, _flows, _ts, _dur, _memory, rows = scanner.scan_chunk(chunk)
    cols = dict(zip((name for name, _ in scanner.COLUMNS), columns))
    at = memoryview(cols["shapes_at"]).cast("q").tolist()[:rows]
    first = len(b'{"dims":[[2, 3], [3, 4]],"types":["float", "float"],"concrete":["", ""],"strides":[[3, 1], [4, 1]]}')
    assert at == [0, first, 0, -1, 2 * first, 0]  # the second op's text after the first; the collective's last
    assert blob.count(b'"dims":[[2, 3], [3, 4]]') == 1 and blob.count(b'"dims":[[5, 6], [6, 7]]') == 1


def test_a_chunk_whose_parts_fail_late_forgets_the_texts_its_early_parts_added(tmp_path, monkeypatch):
    """Decoded in parts, a chunk that fails at its last part is decoded whole instead: the texts its
    first parts had added are forgotten with everything else they added, so no two texts share an
    offset and each op still reads its own."""
    monkeypatch.setenv("KERNELTUI_DECODER", "python")
    monkeypatch.setattr(decode, "SUB_CHUNK", 4 << 10)
    ops = [OP.replace(b'"Input Dims": [[2, 3]', b'"Input Dims": [[%d, 3]' % i) for i in range(200)]
    broken = OP.replace(b'"Sequence number": 4', b'"Sequence number": "four"')  # a part msgspec refuses
    path = tmp_path / "t.json"
    path.write_bytes(trace_text([*ops, broken, *ops[:5]]))
    raw, _ = read_trace(path)
    dims = [json.loads(t)["dims"][0][0] for t in texts_of_rows(raw)]
    assert dims == [*range(200), 2, *range(5)]
    assert len(raw.shapes_blob) == sum(map(len, set(texts_of_rows(raw))))
