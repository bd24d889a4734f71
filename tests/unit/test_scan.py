"""The C scanner (trace/_scan.c) against the Python decoder it stands in for.

Whatever the text, a load with the scanner must equal a load without it, field for field:
the scanner reads what it can read exactly as msgspec does and hands every other chunk back.
Each case below also pins which of the two read it, so a scanner that quietly gave up on
everything (or read what it should have handed back) fails here too.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import ahead, blocks, decode, pool, scanner, threads
from kerneltui.trace.load import read_trace
from tests import fuzzing

ROOT = Path(__file__).resolve().parents[2]

KERNEL = (b'{"ph": "X", "cat": "kernel", "name": "void gemm<128>(float*)", "pid": 0, "tid": 7, "ts": 10.5, '
          b'"dur": 2.25, "args": {"External id": 3, "correlation": 9, "device": 0, "stream": 7, "grid": [132, 2, 1], '
          b'"block": [128, 1, 1], "registers per thread": 32, "shared memory": 49152, '
          b'"est. achieved occupancy %": 50, "bytes": 0, "queued": 0, "blocks per SM": 2.5}}')
OP = (b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 9.0, "dur": 5.0, '
      b'"args": {"External id": 3, "Record function id": 0, "Sequence number": 4, "Fwd thread id": 0, '
      b'"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "Input Strides": [[3, 1], [4, 1]], '
      b'"Concrete Inputs": ["", ""], "kernel_hash": "c3xyz"}}')
LAUNCH = (b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 9.5, '
          b'"dur": 1.0, "args": {"External id": 3, "cbid": 211, "correlation": 9}}')
PYTHON = (b'{"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1, '
          b'"ts": 8.0, "dur": 8.0, "args": {"Python parent id": null, "Python id": 5, "Python thread": 0}}')
MEMORY = (b'{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, '
          b'"ts": 11.0, "args": {"Total Reserved": 2097152, "Bytes": 4096, "Addr": 1, "Device Id": 0}}')
COMM = (b'{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", '
        b'"pid": 0, "tid": 7, "ts": 20.0, "dur": 3.0, "args": {"External id": 4, "correlation": 10, "device": 0, '
        b'"stream": 7, "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, '
        b'"dtype": "Float", "Group size": 2, "Process Group Name": "0", "Seq": 3}}')
META = b'{"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "python3"}}'
LABELS = b'{"name": "process_labels", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}'
FLOW = b'{"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 9.5, "cat": "ac2g", "name": "ac2g"}'
BEGIN = b'{"ph": "B", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 7.0}'
END = b'{"ph": "E", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 19.0}'
EVERY_KIND = [META, LABELS, PYTHON, OP, LAUNCH, FLOW, KERNEL, MEMORY, BEGIN, END, COMM]


def trace_text(events: list[bytes]) -> bytes:
    """A Kineto-shaped file: one event a line, cut into chunks at "\\n  {"."""
    return (b'{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n  ' + b",\n  ".join(events)
            + b'\n], "traceName": "t.json"}')


@pytest.fixture(params=["threads", "one thread"])
def load_both(request, tmp_path, monkeypatch):
    """Load a text with the Python decoder and with the scanner, its chunks scanned ahead on threads or
    in the loading thread (KERNELTUI_WORKERS=0): (their difference, chunks the scanner read, chunks it
    handed back)."""
    if request.param == "threads":
        monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    else:
        monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    counts = {"read": 0, "handed back": 0}
    real = scanner._scan.scan

    def counting(*args):
        out = real(*args)
        counts["read" if out is not None else "handed back"] += 1
        return out

    monkeypatch.setattr(scanner._scan, "scan", counting)

    def run(text: bytes, name: str = "t.json"):
        path = tmp_path / name
        path.write_bytes(text)
        counts.update({"read": 0, "handed back": 0})
        return fuzzing.decoders_differ(str(path)), counts["read"], counts["handed back"]

    return run


def test_the_scanner_is_built():
    assert scanner._scan is not None, ("trace/_scan.c was not compiled: `pip install -e .` builds it where a C "
                                      "compiler is found; without it every load takes the Python decoder")
    assert scanner.scanner_in_use()


def test_every_kind_of_event_is_read_by_the_scanner_as_the_python_decoder_reads_it(load_both, tmp_path, monkeypatch):
    assert load_both(trace_text(EVERY_KIND)) == (None, 1, 0)
    raw, meta = read_trace(tmp_path / "t.json")
    assert len(raw.columns["ts"]) == 7  # the 6 X and i events, and the B/E pair as one; not M or s
    assert meta.metadata_events == 2 and meta.flow_events == 1
    assert raw.shapes_blob == (b'{"dims":[[2, 3], [3, 4]],"types":["float", "float"],"concrete":["", ""],'
                               b'"strides":[[3, 1], [4, 1]]}{"comm":{"collective":"allreduce","in_nelems":1024,'
                               b'"out_nelems":1024,"dtype":"Float","group":"0","group_size":2,"seq":3}}')


READ_BY_THE_SCANNER = {
    "escapes and surrogate pairs in a name": KERNEL.replace(b'"void gemm<128>(float*)"', b'"a\\"b\\\\c\\u00e9\\ud83d\\ude00\\n\\t\\/"'),
    "UTF-8 in a name": KERNEL.replace(b"gemm", "gemm_ñ_核".encode()),
    "ids as strings": KERNEL.replace(b'"pid": 0, "tid": 7', b'"pid": "Spans", "tid": "stream 7"'),
    "an exponent and 17 digits": KERNEL.replace(b'"ts": 10.5, "dur": 2.25', b'"ts": 1234567890123.4567, "dur": 2.5e-3'),
    "a negative dur (a lost field)": KERNEL.replace(b'"dur": 2.25', b'"dur": -1'),
    "no ts (a lost event)": KERNEL.replace(b'"ts": 10.5, ', b""),
    "a ts past 2**52 us": KERNEL.replace(b'"ts": 10.5', b'"ts": 1e300'),
    "null and empty args": KERNEL.replace(rb'"args": {', b'"args": null, "more": {'),
    "occupancy out of range": KERNEL.replace(b'"est. achieved occupancy %": 50', b'"est. achieved occupancy %": 150.5'),
    "null grid": KERNEL.replace(b'"grid": [132, 2, 1]', b'"grid": null'),
    "int64 bounds": KERNEL.replace(b'"External id": 3, "correlation": 9',
                                   b'"External id": 9223372036854775807, "correlation": -9223372036854775808'),
    "nested unknown fields": KERNEL.replace(b'"queued": 0', b'"queued": {"a": [1, {"b": [true, false, null]}], "c": "d"}'),
    "shapes without types": OP.replace(b'"Input type": ["float", "float"], ', b""),
    "pretty-printed": KERNEL.replace(b", ", b",\n      ").replace(b": ", b" :  "),
    "torch 1.8's spelling inside a longer name": KERNEL.replace(b'"void gemm<128>(float*)"', b'"an external id"'),
    "compact, no spaces": KERNEL.replace(b", ", b",").replace(b": ", b":"),
    "a line break after a comma in an array": KERNEL.replace(b'"queued": 0', b'"queued": [1, \n2]'),
    # a key is read in one load of sixteen bytes when it is shorter and plain
    "unknown keys of 15, 16 and 17 bytes, and one not ASCII": KERNEL.replace(
        b'"queued": 0', b'"fifteen_bytes_k": 1, "sixteen_bytes_ke": 2, "seventeen_bytes_k": 3, "cl\xc3\xa9": 4'),
}


@pytest.mark.parametrize("case", READ_BY_THE_SCANNER)
def test_text_the_scanner_reads_itself(load_both, case):
    assert load_both(trace_text([META, READ_BY_THE_SCANNER[case], OP, KERNEL])) == (None, 1, 0)


HANDED_BACK = {
    "a duplicate field (msgspec keeps the last)": KERNEL.replace(b'"ts": 10.5', b'"ts": 1.0, "ts": 10.5'),
    "an escaped key": KERNEL.replace(b'"ts": 10.5', b'"\\u0074s": 10.5'),
    "a device past int16": KERNEL.replace(b'"device": 0', b'"device": 70000'),
    "a stream written as text (ROCm)": KERNEL.replace(b'"stream": 7', b'"stream": "0x0"'),
    "a ts written as text (msgspec coerces it)": KERNEL.replace(b'"ts": 10.5', b'"ts": "10.5"'),
    "a float where an int goes": KERNEL.replace(b'"External id": 3', b'"External id": 3.0'),
    "a grid of two": KERNEL.replace(b'"grid": [132, 2, 1]', b'"grid": [132, 2]'),
    "NaN": KERNEL.replace(b'"dur": 2.25', b'"dur": NaN'),
    "a control character": KERNEL.replace(b"gemm", b"ge\x01mm"),
    "a lone high surrogate (kept as its escape text)": KERNEL.replace(b"gemm", b"ge\\ud83dmm"),
    "a lone low surrogate in a skipped field": KERNEL.replace(b'"queued": 0', b'"queued": "\\udc00"'),
    "bad UTF-8 in a skipped field": KERNEL.replace(b'"queued": 0', b'"queued": "\xff\xfe"'),
    "an event that is not an object": b"[1, 2]",
    "torch 1.8's external id": KERNEL.replace(b'"External id"', b'"external id"'),
    # decode_events rewrites the spelling wherever the text holds it, values included
    "its spelling as a name": KERNEL.replace(b'"void gemm<128>(float*)"', b'"external id"'),
    "its spelling after an escaped quote": KERNEL.replace(b'"void gemm<128>(float*)"', b'"a \\"external id"'),
    "nesting past the scanner's depth": KERNEL.replace(b'"queued": 0', b'"queued": ' + b"[" * 300 + b"]" * 300),
    # digits then one of ":;<=>?" (a byte test for digits must not take them for digits), a bare "."
    "digits then a ';' in a skipped field": KERNEL.replace(b'"queued": 0', b'"queued": 12;3'),
    "digits then a '?' in a read field": KERNEL.replace(b'"External id": 3', b'"External id": 3?'),
    "a number ending in '.'": KERNEL.replace(b'"queued": 0', b'"queued": 1.'),
}


@pytest.mark.parametrize("case", HANDED_BACK)
def test_text_the_scanner_hands_to_the_python_decoder(load_both, case):
    assert load_both(trace_text([META, HANDED_BACK[case], OP, KERNEL])) == (None, 0, 1)


def test_numbers_of_every_length_read_as_the_python_decoder_reads_them(load_both):
    """Numbers are read eight digits at a time where 64 bytes of text follow them, byte by byte where
    fewer do or past 19 significant digits: times, durations and ids of 1-24 digits, fractions of 0-26
    digits (leading zeros too), exponents, in read and skipped fields, the last ones at the text's end."""
    rng = random.Random(5)

    def digits(n: int) -> str:
        return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(n - 1))

    numbers = []
    for whole in range(25):
        for fraction in range(27):
            zeros = rng.randint(0, fraction - 1) if fraction and not whole else 0
            numbers.append((digits(whole) if whole else "0")
                           + ("." + "0" * zeros + digits(fraction - zeros) if fraction else ""))
    numbers += ["-0", "-0.0", "0.0", "1e5", "2.5E-3", "-7.25e+2", "0.000000000000000000000001"]
    events = [META]
    for i, number in enumerate(numbers):
        ts = number.lstrip("-") if i % 2 else "5178923592472.883"
        event = (KERNEL.replace(b'"ts": 10.5', b'"ts": ' + ts.encode()).replace(b'"dur": 2.25', b'"dur": ' + number.encode())
                 .replace(b'"blocks per SM": 2.5', b'"blocks per SM": ' + number.encode())
                 .replace(b'"grid": [132, 2, 1]', b'"grid": [132, 2, 1], "dims": [[' + number.encode() + b", 1]]"))
        if "." not in number and "e" not in number.lower() and len(number.lstrip("-")) < 19:
            event = event.replace(b'"External id": 3', b'"External id": ' + number.encode())
        events.append(event)
    assert load_both(trace_text(events)) == (None, 1, 0)


def test_keys_at_the_places_of_the_last_events_keys_are_read_as_the_python_decoder_reads_them(load_both):
    """Each place in an event (and its args, by cat) remembers the text that led to its value last time
    (the ',' and whitespace after the value before, the key, its ':' and spaces) and takes the next
    that matches it byte for byte: keys that change order, length, spacing or shape at a remembered
    place, separators that change, a member past the last one's place, a place past the 24
    remembered, keys past 40 bytes, events that alternate shapes, and a duplicate met at a remembered
    place (handed back, as msgspec keeps the last)."""
    many_args = b", ".join(b'"arg%d": %d' % (i, i) for i in range(30))
    variants = [
        KERNEL,
        KERNEL.replace(b'"ph": "X", "cat": "kernel"', b'"cat": "kernel", "ph": "X"'),  # two places swapped
        KERNEL.replace(b'"ts": 10.5', b'"ts":  10.5'),  # more space before a value
        KERNEL.replace(b'"ts": 10.5', b'"ts":10.5'),
        KERNEL.replace(b'"ts": 10.5', b'"ts" : 10.5'),
        KERNEL.replace(b'"device": 0', b'"devices": 0, "device": 0'),  # a longer key with the same start
        KERNEL.replace(b'"device": 0', b'"devic": 0'),  # a shorter one
        KERNEL.replace(b'"queued": 0', b'"queued": 0, ' + many_args),  # places past those remembered
        KERNEL.replace(b'"queued": 0', b'"a key of well over forty bytes, which is not remembered": 0'),
        KERNEL.replace(b'"queued": 0', b'"a_key_of_well_over_forty_bytes_which_is_not_remembered": 0'),
        KERNEL.replace(b'"stream": 7', b'"stream": 7, "registers per threa": 1'),
        KERNEL.replace(b", ", b",\n    "),  # what stands between the members changes
        KERNEL.replace(b'"dur": 2.25,', b'"dur": 2.25 ,'),
        KERNEL.replace(b'"dur": 2.25,', b'"dur": 2.25\n,'),
        KERNEL.replace(b'"blocks per SM": 2.5}}', b'"blocks per SM": 2.5, "more": 1}}'),  # a member past the last
        OP, LAUNCH, PYTHON, MEMORY, FLOW, COMM, META, LABELS,
    ]
    rng = random.Random(3)
    events = [META] + [rng.choice(variants) for _ in range(400)]
    assert load_both(trace_text(events)) == (None, 1, 0)
    duplicate = KERNEL.replace(b'"dur": 2.25', b'"dur": 2.25, "ts": 11.5')  # "ts" where "dur" stood
    assert load_both(trace_text([META, KERNEL, KERNEL, duplicate, KERNEL])) == (None, 0, 1)
    # a key over 40 bytes, in the same place twice in a row: read each time, never remembered cut short
    long_key = KERNEL.replace(b'"queued": 0', b'"a_key_of_well_over_forty_bytes_which_is_not_remembered": 0')
    assert load_both(trace_text([META, long_key, long_key, long_key])) == (None, 1, 0)
    # a ',' before an event's first key, where the text of the place after it would match
    comma_first = KERNEL.replace(b'{"ph": "X", "cat": "kernel", ', b'{, "cat": "kernel", "ph": "X", ')
    assert load_both(trace_text([META, KERNEL, comma_first])) == (None, 0, 1)
    # the second "ts" stands where the last event's did: taken as remembered, still a duplicate
    first = b'{"name": "k", "ts": 1.5, "ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "dur": 1}'
    second = b'{"ts": 1.5, "ts": 2.5, "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1}'
    assert load_both(trace_text([META, first, second])) == (None, 0, 1)
    escaped = KERNEL.replace(b'"ts": 10.5', b'"\\u0074s": 10.5')  # at the place of a plain "ts"
    assert load_both(trace_text([META, KERNEL, escaped])) == (None, 0, 1)


@pytest.mark.parametrize("length", range(17, 25))
def test_ids_of_17_to_24_digits_read_as_the_python_decoder_reads_them(load_both, length):
    """Past 19 digits an id no longer fits int64: the scanner hands such a chunk back."""
    for sign in ("", "-"):
        number = sign + "9" + "8" * (length - 2) + "7"
        event = KERNEL.replace(b'"External id": 3', b'"External id": ' + number.encode())
        fits = -(2**63) <= int(number) < 2**63
        assert load_both(trace_text([META, event, OP, KERNEL])) == ((None, 1, 0) if fits else (None, 0, 1)), number


# a string's bytes are checked sixteen at a time: each of these at every offset of a name's first two blocks
# of sixteen and past them (True: the scanner reads it; False: it hands the chunk back)
IN_A_LONG_NAME = {b"\\n": True, "é".encode(): True, b"\x7f": True, b"\x1f": False, b"\xff": False}


@pytest.mark.parametrize("byte", IN_A_LONG_NAME, ids=repr)
def test_a_special_byte_anywhere_in_a_long_name(load_both, byte):
    for at in range(34):
        name = b"n" * at + byte + b"m" * (45 - at)
        text = trace_text([META, KERNEL.replace(b"void gemm<128>(float*)", name), OP])
        assert load_both(text) == ((None, 1, 0) if IN_A_LONG_NAME[byte] else (None, 0, 1)), at


def test_every_trace_in_the_repository_loads_the_same_with_and_without_the_scanner(load_both):
    files = [f for folder in ("traces", "tests/data/traces", "tests/data/external", "tests/data/synthetic")
             for f in sorted((ROOT / folder).glob("*.json*")) if ".truth." not in f.name]
    assert len(files) >= 30
    read_somewhere, handed_back = set(), set()
    for f in files:
        difference, read, back = load_both(f.read_bytes(), f.name)
        assert difference is None, (f.name, difference)
        if read:
            read_somewhere.add(f.name)
        if back:
            handed_back.add(f.name)
    assert {"gpt_train_eager.json.gz", "resnet18_train_compiled.json.gz", "tracelens__b200__eager_trace.json.gz",
            "hta__nccl_parser_config__nccl_data.json.gz"} <= read_somewhere
    # ROCm's "stream": "0x0", torch 1.8's "external id" and a NaN ts are the Python path's to repair
    assert handed_back == {"hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                           "kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz", "nan_ts.json"}


def test_chunks_scanned_ahead_on_threads_come_back_in_file_order(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    monkeypatch.setattr(blocks, "BLOCK", 64 << 10)  # dozens of chunks, several in flight at once
    adopted = []
    adopt = decode.ChunkDecoder.adopt
    monkeypatch.setattr(decode.ChunkDecoder, "adopt", lambda self, out, text: adopted.append(1) or adopt(self, out, text))
    path = ROOT / "tests" / "data" / "traces" / "gpt_train_eager.json.gz"
    assert fuzzing.decoders_differ(str(path)) is None
    assert len(adopted) > 20


def test_a_load_in_place_reads_as_the_python_decoder_wherever_blocks_and_pieces_fall(tmp_path, monkeypatch):
    """The scan-ahead load fills reused buffers a piece at a time, looks for the array's end as each
    piece lands, and scans each chunk where it lies: an end straddling a piece or a block, events
    longer than a block, plain and gzipped, all load as the Python decoder loads them."""
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    in_place = []
    real = scanner._scan.scan
    monkeypatch.setattr(scanner._scan, "scan", lambda text, classify, bare=False, reuse=None:
                        in_place.append(bare) or real(text, classify, bare, reuse))
    # a B/E op with shapes: its halves wait for the end of the load while the buffers are reused
    begin = BEGIN.replace(b'"cat": "user_annotation"', b'"cat": "cpu_op"').replace(
        b'"ts": 7.0}', b'"ts": 7.0, "args": {"Input Dims": [[777, 888]], "Input type": ["float"]}}')
    end = END.replace(b'"cat": "user_annotation"', b'"cat": "cpu_op"')
    text = trace_text([META, OP, LAUNCH, begin, KERNEL, *EVERY_KIND, end] * 3)
    for block, piece in ((64, 16), (97, 7), (700, 64), (2000, 2000)):
        monkeypatch.setattr(blocks, "BLOCK", block)
        monkeypatch.setattr(blocks, "PIECE", piece)
        for shift in range(0, 24, 5):  # the end's "\n]" at other places in a piece and a block
            for name, data in (("t.json", b" " * shift + text), ("t.json.gz", gzip.compress(b"\n" * shift + text))):
                path = tmp_path / name
                path.write_bytes(data)
                assert fuzzing.decoders_differ(str(path)) is None, (block, piece, shift, name)
    assert in_place.count(True) > 50  # chunks were scanned where they lie, not handed back or bracketed
    raw, _ = read_trace(tmp_path / "t.json")
    at, length = raw.columns["shapes_at"], raw.columns["shapes_len"]
    texts = [raw.shapes_blob[a : a + n] for a, n in zip(at[at >= 0].tolist(), length[at >= 0].tolist())]
    assert texts.count(b'{"dims":[[777, 888]],"types":["float"]}') == 3  # the B/E ops' own shapes


def test_a_load_in_place_reuses_its_buffers(monkeypatch):
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    monkeypatch.setattr(blocks, "BLOCK", 64 << 10)
    takers = []
    take = ahead.Buffers.take
    monkeypatch.setattr(ahead.Buffers, "take", lambda self, size: takers.append(self) or take(self, size))
    read_trace(ROOT / "tests" / "data" / "traces" / "gpt_train_eager.json.gz")
    assert len(takers) > 30 and len(set(takers)) == 1
    # the chunks in flight (ScanAhead.limit) and the one filling, and one to replace the first, shorter block's
    assert takers[0].made <= ahead.scan_threads() + 3


@pytest.mark.parametrize("mappings", [True, False])
def test_block_memory_is_zeroed_room_the_loader_can_fill_and_search(monkeypatch, mappings, tmp_path):
    """A block's buffer: a private anonymous mapping, asked for huge pages where the system has them, where
    there are such mappings, else a bytearray; either starts zeroed, takes readinto and slices, and
    answers rfind as load.py asks it."""
    import mmap

    advised = []

    class Recorded(mmap.mmap):
        def madvise(self, option, *args):
            advised.append(option)
            return super().madvise(option, *args)

    monkeypatch.setattr(mmap, "mmap", Recorded)
    if not mappings:
        monkeypatch.delattr(mmap, "MAP_ANONYMOUS", raising=False)
    can_map = hasattr(mmap, "MAP_ANONYMOUS") and hasattr(mmap, "MAP_PRIVATE")
    block = ahead.block_memory(3 << 20)
    assert isinstance(block, Recorded if can_map else bytearray)
    assert advised == ([mmap.MADV_HUGEPAGE] if can_map and hasattr(mmap, "MADV_HUGEPAGE") else [])
    assert len(block) == 3 << 20 and bytes(block) == bytes(3 << 20)
    path = tmp_path / "t.json"
    path.write_bytes(b'[\n  {"a": 1},\n  {"b": 2}\n]')
    block[:3] = b"xyz"
    with open(path, "rb", buffering=0) as f:
        assert f.readinto(memoryview(block)[3:100]) == 26
    assert block.rfind(b"\n  {", 0, 30) == 16 and block[0] == ord("x")


def test_a_process_forked_after_a_load_still_loads(tmp_path, monkeypatch):
    """A fork copies the scan threads' executor but not its threads: the child must make its own."""
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    path = ROOT / "tests" / "data" / "traces" / "gpt_train_eager.json.gz"
    rows = len(read_trace(path)[0].columns["ts"])
    assert "kerneltui-scan" in threads._pools  # the scan threads' pool, which the fork copies
    pid = os.fork()
    if pid == 0:  # the child: exit 0 if it loads the same rows
        try:
            os._exit(0 if len(read_trace(path)[0].columns["ts"]) == rows else 3)
        except BaseException:
            os._exit(4)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's load did not finish in 60 s")


def test_the_array_end_is_found_where_the_regex_finds_it():
    rng = random.Random(5)
    for _ in range(20000):
        # past 32 bytes too: the scanner rules out 32 at a time; "\r", a control byte and a non-ASCII one
        # before a "]" are let through by that test and ruled out after it
        text = bytes(rng.choice(b" \t\n]]x{\r\x01\xa9") for _ in range(rng.randint(0, rng.choice((12, 80)))))
        indent, start = rng.randint(0, 3), rng.randint(0, len(text))
        found = re.compile(rb"\n[ \t]{0,%d}\]" % indent).search(text, start)
        assert scanner._scan.array_end(text, start, indent) == (None if found is None else found.span()), (text, start)


def test_workers_are_off_by_default_with_the_scanner_and_a_bad_setting_is_one_message(monkeypatch):
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    assert pool.worker_count() == 0
    monkeypatch.setenv("KERNELTUI_DECODER", "python")
    assert pool.worker_count() >= 1
    monkeypatch.setenv("KERNELTUI_WORKERS", "")
    assert pool.worker_count() >= 1  # set but empty: as if unset
    monkeypatch.setenv("KERNELTUI_WORKERS", "two")
    with pytest.raises(TraceError, match="^KERNELTUI_WORKERS must be a whole number, not 'two'$"):
        pool.worker_count()


def test_fuzz_mutants_load_the_same_with_and_without_the_scanner(tmp_path_factory):
    """300 mutants of the real traces, every class (benchmarks/fuzz.py checks thousands the same way)."""
    cache = tmp_path_factory.mktemp("fuzz-cache")
    bases = fuzzing.prepare_bases(fuzzing.seed_files(), cache=cache, max_events=400, windows=1, raw_limit=4 << 20)
    classes = tuple(c for c in fuzzing.CLASSES if c != "many_kernels")
    folder = tmp_path_factory.mktemp("mutants")
    read = 0
    real = scanner._scan.scan

    def counting(*args):
        nonlocal read
        out = real(*args)
        read += out is not None
        return out

    scanner._scan.scan = counting
    try:
        for index in range(300):
            mutant = fuzzing.make_mutant(index, 20261201, bases, classes)
            if mutant.kind != "file" or mutant.isolate:
                continue
            path = fuzzing.write_mutant(mutant, folder)
            assert fuzzing.decoders_differ(path) is None, (index, mutant.cls, mutant.info, path)
    finally:
        scanner._scan.scan = real
    assert read > 100  # the scanner read most of them; the damaged ones went to the Python decoder


def test_thousands_of_distinct_names_grow_the_tables_safely(load_both):
    """Each table grows at 128, 256, ... keys; it once read the new id from the slots it had just freed
    (wrong lane and name codes now and then; a segfault from 4,096 names, in a fresh process)."""
    events = [b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": %d, "ts": %d, "dur": 1}' % (i, i % 700, i)
              for i in range(5000)]
    assert load_both(trace_text(events)) == (None, 1, 0)
    # the scanner alone in a fresh process (no numpy to raise malloc's mmap threshold): a freed table is
    # unmapped there, so reading it faults
    fresh = subprocess.run([sys.executable, "-c", (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('_scan', sys.argv[1])\n"
        "scan = importlib.util.module_from_spec(spec); spec.loader.exec_module(scan)\n"
        "for n in (4096, 8192, 20000):\n"
        "    text = ('[' + ','.join('{\"ph\":\"X\",\"name\":\"n%d\",\"ts\":1}' % i for i in range(n)) + ']').encode()\n"
        "    out = scan.scan(text, lambda ph, cat: 1 << 8)\n"
        "    assert out[1] == ['n%d' % i for i in range(n)], n\n"
        "    assert out[-1] == n and list(memoryview(out[0][2]).cast('i'))[:n] == list(range(n)), n\n"), scanner._scan.__file__],
        capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr[-2000:]


def test_events_alternating_between_combos_read_as_the_python_decoder_reads_them(load_both):
    """The scanner remembers recent (ph, cat, pid, tid) combos, in a few slots by a hash of them, and
    compares an event's fields with what its slot holds instead of building the combo's key. Each field
    is swept here between two events of one combo, so that some of the sweep shares the combo's slot:
    the pid, the tid, an id given as a string, ph, and cats of one length that differ inside (the hash
    reads only their ends). Also: ids and cats it does not remember (a cat over 32 bytes), an event
    whose fields are an empty slot's, and a combo whose first event is dropped (ts past 2**52 us)
    before its lane is made; then many combos at random. All of it comes out as the Python path reads it."""
    base = {"ph": b"X", "cat": b"cpu_op", "pid": b"1", "tid": b"1"}

    def event(n: int, **fields) -> bytes:
        f = {**base, **fields}
        return (b'{"ph": "%s", "cat": "%s", "name": "n%d", "pid": %s, "tid": %s, "ts": %d, "dur": 1}'
                % (f["ph"], f["cat"], n % 7, f["pid"], f["tid"], n))

    sweeps = [{"pid": b"%d" % k} for k in range(2, 302)] + [{"tid": b"%d" % -k} for k in range(1, 301)]
    sweeps += [{"pid": b'"1"'}, {"tid": b'"1"'}, {"ph": b"i"}, {"ph": b"XX"}, {"cat": b"c" * 32}, {"cat": b"c" * 33}]
    sweeps += [{"cat": b"c%04dp" % k} for k in range(300)]  # "cpu_op"'s length and ends
    # fields that differ where the hash does not look: ph "i" and ")" are equal mod 64, and "kernelV"
    # lands in "kernel"'s slot (same ids): only the ph bytes' and the cat length's compares tell them apart
    sweeps += [{"ph": b"i"}, {"ph": b")"}, {"cat": b"kernel"}, {"cat": b"kernelV"}, {"cat": b"kernel"}]
    events = [b'{"name": "bare", "pid": 0, "tid": 0, "ts": 1, "dur": 1}',  # an empty slot's fields
              b'{"ph": "X", "cat": "kernel", "name": "late", "pid": 2, "tid": 2, "ts": 1e300, "dur": 1}']
    for n, fields in enumerate(sweeps):
        events += [event(3 * n), event(3 * n + 1, **fields), event(3 * n + 2)]
    events.append(b'{"ph": "X", "cat": "kernel", "name": "late", "pid": 2, "tid": 2, "ts": 5, "dur": 1}')
    # and many combos at random, more than there are slots, some of their ids strings
    pick = random.Random(7)
    for n in range(len(events), len(events) + 12000):
        ids = {key: b'"%d"' % pick.randrange(3) if pick.random() < 0.1 else b"%d" % pick.randrange(-2, 100)
               for key in ("pid", "tid")}
        events.append(event(n, ph=pick.choice([b"X", b"i", b"XX"]), cat=pick.choice([b"cpu_op", b"kernel", b"c" * 32,
                                                                                        b"c" * 33]), **ids))
    assert load_both(trace_text(events)) == (None, 1, 0)


def test_a_chunk_decoded_in_parts_lays_out_shapes_and_collectives_as_the_scanner_does(load_both):
    """Over 2 MiB the Python decoder reads a chunk in parts; its blob is still all the chunk's shapes,
    then its collective records (it had interleaved them part by part)."""
    op = b'{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 1, ' \
         b'"args": {"Input Dims": [[1, 2]], "pad": "' + b"x" * 300 + b'"}}'
    comm = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 1, "dur": 1, ' \
           b'"args": {"Collective name": "allreduce"}}'
    text = trace_text([op, comm] * 6000)
    assert len(text) > 2 * decode.SUB_CHUNK
    assert load_both(text) == (None, 1, 0)


def test_a_chunk_adopt_refuses_is_decoded_whole_by_the_python_path(tmp_path, monkeypatch):
    """adopt() may refuse a scanned chunk (its aside events do not decode typed): the Python path then
    gets the chunk in brackets, never its bare elements."""
    monkeypatch.delenv("KERNELTUI_WORKERS", raising=False)
    monkeypatch.setattr(blocks, "BLOCK", 700)
    refused = []
    real = decode.ChunkDecoder.adopt

    def refusing(self, scanned, text):
        if isinstance(text, memoryview) and len(refused) < 5:
            refused.append(len(text))
            return None
        return real(self, scanned, text)

    monkeypatch.setattr(decode.ChunkDecoder, "adopt", refusing)
    path = tmp_path / "t.json"
    path.write_bytes(trace_text([META, OP, LAUNCH, KERNEL, *EVERY_KIND] * 4))
    assert fuzzing.decoders_differ(str(path)) is None
    assert len(refused) == 5
