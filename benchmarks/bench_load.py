"""Load speed and memory: file -> ready engine, against plain orjson.loads on the same bytes.

Generates traces of about 100 MB, 500 MB and 1 GB by replicating a real one
(benchmarks/make_large_trace.py), plain and gzipped, then times in fresh
processes, one measurement each:
  - kerneltui: load_trace() + summarize() (the summary computable), peak RSS;
  - orjson:    orjson.loads(open(f, 'rb').read()) on the plain file, peak RSS.

    python benchmarks/bench_load.py [--sizes 100,500,1000] [--source TRACE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
DEFAULT_SOURCE = ROOT.parent / "shared" / "traces" / "gpt_train_eager.json.gz"

ENGINE = """
import json, resource, sys, time
from kerneltui.trace import load_trace
from kerneltui.trace.summary import summarize
t0 = time.perf_counter()  # imports excluded, as for orjson
trace = load_trace(sys.argv[1])
s = summarize(trace)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
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


def measure(code: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)


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
    print(f"{'file':<32} {'MB':>6} {'events':>9} {'orjson s':>9} {'ready s':>8} {'ratio':>6}"
          f" {'orjson peak':>11} {'peak':>7} {'peak/file':>9}")
    for mb in (int(x) for x in args.sizes.split(",")):
        plain = ensure(args.source, mb, gz=False)
        packed = ensure(args.source, mb, gz=True)
        baseline = measure(ORJSON, plain)
        plain_size = plain.stat().st_size
        for path in (plain, packed):
            ours = measure(ENGINE, path)
            print(
                f"{path.name:<32} {path.stat().st_size / 1e6:>6.0f} {ours['events']:>9,} {baseline['seconds']:>9.2f}"
                f" {ours['seconds']:>8.2f} {baseline['seconds'] / ours['seconds']:>5.1f}x"
                f" {baseline['peak'] / 1e9:>9.2f}GB {ours['peak'] / 1e9:>5.2f}GB {ours['peak'] / plain_size:>8.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
