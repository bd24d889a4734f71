"""A job's ranks at scale: `kerneltui summary DIR` on synthetic jobs with a planted straggler and clock skew.

Each job, RANKS x MB of JSON per rank, is made by tests/support/rank_job.py from a real A100 DDP
rank trace (replicated to size, one clock offset per rank, one straggler) and kept under
benchmarks/data/ranks/, reused while its parameters and the generator stay the same. For each job
`python -m kerneltui summary DIR --format json --no-cache` runs in a fresh process; one row says:

  GB JSON        the job's files together;
  wall s, s/rank the whole command, imports included;
  peak 1 GB      the largest peak RSS of any one process of the tree: wait4()'s rusage, the same
                 figure as getrusage(RUSAGE_CHILDREN).ru_maxrss but for this job alone;
  peak tree GB   the largest sum of RSS over the whole tree, sampled from /proc every 0.1 s;
  straggler      yes when `stragglers[0]` is the planted rank;
  offset err     the worst |found - planted| / |planted| over ranks 1.., found being
                 clock_offset_ns relative to rank 0's (goal: at most 10%).

A command that fails prints the last line of its stderr and the next job runs.

    python benchmarks/bench_ranks.py [--jobs 8x100,64x100,256x10] [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

END_NOISE_NS = 10_000  # collective ends agree across ranks to within µs, not exactly
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.support import (
    rank_job,  # after the sys.path line: the repository root must be on it
)

JOBS_DIR = HERE / "data" / "ranks"
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_S = 0.1
COLUMNS = ("ranks", "MB/rank", "GB JSON", "wall s", "s/rank", "peak 1 GB", "peak tree GB", "straggler", "offset err")


def parse_jobs(text: str) -> list[tuple[int, int]]:
    return [(int(r), int(mb)) for r, mb in (job.split("x") for job in text.split(","))]


def job_params(ranks: int, mb: int, seed: int) -> dict:
    generator = hashlib.sha1(Path(rank_job.__file__).read_bytes()).hexdigest()[:12]  # regenerate when it changes
    return {"ranks": ranks, "mb": mb, "seed": seed, "straggler": ranks * 3 // 8, "generator": generator,
            "end_noise_ns": END_NOISE_NS}


def ensure_job(ranks: int, mb: int, seed: int) -> tuple[Path, rank_job.JobTruth]:
    """The job's directory and truth, generated unless a matching one is already there."""
    params = job_params(ranks, mb, seed)
    directory = JOBS_DIR / f"{ranks}x{mb}mb"
    manifest = JOBS_DIR / f"{directory.name}.json"  # beside the directory: in it, it would pass for a rank
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        files = [directory / name for name in saved["files"]]
        if saved["params"] == params and all(f.exists() for f in files):
            return directory, rank_job.JobTruth(files, saved["offsets_ns"], saved["straggler"], saved["delay_ns"])
    shutil.rmtree(directory, ignore_errors=True)
    need, free = ranks * mb * 1_050_000, shutil.disk_usage(JOBS_DIR.parent).free
    if need > free - 2e9:  # leave 2 GB for everything else
        raise RuntimeError(f"needs {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free")
    started = time.perf_counter()
    truth = rank_job.make_job(directory, ranks=ranks, straggler=params["straggler"], seed=seed,
                              target_bytes=mb * 1_000_000, end_noise_ns=END_NOISE_NS)
    print(f"  generated {ranks}x{mb} MB in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    manifest.write_text(json.dumps({"params": params, "files": [f.name for f in truth.files],
                                    "offsets_ns": truth.offsets_ns, "straggler": truth.straggler,
                                    "delay_ns": truth.delay_ns}))
    return directory, truth


def tree_rss(root: int) -> int:
    """Bytes resident in root and all its descendants now (processes may vanish while we read)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name in (...) may hold spaces
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, frontier = {root}, [root]
    while frontier:
        found = children.get(frontier.pop(), [])
        tree.update(found)
        frontier.extend(found)
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_measured(cmd: list[str]) -> dict:
    """Run cmd, sampling its tree's RSS; reap it with wait4 so its rusage is this run's alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err)
        peak_tree = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_tree = max(peak_tree, tree_rss(proc.pid))
            time.sleep(SAMPLE_S)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return {"rc": proc.returncode, "wall": wall, "peak_one": usage.ru_maxrss * 1024, "peak_tree": peak_tree,
                "stdout": out.read(), "stderr": err.read().decode(errors="replace")}


def score(summary: dict, truth: rank_job.JobTruth) -> tuple[str, float | None]:
    """Whether the worst straggler named is the planted one, and the worst relative offset error."""
    stragglers = summary.get("stragglers") or []
    found = "yes" if stragglers and stragglers[0] == truth.straggler else "no"
    offsets = {row["rank"]: row.get("clock_offset_ns") for row in summary.get("ranks", [])}
    if offsets.get(0) is None:
        return found, None
    errors = [abs((offsets[r] - offsets[0]) - planted) / abs(planted) if offsets.get(r) is not None else float("inf")
              for r, planted in enumerate(truth.offsets_ns) if r and planted]
    return found, max(errors, default=0.0)


def measure_job(ranks: int, mb: int, seed: int) -> list[str]:
    try:
        directory, truth = ensure_job(ranks, mb, seed)
    except (RuntimeError, OSError) as error:
        return [str(ranks), str(mb), f"not generated: {error}"]
    gigabytes = sum(f.stat().st_size for f in truth.files) / 1e9
    result = run_measured([sys.executable, "-m", "kerneltui", "summary", str(directory), "--format", "json",
                           "--no-cache"])
    row = [str(ranks), str(mb), f"{gigabytes:.2f}", f"{result['wall']:.1f}", f"{result['wall'] / ranks:.2f}",
           f"{result['peak_one'] / 1e9:.2f}", f"{result['peak_tree'] / 1e9:.2f}"]
    if result["rc"] != 0:
        last = (result["stderr"].strip().splitlines() or [f"exit status {result['rc']}"])[-1]
        return row + [f"failed: {last}"]
    try:
        found, error = score(json.loads(result["stdout"]), truth)
    except (ValueError, KeyError, TypeError) as problem:
        return row + [f"unreadable JSON: {problem}"]
    return row + [found, "n/a" if error is None else f"{error:.1%}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="8x100,64x100,256x10", help="RANKSxMB per rank, comma separated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    JOBS_DIR.mkdir(parents=True, exist_ok=True)
    widths = [max(len(c), 7) for c in COLUMNS]
    print("  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths)), flush=True)
    for ranks, mb in parse_jobs(args.jobs):
        row = measure_job(ranks, mb, args.seed)
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)), flush=True)


if __name__ == "__main__":
    main()
