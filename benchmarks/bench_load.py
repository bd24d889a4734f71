"""Load speed and memory: file -> ready engine, against plain orjson.loads on the same bytes.

Generates traces of about 100 MB, 500 MB and 1 GB by replicating a real one
(benchmarks/make_large_trace.py), plain and gzipped, then times in fresh
processes, one measurement each:
  - kerneltui cold:  load_trace() + summarize() (the summary computable), cache off, peak RSS;
  - kerneltui first: the same with the column cache on and empty (cold, plus writing the entry);
  - kerneltui warm:  the same again in a fresh process, served from the cache (and load_trace() alone);
  - orjson:          orjson.loads(open(f, 'rb').read()) on the plain file, peak RSS.
"process s" is the whole process, interpreter start and imports included (the issue's measure);
"python s" the same cold load with the Python decoder (KERNELTUI_DECODER=python), beside it.
Ratios are ours over orjson.loads' seconds (the goals: cold <= 0.25 for the whole process, warm
<= 0.06): cold as the whole process; warm both without imports and as the whole process. The cache lives in
a temporary XDG_CACHE_HOME, removed afterwards.

    python benchmarks/bench_load.py [--sizes 100,500,1000] [--source TRACE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
DEFAULT_SOURCE = ROOT / "tests" / "data" / "traces" / "gpt_train_eager.json.gz"

ENGINE = """
import json, resource, sys, time
from kerneltui.trace import load_trace
from kerneltui.trace.summary import summarize
t0 = time.perf_counter()  # imports excluded, as for orjson
trace = load_trace(sys.argv[1])
loaded = time.perf_counter() - t0
s = summarize(trace)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "load": loaded, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "events": len(trace.events), "gpu": s.launches}))
"""

ORJSON = """
import json, resource, sys, time
import orjson
t0 = time.perf_counter()
doc = orjson.loads(open(sys.argv[1], "rb").read())
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "events": len(doc["traceEvents"])}))
"""


def measure(code: str, path: Path, **env: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, **env})
    return {**json.loads(out.stdout), "process": time.perf_counter() - t0}


def ensure(source: Path, mb: int, gz: bool) -> Path:
    path = DATA / f"replicated_{mb}mb.json{'.gz' if gz else ''}"
    if not path.exists():
        DATA.mkdir(exist_ok=True)
        cmd = [sys.executable, str(HERE / "make_large_trace.py"), str(source), str(path), "--mb", str(mb)]
        subprocess.run(cmd + (["--gzip"] if gz else []), check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500,1000", help="target sizes in MB")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = parser.parse_args()
    cache_home = tempfile.mkdtemp(prefix="kerneltui-bench-cache-")
    try:
        table(args, cache_home)
    finally:
        shutil.rmtree(cache_home, ignore_errors=True)


def table(args, cache_home: str) -> None:
    print(f"{'file':<28} {'MB':>5} {'events':>9} {'orjson s':>8} {'cold s':>7} {'ratio':>6} {'process s':>9}"
          f" {'python s':>8} {'first s':>7} {'warm s':>7} {'ratio':>6} {'process':>7} {'load s':>6} {'entry MB':>8}"
          f" {'cold peak':>9} {'warm peak':>9}")
    for mb in (int(x) for x in args.sizes.split(",")):
        plain = ensure(args.source, mb, gz=False)
        packed = ensure(args.source, mb, gz=True)
        baseline = measure(ORJSON, plain)
        for path in (plain, packed):
            cold = measure(ENGINE, path, KERNELTUI_CACHE="0")
            python = measure(ENGINE, path, KERNELTUI_CACHE="0", KERNELTUI_DECODER="python")
            first = measure(ENGINE, path, KERNELTUI_CACHE="1", XDG_CACHE_HOME=cache_home)
            warm = measure(ENGINE, path, KERNELTUI_CACHE="1", XDG_CACHE_HOME=cache_home)
            entry = sum(p.stat().st_size for p in Path(cache_home, "kerneltui").glob("*.arrow"))
            shutil.rmtree(Path(cache_home, "kerneltui"), ignore_errors=True)
            o = baseline["seconds"]
            print(
                f"{path.name:<28} {path.stat().st_size / 1e6:>5.0f} {cold['events']:>9,} {o:>8.2f}"
                f" {cold['seconds']:>7.2f} {cold['process'] / o:>6.3f} {cold['process']:>9.2f} {python['process']:>8.2f}"
                f" {first['seconds']:>7.2f} {warm['seconds']:>7.2f} {warm['seconds'] / o:>6.3f} {warm['process'] / o:>7.3f}"
                f" {warm['load']:>6.2f}"
                f" {entry / 1e6:>8.0f} {cold['peak'] / 1e9:>7.2f}GB {warm['peak'] / 1e9:>7.2f}GB",
                flush=True,
            )


if __name__ == "__main__":
    main()
