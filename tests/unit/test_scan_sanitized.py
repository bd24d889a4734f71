"""The C scanner built with AddressSanitizer and UndefinedBehaviorSanitizer, fed real and broken text.

The comparisons in test_scan.py see only what the scanner returns; a read past a buffer or of
freed memory can return the right answer by luck (a use-after-free in table growth did, until
a sanitized fuzz found it). Here a sanitized copy, built into a temporary folder, reads every
repository trace, tables grown to thousands of keys, chunks over 2 MiB, and byte mutants of
real events cut at every length (the scanner reads ahead a few bytes in places: an input that
ends mid-token is the case to check), each in a block of exactly its size and written over the last
scan's columns (grown where they are short), and text_classes groups texts up to the blob's last byte.
Any report fails the test. Skipped without gcc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "kerneltui" / "trace" / "_scan.c"

DRIVER = r'''
import glob, gzip, importlib.util, json, random, sys
spec = importlib.util.spec_from_file_location("kerneltui.trace._scan", sys.argv[1])
scan = importlib.util.module_from_spec(spec); spec.loader.exec_module(scan)
from kerneltui.trace.scanner import _classify

import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]

written_over = [None, 0]  # the last scan's columns, and how many scans wrote over the columns they were given

def run(text):
    # the text in a block malloc'd to exactly its size, so a read one byte past it is reported (a bytes
    # object ends in a hidden NUL that such a read would land on unseen)
    text = bytes(text)
    block = libc.malloc(max(len(text), 1))
    try:
        ctypes.memmove(block, text, len(text))
        with memoryview((ctypes.c_ubyte * len(text)).from_address(block)) as view:
            reuse = written_over[0]
            out = scan.scan(view, _classify, False, reuse)
            if out is not None:  # the next text is written over these columns, where they have room
                written_over[1] += reuse is not None and out[0][0] is reuse[0]
                written_over[0] = out[0]
            scan.array_end(view, 0, 2)
    finally:
        libc.free(block)

root = sys.argv[2]
events = []
for path in sorted(glob.glob(root + "/traces/*.json.gz") + glob.glob(root + "/tests/data/traces/*.json.gz")
                   + glob.glob(root + "/tests/data/external/*.json.gz")):
    doc = json.loads(gzip.decompress(open(path, "rb").read()))
    items = doc["traceEvents"] if isinstance(doc, dict) else doc
    run(json.dumps(items).encode())
    run(json.dumps(items, indent=2).encode())
    events += [json.dumps(e).encode() for e in items[:300]]
count = 2
# tables grown past 128, 4096 keys; 400 rows written over the 200's columns, which grow; 5000 over 5000's
for n in (200, 400, 5000, 5000):
    run(("[" + ",".join('{"ph":"X","name":"n%d","pid":%d,"ts":1}' % (i, i) for i in range(n)) + "]").encode())
op = b'{"ph":"X","cat":"cpu_op","name":"op","ts":1,"args":{"Input Dims":[[1,2]],"pad":"' + b"x" * 300 + b'"}}'
comm = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"Collective name":"allreduce","Seq":3}}'
run(b"[" + b",".join([op, comm] * 6000) + b"]")  # over 2 MiB
rng = random.Random(7)
inserts = [b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"\x00", b"\x1f", b"\x80", b"\xff", b"\xe2\x82",
           b"-", b"e", b".", b"[", b"]", b"{", b"}", b",", b":", b"0", b"1e999", b" "]
for e in events[:600]:
    text = b"[" + e + b"]"
    for cut in range(max(1, len(text) - 40), len(text)):
        run(text[:cut])  # ends mid-token
    twice = b"[" + e + b", " + e + b"]"  # the second read through what the first left remembered
    for cut in range(max(1, len(twice) - 60), len(twice), 3):
        run(twice[:cut])
    for _ in range(12):
        at = rng.randrange(len(text))
        run(text[:at] + rng.choice(inserts) + text[at + rng.choice((0, 1)):])
    count += 1
# text_classes: texts ending at the blob's last byte, empty ones, at < 0, a table grown past 4096 keys,
# and texts outside the blob (an error, read nowhere)
import array
blob = bytes(rng.randrange(256) for _ in range(20000))
spans = [(0, len(blob)), (len(blob) - 1, 1), (len(blob), 0), (-1, 7), (5, 0)]
spans += [(rng.randrange(len(blob) - 40), rng.randrange(1, 40)) for _ in range(6000)] * 2
at, length = (array.array("q", [s[i] for s in spans]).tobytes() for i in (0, 1))
scan.text_classes(blob, at, length)
for bad in ((len(blob), 1), (len(blob) - 3, 4), (0, -1)):
    try:
        scan.text_classes(blob, array.array("q", [bad[0]]).tobytes(), array.array("q", [bad[1]]).tobytes())
        raise SystemExit("no error for a text outside the blob")
    except ValueError:
        count += 1
assert written_over[1] > 100, written_over[1]  # the reuse of earlier columns was read through too
print("ran", count)
'''


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "gcc")) or shutil.which("gcc")


@pytest.mark.skipif(_compiler() is None, reason="no C compiler")
def test_the_scanner_reads_real_and_broken_text_without_a_sanitizer_report(tmp_path):
    cc = _compiler()
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan) or not os.path.exists(libasan):
        pytest.skip("this compiler has no AddressSanitizer runtime")
    built = tmp_path / ("_scan" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    compile_ = subprocess.run([cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                               "-fno-sanitize-recover=undefined", "-std=c11", "-D_GNU_SOURCE", "-shared", "-fPIC",
                               f"-I{include}", str(SOURCE), "-o", str(built)], capture_output=True, text=True)
    assert compile_.returncode == 0, compile_.stderr[-3000:]
    env = {**os.environ, "LD_PRELOAD": libasan, "PYTHONMALLOC": "malloc",
           "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:exitcode=99:max_free_fill_size=4096:free_fill_byte=190",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", DRIVER, str(built), str(ROOT)], capture_output=True, text=True,
                         env=env, timeout=600, cwd=ROOT)
    report = run.stderr[-4000:]
    assert run.returncode == 0 and "ERROR: AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr, report
    assert int(run.stdout.split()[-1]) > 100
