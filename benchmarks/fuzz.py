"""Mutation fuzzer: real traces, mutated, through summary, diff, the loader and the browser.

    python benchmarks/fuzz.py --count 3000 --jobs 2 --out /tmp/fuzz-out
    python benchmarks/fuzz.py --seed 7 --only 1234          # rebuild and rerun one mutant, verbosely
    python benchmarks/fuzz.py --classes truncate,ids --count 200

Seeds are the real traces in traces/ and tests/data/ (see tests/fuzzing.py for the
mutation classes and the checks). Each mutant is a pure function of (--seed, its index), so a run is
reproducible whatever --jobs is. Mutants run in-process in worker processes (the CLI's ``main`` with
stdout/stderr captured, ~10 ms of overhead instead of ~1 s for a fresh interpreter); a worker whose peak
memory jumps has that mutant re-measured in fresh processes, and decompression bombs always are.
Failures are grouped by distinct place: kind, exception type and the innermost kerneltui frame.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import fuzzing  # noqa: E402

WATCHDOG_S = fuzzing.HARD_S * 8 + 60  # a worker stuck in C code this long on one mutant is killed


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    p.add_argument("--count", type=int, default=1000, help="mutants to run (default 1000)")
    p.add_argument("--start", type=int, default=0, help="index of the first mutant (default 0)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", type=Path, help="save each failing mutant (and a .txt of what failed) here")
    p.add_argument("--browser-share", type=float, default=0.05, help="share of mutants also opened in the headless browser")
    p.add_argument("--classes", help="comma-separated mutation classes (default: all); --list-classes names them")
    p.add_argument("--list-classes", action="store_true")
    p.add_argument("--only", help="comma-separated mutant indices: rerun just these, in this process, and print all")
    p.add_argument("--cache", type=Path, default=fuzzing.DEFAULT_CACHE, help="where windows of big seeds are kept")
    p.add_argument("--max-events", type=int, default=fuzzing.MAX_BASE_EVENTS, help="events per window of a big seed")
    p.add_argument("--small-seeds", action="store_true", help="only seeds of up to --max-events events (faster)")
    p.add_argument("--tasks-per-worker", type=int, default=150, help="a worker is replaced after this many mutants")
    p.add_argument("--memory-limit-gb", type=float, default=8.0, help="address-space limit of each worker (safety net)")
    p.add_argument("--report", type=Path, help="write every result as JSON here")
    p.add_argument("--examples", type=int, default=1, help="examples printed per failure group")
    p.add_argument("--shrink", nargs=2, metavar=("FILE", "OUT"),
                   help="shrink a failing JSON trace to a small one with the same failure (see --command)")
    p.add_argument("--command", default="summary {}",
                   help="with --shrink: the kerneltui command that fails, {} for the file (default 'summary {}')")
    p.add_argument("--layout", default="kineto", help="with --shrink: how to write the smaller trace")
    return p.parse_args(argv)


def bases_for(args) -> list[fuzzing.Base]:
    bases = fuzzing.prepare_bases(cache=args.cache, max_events=args.max_events)
    if args.small_seeds:
        bases = [b for b in bases if b.parsed and b.events <= args.max_events]
    if not bases:
        sys.exit("fuzz: no seed traces found (traces/, tests/data/)")
    return bases


# -- workers ------------------------------------------------------------------------------------


def _worker(wid, conn, seed, bases, classes, browser_share, keep, max_tasks, memory_limit, stages, skip_isolated):
    """Runs the indices the parent sends on ``conn``, one result back for each; None: stop."""
    if memory_limit:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ValueError, OSError):
            pass
    os.environ.setdefault("COLUMNS", "80")
    os.environ["KERNELTUI_CACHE"] = "0"  # thousands of one-off mutants: caching them would only fill ~/.cache
    workdir = Path(tempfile.mkdtemp(prefix=f"kerneltui-fuzz-w{wid}-"))
    try:
        for n in range(max_tasks):
            index = conn.recv()
            if index is None:
                break
            try:
                mutant = fuzzing.make_mutant(index, seed, bases, classes)
                browser = random.Random(f"browser:{seed}:{index}").random() < browser_share
                if mutant.isolate and skip_isolated:
                    payload = asdict(fuzzing.Result(index, mutant.cls, mutant.base.name, mutant.info, mutant.size, [],
                                                    {}, skipped=True))
                else:
                    payload = asdict(fuzzing.run_mutant(mutant, workdir, browser, keep, stages))
            except Exception as exc:  # a bug of the fuzzer itself: say so, keep going
                import traceback

                payload = {"index": index, "cls": classes[index % len(classes)], "base": "?", "info": "",
                           "size": 0, "wall": {}, "rss_growth_kb": 0, "peak_kb": 0, "saved": "", "codes": {},
                           "failures": [asdict(fuzzing.Failure("harness", "make/run", type(exc).__name__,
                                                               "tests/fuzzing.py", 0, str(exc)[:200],
                                                               traceback.format_exc().splitlines()[-6:]))]}
            for entry in workdir.iterdir():
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
            # a high-water mark over 1 GB hides later growth: start afresh
            last = n == max_tasks - 1 or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 1 << 20
            conn.send((payload, last))
            if last:
                break
    except (EOFError, BrokenPipeError):
        pass
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class Pool:
    """Worker processes, each with a pipe of its own.

    No shared queue: a worker killed while holding a multiprocessing.Queue's lock (a segfault mid-put)
    would block every other worker forever.
    """

    def __init__(self, args, bases, classes, indices):
        self.ctx = multiprocessing.get_context("fork")
        self.args, self.bases, self.classes = args, bases, classes
        self.todo = list(reversed(indices))
        self.total = len(indices)
        self.workers: dict[int, dict] = {}
        self.next_id = 0

    def spawn(self):
        wid = self.next_id
        self.next_id += 1
        a = self.args
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(
            target=_worker,
            args=(wid, child, a.seed, self.bases, self.classes, a.browser_share, a.out, a.tasks_per_worker,
                  int(a.memory_limit_gb * (1 << 30)) if a.memory_limit_gb else 0,
                  getattr(a, "stages", fuzzing.STAGES), getattr(a, "skip_isolated", False)),
            daemon=True,
        )
        proc.start()
        child.close()
        self.workers[wid] = {"proc": proc, "conn": parent, "index": None, "since": 0.0}
        self._feed(wid)

    def _feed(self, wid):
        w = self.workers[wid]
        if self.todo:
            w["index"], w["since"] = self.todo.pop(), time.time()
            w["conn"].send(w["index"])
        else:
            w["conn"].send(None)
            w["index"] = None

    def run(self, on_result):
        from multiprocessing.connection import wait

        for _ in range(min(self.args.jobs, self.total)):
            self.spawn()
        finished = 0
        while finished < self.total and self.workers:
            by_conn = {w["conn"]: wid for wid, w in self.workers.items()}
            by_sentinel = {w["proc"].sentinel: wid for wid, w in self.workers.items()}
            ready = wait(list(by_conn) + list(by_sentinel), timeout=1.0)
            for item in ready:
                wid = by_conn.get(item)
                if wid is None or wid not in self.workers:
                    continue
                try:
                    payload, last = item.recv()
                except (EOFError, OSError):
                    self.workers[wid]["proc"].join(timeout=5)
                    finished += self._lost(wid, on_result)  # the pipe closed: the worker is gone
                    continue
                self.workers[wid]["index"] = None
                finished += 1
                on_result(payload)
                if last:
                    self._retire(wid)
                else:
                    self._feed(wid)
            for wid, w in list(self.workers.items()):
                if w["index"] is not None and time.time() - w["since"] > WATCHDOG_S:
                    w["proc"].kill()
                if not w["proc"].is_alive() and not w["conn"].poll():
                    finished += self._lost(wid, on_result)
        for w in self.workers.values():
            w["proc"].join(timeout=5)

    def _retire(self, wid):
        w = self.workers.pop(wid, None)
        if w is None:
            return
        w["proc"].join(timeout=10)
        w["conn"].close()
        if self.todo:
            self.spawn()

    def _lost(self, wid, on_result) -> int:
        """A worker that died mid-mutant (killed by the watchdog or the OOM killer, a segfault)."""
        w = self.workers.get(wid)
        if w is None:
            return 0
        index, code = w["index"], w["proc"].exitcode
        self._retire(wid)
        if index is None:
            return 0
        why = "a signal: segfault?" if code is not None and code < 0 else "the watchdog or the OOM killer?"
        failure = fuzzing.Failure("crash", "worker", f"worker exit {code}", "(worker process died)", 0,
                                  f"mutant {index} killed the worker (exit {code}, {why})")
        # mutants are pure functions of (seed, index): rebuild this one here to say what it was and keep it
        mutant = fuzzing.make_mutant(index, self.args.seed, self.bases, self.classes)
        saved = fuzzing.save_repro(mutant, self.args.out, [failure]) if self.args.out else ""
        failure.command = f"kerneltui summary {saved or '(--out to keep it)'}"
        on_result({"index": index, "cls": mutant.cls, "base": mutant.base.name, "info": mutant.info,
                   "size": mutant.size, "wall": {}, "rss_growth_kb": 0, "peak_kb": 0, "saved": saved, "codes": {},
                   "failures": [asdict(failure)]})
        return 1


def run_batch(indices, bases, classes=fuzzing.CLASSES, seed=0, jobs=2, out=None, browser_share=0.05,
              stages=fuzzing.STAGES, skip_isolated=False, tasks_per_worker=150, memory_limit_gb=8.0) -> list[dict]:
    """Results (as dicts) of the mutants ``indices``, run in ``jobs`` worker processes; a crash is a result too."""
    args = argparse.Namespace(seed=seed, jobs=jobs, out=out, browser_share=browser_share, stages=stages,
                              skip_isolated=skip_isolated, tasks_per_worker=tasks_per_worker,
                              memory_limit_gb=memory_limit_gb)
    results: list[dict] = []
    Pool(args, bases, classes, list(indices)).run(results.append)
    return sorted(results, key=lambda r: r["index"])


# -- reporting ----------------------------------------------------------------------------------


class Tally:
    def __init__(self, classes):
        self.classes = classes
        self.run = Counter()
        self.failing = Counter()
        self.groups: dict[tuple, list] = defaultdict(list)
        self.results: list[dict] = []
        self.slowest: list[tuple[float, int, str]] = []

    def add(self, r: dict):
        self.results.append(r)
        self.run[r["cls"]] += 1
        if r["failures"]:
            self.failing[r["cls"]] += 1
        seen = set()
        for f in r["failures"]:
            key = (f["kind"], f["type"], f["place"])
            if key in seen:
                continue
            seen.add(key)
            self.groups[key].append((r, f))
        total = sum(r["wall"].values())
        self.slowest.append((total, r["index"], r["cls"]))

    def print(self, elapsed: float, examples: int, out=sys.stdout):
        n = len(self.results)
        w = out.write
        w(f"\n{n:,} mutants in {elapsed:.1f} s ({n / elapsed if elapsed else 0:.1f}/s); "
          f"{sum(self.failing.values()):,} failing; {len(self.groups)} distinct failure places\n\n")
        w(f"{'class':<16} {'run':>6} {'failing':>8}\n")
        for cls in self.classes:
            if self.run[cls]:
                w(f"{cls:<16} {self.run[cls]:>6} {self.failing[cls]:>8}\n")
        if self.groups:
            w("\nfailures by place (kind, type, innermost kerneltui frame): mutants, classes, example\n")
        for (kind, typ, place), hits in sorted(self.groups.items(), key=lambda kv: -len(kv[1])):
            classes = Counter(r["cls"] for r, _ in hits)
            stages = Counter(f["stage"] for _, f in hits)
            w(f"\n[{len(hits)}] {kind}: {typ} at {place}\n")
            w(f"    classes: {', '.join(f'{c} {k}' for c, k in classes.most_common())}\n")
            w(f"    stages:  {', '.join(f'{s} {k}' for s, k in stages.most_common())}\n")
            for r, f in sorted(hits, key=lambda h: h[0]["size"])[:examples]:
                w(f"    e.g. mutant {r['index']} ({r['cls']}, {r['base']}, {r['size']:,} B): {r['info'][:150]}\n")
                w(f"         line {f['line']}: {f['message'][:200]}\n")
                if r.get("saved"):
                    w(f"         saved {r['saved']}\n")
                if f.get("command"):
                    w(f"         {f['command'][:220]}\n")
                for frame in f.get("frames", [])[-4:]:
                    w(f"           {frame}\n")
        slow = sorted(self.slowest, reverse=True)[:5]
        if slow:
            w("\nslowest mutants (all stages): " + ", ".join(f"{i} {c} {t:.1f}s" for t, i, c in slow) + "\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list_classes:
        print("\n".join(fuzzing.CLASSES))
        return 0
    classes = tuple(args.classes.split(",")) if args.classes else fuzzing.CLASSES
    unknown = [c for c in classes if c not in fuzzing.MUTATORS]
    if unknown:
        sys.exit(f"fuzz: unknown classes {unknown}; --list-classes names them")
    if args.shrink:
        before, after = fuzzing.shrink(args.shrink[0], args.command.split(), args.shrink[1], args.layout)
        print(f"{args.shrink[1]}: {after} of {before} events; "
              f"kerneltui {args.command.replace('{}', args.shrink[1])}")
        return 0
    started = time.time()
    bases = bases_for(args)
    tally = Tally(classes)
    if args.only:
        workdir = Path(tempfile.mkdtemp(prefix="kerneltui-fuzz-only-"))
        for index in (int(x) for x in args.only.split(",")):
            mutant = fuzzing.make_mutant(index, args.seed, bases, classes)
            browser = random.Random(f"browser:{args.seed}:{index}").random() < args.browser_share
            keep = args.out or workdir
            result = asdict(fuzzing.run_mutant(mutant, workdir / "run", browser, keep))
            print(f"mutant {index}: {mutant.cls} on {mutant.base.name}: {mutant.info} ({mutant.size:,} B)")
            print(f"  file: {fuzzing.save_repro(mutant, keep, [])}  partner: {mutant.base.path}")
            print(f"  exit: {result['codes']}")
            print(f"  wall: {result['wall']}  peak {result['peak_kb'] / 1024:.0f} MB")
            for f in result["failures"]:
                print(f"  {f['kind']} {f['type']} at {f['place']}:{f['line']} [{f['stage']}] {f['message']}")
                print(f"    {f['command']}")
                for frame in f["frames"]:
                    print(f"      {frame}")
            tally.add(result)
        return 1 if any(r["failures"] for r in tally.results) else 0
    indices = list(range(args.start, args.start + args.count))
    print(f"fuzz: {len(indices):,} mutants, seed {args.seed}, {len(bases)} bases "
          f"({sum(b.parsed for b in bases)} parsed), {len(classes)} classes, {args.jobs} jobs", flush=True)
    progress = {"n": 0, "t": time.time()}

    def on_result(r):
        tally.add(r)
        progress["n"] += 1
        if time.time() - progress["t"] > 30:
            progress["t"] = time.time()
            print(f"  {progress['n']:,}/{len(indices):,} done, {sum(tally.failing.values())} failing, "
                  f"{len(tally.groups)} places, {time.time() - started:.0f} s", flush=True)

    Pool(args, bases, classes, indices).run(on_result)
    elapsed = time.time() - started
    tally.print(elapsed, args.examples)
    if args.report:
        args.report.write_text(json.dumps({"seed": args.seed, "elapsed": elapsed, "results": tally.results}, indent=1))
    return 1 if tally.groups else 0


if __name__ == "__main__":
    sys.exit(main())
