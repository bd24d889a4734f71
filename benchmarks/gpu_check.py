"""The GPU check: `kerneltui capture`, summary, diff and provenance on a CUDA machine, cheapest first.

    bash benchmarks/gpu_check.sh                      # on the GPU machine (docs/capture.md#the-gpu-check)
    python benchmarks/gpu_check.py --out DIR          # needs CUDA; about 5 minutes on an H200, cold
    python benchmarks/gpu_check.py --cpu --out DIR    # the same stages on a CPU (C++ kernels for Triton's)
    python benchmarks/gpu_check.py --cpu --quick      # env, add_relu, summary, provenance of add_relu only

Every kerneltui command runs as a user would run it (`python -m kerneltui ...`, from this
checkout), in a fresh Inductor cache shared by the stages. The stages, in order:

  env         kerneltui, orjson, msgspec, textual, pandas, pyarrow import from where they should; which
              decoder (the C scanner or Python); torch, CUDA, the device; `summary` of the shipped trace
  add_relu    capture examples/add_relu.py eager + compiled (default mode): 2 GPU launches per call
              eager, 1 compiled; one fused kernel whose record covers add and relu at its source line
  summary     summary (table, json; C scanner and Python decoder agree), diff (table, json), and the
              diff screen opened headless, on that pair
  provenance  --provenance-only of add_relu (an FX-cache hit) gives the trace's records, diff
              --provenance takes it; train_step and gpt_step eager + compiled: every generated kernel
              has a record (joined by its launch's kernel_hash, else its name), with ATen ops, source
              lines (backward ones too), graph and cache key; kerneltui's own join picks the record
              of the kernel's hash when names repeat across graphs
  cudagraphs  reduce-overhead and max-autotune (CUDA graphs, graph partitions; GEMM autotuning kept to
              the default search space): add_relu and train_step reduce-overhead, mlp and add_relu
              max-autotune, gpt_step reduce-overhead last (optional: only with 60 s left); the same
              record checks

Results go to --out (default $OUT, else a temporary folder) after every command: results.json
(stages, checks, facts, timings), results.txt (the pass/fail table), check.log (every command and
its output), traces.tar (the traces that passed, as traces/NAME, rewritten after each stage) and
traces/NAME for the add_relu pair; at most 6 files, all top-level or one folder down. What the deadline
(--deadline) leaves out is "skipped", not failed: a stage it cuts short is "partial", one it never
starts "skipped"; the table is printed at the end. Exit 0: every stage asked for ran and passed
(PASS); 1: a check failed (FAIL); 3: nothing failed but the deadline left something out
(INCOMPLETE); 2: bad usage, or no CUDA without --cpu.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHIPPED = ROOT / "traces" / "add_relu_1M_eager.json.gz"
STAGES = ("env", "add_relu", "summary", "provenance", "cudagraphs")
# estimated seconds on an H200 from a cold start (docs/capture.md#the-gpu-check): budgets, reported
BUDGET_S = {"env": 10, "add_relu": 30, "summary": 15, "provenance": 95, "cudagraphs": 130}
ADD_RELU_CODE = "return (a + b).relu()"
# the workloads' parameters: their defaults on a GPU, small ones on a CPU (a CPU compile is slower)
PARAMS = {
    "add_relu": ({}, {}),
    "mlp": ({}, {"width": 32, "tokens": 16}),
    "train_step": ({}, {"batch": 8, "width": 16}),
    "gpt_step": ({}, {"batch": 2, "context": 8, "width": 16, "layers": 1, "heads": 2, "vocab": 32}),
}
# max-autotune's GEMM autotuning, bounded: Triton templates and ATen only, the default search space
AUTOTUNE_ENV = {"TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "ATEN,TRITON",
                "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_SEARCH_SPACE": "DEFAULT"}
# most telling first (backward kernels inside graph partitions), the dearest last: (workload, mode,
# seconds it must have left to start, or None: required, started while the stage may start commands)
CUDAGRAPH_PLAN = (("add_relu", "reduce-overhead", None), ("train_step", "reduce-overhead", None),
                  ("mlp", "max-autotune", None), ("add_relu", "max-autotune", None),
                  ("gpt_step", "reduce-overhead", 60))


@dataclass
class Stage:
    name: str
    status: str = "not run"  # pass, partial (the deadline cut it short), FAIL, skipped, not run
    seconds: float = 0.0
    checks: list[dict] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    traces: list[str] = field(default_factory=list)  # names of the traces that passed
    skipped: list[str] = field(default_factory=list)  # what the deadline left out (not a failure)

    def expect(self, ok: bool, what: str, detail: object = None) -> bool:
        self.checks.append({"ok": bool(ok), "what": what, **({"detail": detail} if detail is not None else {})})
        if not ok:
            print(f"  FAIL {what}" + (f": {str(detail)[:300]}" if detail is not None else ""), flush=True)
        return bool(ok)

    @property
    def failed(self) -> list[str]:
        return [c["what"] for c in self.checks if not c["ok"]]


class Check:
    """The run: its commands, its deadline, what it writes to the results folder."""

    def __init__(self, args: argparse.Namespace, out: Path, work: Path, started: float):
        self.args, self.out, self.work = args, out, work
        self.cpu = args.cpu
        self.traces = work / "traces"
        self.started = started  # the deadline counts from the start, the CUDA probe included
        self.deadline = self.started + args.deadline
        self.stages = [Stage(s) for s in STAGES]
        self.log = out / "check.log"
        self.header: dict = {"command": " ".join([sys.executable, *sys.argv]), "cpu": self.cpu,
                             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "finished": False}
        self.env = {**os.environ, "KINETO_LOG_LEVEL": "6", "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
                    "XDG_CACHE_HOME": str(work / "xdg-cache")}
        if not args.warm_cache:
            self.env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor-cache")
            self.env["TRITON_CACHE_DIR"] = str(work / "inductor-cache" / "triton")
        if self.cpu:
            self.env["CUDA_VISIBLE_DEVICES"] = ""

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def kt(self, stage: Stage, argv: list[str], label: str, env: dict | None = None, expect_rc: int = 0,
           python: list[str] | None = None) -> tuple[int | None, str]:
        """`python -m kerneltui ARGV` (or `python ARGS`), within the command cap and what is left of
        the deadline; its output goes to check.log. None: not run or timed out."""
        timeout = min(self.args.command_timeout, self.left())
        cmd = [sys.executable, *(python if python is not None else ["-m", "kerneltui", *argv])]
        shown = " ".join(cmd[1:]) if python is None else f"python {' '.join(python)[:200]}"
        if timeout < 5:
            stage.skipped.append(label)
            print(f"  {label}: skipped, the deadline was reached", flush=True)
            return None, ""
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=ROOT, env={**self.env, **(env or {})}, capture_output=True, text=True,
                                  timeout=timeout, check=False)
            rc, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            rc = None
            output = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                             for x in (exc.stdout, exc.stderr))
        took = time.monotonic() - started
        with self.log.open("a") as f:
            f.write(f"$ {shown}\n# [{stage.name}] {label}: rc {rc}, {took:.1f} s\n{output}\n")
        print(f"  {label}: rc {rc} in {took:.1f} s", flush=True)
        if rc is None and timeout < self.args.command_timeout:
            stage.skipped.append(f"{label} (stopped at the deadline)")
        elif rc is None:
            stage.expect(False, f"{label}: timed out after {timeout:.0f} s", output.strip().splitlines()[-3:])
        else:
            stage.expect(rc == expect_rc, f"{label}: exit {rc}", None if rc == expect_rc else
                         output.strip().splitlines()[-5:])
        return rc, output

    def params(self, name: str) -> list[str]:
        chosen = PARAMS[name][1 if self.cpu else 0]
        return [a for k, v in chosen.items() for a in ("-p", f"{k}={v}")]

    def capture(self, stage: Stage, name: str, modes: str, compile_mode: str = "default",
                env: dict | None = None) -> dict[str, Path]:
        """Capture a workload into the shared traces folder; its trace files by mode."""
        argv = ["capture", str(EXAMPLES / f"{name}.py"), *self.params(name), "--modes", modes,
                "-o", str(self.traces)]
        if compile_mode != "default":
            argv += ["--compile-mode", compile_mode]
        self.kt(stage, argv, f"capture {name} {modes}{'' if compile_mode == 'default' else ' ' + compile_mode}", env)
        found = {}
        for mode in modes.split(","):
            suffix = "eager" if mode == "eager" else ("compiled" if compile_mode == "default"
                                                      else f"compiled-{compile_mode}")
            paths = sorted(self.traces.glob(f"{name}_*{suffix}.json.gz")) + sorted(
                self.traces.glob(f"{name}_{suffix}.json.gz"))
            if stage.expect(bool(paths), f"{name} {suffix}: trace written", None if paths else
                            sorted(p.name for p in self.traces.glob(f"{name}_*"))):
                found[mode] = paths[0]
        return found

    def write(self) -> None:
        """results.json and results.txt, replaced whole (a write cut short leaves the last ones)."""
        doc = {**self.header, "elapsed_s": round(time.monotonic() - self.started, 1),
               "stages": [{"name": s.name, "status": s.status, "seconds": round(s.seconds, 1),
                           "budget_s": BUDGET_S[s.name], "failed": s.failed, "skipped": s.skipped,
                           "traces": s.traces,
                           "facts": s.facts, "checks": s.checks} for s in self.stages]}
        replace(self.out / "results.json", json.dumps(doc, indent=1, default=str).encode())
        replace(self.out / "results.txt", table(self).encode())

    def keep(self, stage: Stage, *paths: Path) -> None:
        """Traces that passed their checks: into traces.tar under their final names (traces/NAME)."""
        for p in paths:
            if p.name not in stage.traces:
                stage.traces.append(p.name)
        self.pack()

    def pack(self) -> None:
        """traces.tar: the traces kept so far, the provenance files and diffs, replaced whole."""
        kept = [self.traces / n for s in self.stages for n in s.traces]
        extra = sorted(self.traces.glob("*.provenance.json")) + sorted(self.traces.glob("*_diff*.txt"))
        buf, total = io.BytesIO(), 0
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for p in [*kept, *extra]:
                size = p.stat().st_size if p.is_file() else 0
                if not size or total + size > self.args.tar_limit_mib * 2**20:
                    continue  # what comes back is at most 16 MiB a file: the rest stays in check.log's note
                total += size
                tar.add(p, arcname=f"traces/{p.name}")
        replace(self.out / "traces.tar", buf.getvalue())


def verdict_of(check: Check) -> str:
    """PASS: every stage asked for ran and passed; INCOMPLETE: nothing failed, but the deadline left
    something out; FAIL: a check failed (or nothing ran)."""
    asked = [s for s in check.stages if s.status != "not run"]
    if not any(s.status in ("pass", "partial") for s in asked) or any(s.status == "FAIL" for s in asked):
        return "FAIL"
    return "PASS" if all(s.status == "pass" for s in asked) else "INCOMPLETE"


def replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def table(check: Check) -> str:
    lines = [(f"kerneltui GPU check ({'CPU dry run' if check.cpu else 'CUDA'}): "
              f"{check.header.get('device', '?')}, torch {check.header.get('torch', '?')}"),
             f"{'stage':<12}{'result':<9}{'seconds':>8}{'budget':>8}{'checks':>8}  failed / traces kept"]
    for s in check.stages:
        ok = sum(c["ok"] for c in s.checks)
        note = "; ".join(s.failed)[:200] if s.failed else ", ".join(
            [*s.traces, *(f"skipped: {x}" for x in s.skipped)])
        lines.append(f"{s.name:<12}{s.status:<9}{s.seconds:>8.1f}{BUDGET_S[s.name]:>8}{ok:>4}/{len(s.checks):<3}  {note}")
    run = [s for s in check.stages if s.status in ("pass", "partial", "FAIL")]
    verdict = verdict_of(check)
    skipped = [s.name for s in check.stages if s.status == "skipped"]
    lines.append(f"{verdict}: {sum(s.status == 'pass' for s in run)}/{len(run)} stages passed in "
                 f"{time.monotonic() - check.started:.0f} s" + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    return "\n".join(lines) + "\n"


# ---- reading traces -------------------------------------------------------------------------------

def load(path: Path) -> dict:
    import gzip

    return json.loads(gzip.decompress(path.read_bytes()))


def generated_kernels(trace: dict, cpu: bool) -> list[tuple[str, str | None]]:
    """(name, kernel_hash) per generated-kernel event: Triton kernels on a GPU, each with the hash
    of the op that launched it (Inductor's launcher is a cpu_op named after the kernel, with
    args.kernel_hash): the op of the kernel's External id, else the one around the runtime or driver
    call of its correlation id; None under a CUDA graph replay. C++ kernels on a CPU (cpu_op
    graph_N_cpp_...), without a hash."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    if cpu:
        return [(e["name"], None) for e in events if e.get("cat") == "cpu_op" and re.match(r"graph_\d+_cpp_", e["name"])]
    by_external: dict[object, str] = {}
    launchers: dict[object, list[tuple[float, float, str]]] = {}  # tid -> (start, end, hash) of launching ops
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and args.get("kernel_hash"):
            if args.get("External id") is not None:
                by_external[args["External id"]] = args["kernel_hash"]
            start = float(e["ts"])
            launchers.setdefault(e.get("tid"), []).append((start, start + float(e.get("dur", 0)), args["kernel_hash"]))
    for spans in launchers.values():
        spans.sort()
    by_correlation: dict[object, str] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and corr is not None and e.get("tid") in launchers:
            spans, ts = launchers[e.get("tid")], float(e["ts"])
            i = bisect_right(spans, (ts, float("inf"), "")) - 1
            while i >= 0 and spans[i][1] < ts:
                i -= 1
            if i >= 0:
                by_correlation[corr] = spans[i][2]
    out = []
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("triton_"):
            args = e.get("args") or {}
            digest = by_external.get(args.get("External id")) if args.get("External id") is not None else None
            out.append((e["name"], digest or by_correlation.get(args.get("correlation"))))
    return out


def check_compiled(check: Check, stage: Stage, name: str, mode: str, path: Path) -> bool:
    """The provenance of one compiled trace; True when every check on it passed."""
    before = len(stage.failed)
    label = f"{name} {mode}"
    trace = load(path)
    block = (trace.get("kerneltui") or {}).get("provenance") or {}
    records = block.get("kernels") or []
    if not stage.expect(bool(records), f"{label}: provenance records", block.get("reason", "no block")):
        return False
    by_name: dict[str, list[dict]] = {}
    for k in records:
        for n in {k.get("trace_name"), k.get("name")} - {None}:
            by_name.setdefault(n, []).append(k)
    by_hash = {k["kernel_hash"]: k for k in records if k.get("kernel_hash")}
    events = generated_kernels(trace, check.cpu)
    stage.expect(bool(events), f"{label}: generated kernels in the trace")
    joined, missing, other_hash = [], set(), set()
    for n, digest in events:
        k = by_hash.get(digest) if digest else None
        named = by_name.get(n) or []
        if k is None and digest and named and all(r.get("kernel_hash") for r in named):
            other_hash.add(n)  # records of that name, all of other kernels (another graph's, say)
        k = k or (named or [None])[0]
        if k is None:
            missing.add(n)
        else:
            joined.append(k)
    stage.expect(not missing, f"{label}: every generated kernel has a record", sorted(missing)[:5] or None)
    stage.expect(not other_hash, f"{label}: a hashed kernel's record has its hash", sorted(other_hash)[:5] or None)
    seen = {id(k): k for k in joined}.values()
    bare = sorted({k["name"] for k in seen if not k.get("extern") and (not k.get("aten_ops") or not k.get("source_lines"))})
    stage.expect(not bare, f"{label}: records with ATen ops and source lines", bare[:5] or None)
    keyless = sorted({k["name"] for k in records if not k.get("graph") or not k.get("cache_key") or not k.get("compile_id")})
    stage.expect(not keyless, f"{label}: records with graph, cache key and compile id", keyless[:5] or None)
    backward = [k for k in seen if str(k.get("graph", "")).endswith("_backward") and not k.get("extern")]
    if backward:
        stage.expect(all(k.get("source_lines") for k in backward), f"{label}: backward records have source lines",
                     sorted({k["name"] for k in backward if not k.get("source_lines")})[:5] or None)
    repeated = sorted(n for n, ks in by_name.items()  # generated kernels of one name in several graphs
                      if not ks[0].get("extern") and len({k.get("kernel_hash") or k.get("graph") for k in ks}) > 1)
    hashed = sum(1 for _, d in events if d)
    if not check.cpu:
        product = product_join(path)
        stage.expect(product is not None and not product[1], f"{label}: kerneltui's join agrees with the kernels' hashes",
                     product[1][:5] if product else "kerneltui's join could not run (see the log)")
    if name == "add_relu":
        fused = [k for k in records if not k.get("extern")]
        ok = len(fused) == 1 and {op.split(".")[1] for op in fused[0].get("aten_ops", [])} == {"add", "relu"} and any(
            Path(s.get("file", "")).name == "add_relu.py" and s.get("code") == ADD_RELU_CODE
            for s in fused[0].get("source_lines", []))
        stage.expect(ok, f"{label}: one fused kernel covering add and relu at add_relu.py's line",
                     None if ok else [(k["name"], k.get("aten_ops"), k.get("source_lines")) for k in fused])
    capture = (trace.get("kerneltui") or {}).get("capture") or {}
    stage.facts[label] = {"records": len(records), "kernel_events": len(events), "with_hash": hashed,
                          "names_in_several_graphs": repeated[:10], "source": block.get("source"),
                          "compile_seconds": capture.get("compile_seconds"), "trace": path.name,
                          "size_kib": round(path.stat().st_size / 1024, 1)}
    return len(stage.failed) == before


def product_join(path: Path) -> tuple[int, list[str]] | None:
    """kerneltui's own join (analysis/provenance/join.py) over the trace's GPU rows: (rows joined,
    rows whose record's kernel_hash is not the row's). None where that API is not as expected."""
    try:
        from kerneltui.analysis.provenance.join import gpu_records, of_trace
        from kerneltui.trace import load_trace

        trace = load_trace(path)
        records = gpu_records(trace, of_trace(trace))
        hashes = trace.gpu["kernel_hash"].tolist()
        names = trace.names_of(trace.gpu["name"].to_numpy()).tolist()
    except Exception as exc:  # noqa: BLE001  (others change that code: report, do not stop)
        print(f"  note: kerneltui's join not checked ({type(exc).__name__}: {exc})", flush=True)
        return None
    wrong = [f"{n}: record {r.kernel_hash}, launch {h}" for n, h, r in zip(names, hashes, records)
             if r is not None and isinstance(h, str) and h and getattr(r, "kernel_hash", None) and r.kernel_hash != h]
    return sum(r is not None for r in records), wrong


def summary_json(check: Check, stage: Stage, path: Path, label: str, env: dict | None = None) -> dict | None:
    rc, output = check.kt(stage, ["summary", str(path), "--format", "json", "--no-cache"], label, env)
    if rc != 0:
        return None
    try:
        return json.loads(output[output.index("{"):output.rindex("}") + 1])
    except ValueError:
        stage.expect(False, f"{label}: JSON output", output[:200])
        return None


# ---- the stages ------------------------------------------------------------------------------------

ENV_PROBE = r"""
import importlib, json, os, sys
facts = {"python": sys.version.split()[0], "executable": sys.executable}
for name in ("kerneltui", "orjson", "msgspec", "textual", "rich", "pandas", "numpy", "pyarrow"):
    try:
        m = importlib.import_module(name)
        facts[name] = [getattr(m, "__version__", "?"), os.path.dirname(m.__file__)]
    except Exception as exc:
        facts[name] = [None, f"{type(exc).__name__}: {exc}"]
try:
    from kerneltui.trace import scanner
    facts["scanner_built"] = scanner._scan is not None
    facts["scanner_file"] = getattr(scanner._scan, "__file__", None)
    facts["decoder"] = "C scanner" if scanner.scanner_in_use() else "python"
except Exception as exc:
    facts["decoder"] = f"{type(exc).__name__}: {exc}"
import torch
facts["torch"] = torch.__version__
facts["cuda_available"] = torch.cuda.is_available()
facts["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
facts["cuda"] = torch.version.cuda
try:
    import triton
    facts["triton"] = triton.__version__
except Exception:
    facts["triton"] = None
print("FACTS " + json.dumps(facts))
"""

OPEN_PROBE = r"""
import asyncio, sys
from kerneltui.tui.app import build_app

async def main():
    app = build_app(sys.argv[1])
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            await app.workers.wait_for_complete()
        except Exception:
            pass
        for _ in range(30):
            await pilot.pause()
        error = getattr(app, "error", None)
        print(f"screen {type(app.screen).__name__}, error {error!r}")
        sys.exit(1 if error else 0)

asyncio.run(main())
"""


def stage_env(check: Check, stage: Stage) -> None:
    rc, output = check.kt(stage, [], "imports and versions", python=["-c", ENV_PROBE])
    facts = {}
    for line in output.splitlines():
        if line.startswith("FACTS "):
            facts = json.loads(line[6:])
    stage.facts.update(facts)
    check.header.update({k: facts.get(k) for k in ("torch", "device", "python", "decoder")})
    for name in ("kerneltui", "orjson", "msgspec", "textual", "pandas", "numpy", "pyarrow"):
        version, where = facts.get(name) or (None, "not probed")
        stage.expect(version is not None, f"import {name}", where if version is None else None)
    if facts.get("kerneltui"):
        where = Path(facts["kerneltui"][1] or "")
        stage.expect(where == ROOT / "kerneltui", "kerneltui is this checkout's", str(where))
    if rc == 0:
        stage.expect(facts.get("cuda_available") is (not check.cpu), "CUDA available" if not check.cpu
                     else "CUDA hidden (--cpu)", facts.get("device"))
        stage.expect(str(facts.get("decoder", "")) in ("C scanner", "python"), "a decoder", facts.get("decoder"))
    check.kt(stage, ["--version"], "kerneltui --version")
    check.kt(stage, ["summary", str(SHIPPED)], "summary of the shipped add_relu_1M trace")


def stage_add_relu(check: Check, stage: Stage) -> None:
    found = check.capture(stage, "add_relu", "eager,compiled")
    ok_eager = "eager" in found
    ok_compiled = "compiled" in found and check_compiled(check, stage, "add_relu", "default", found["compiled"])
    if ok_eager:
        block = (load(found["eager"]).get("kerneltui") or {})
        ok_eager = stage.expect("capture" in block and "provenance" not in block,
                                "add_relu eager: a capture block, no provenance", sorted(block))
    if not check.cpu and ok_eager and ok_compiled:
        counts = []
        for mode in ("eager", "compiled"):
            s = summary_json(check, stage, found[mode], f"summary --format json {mode}")
            counts.append(((s or {}).get("summary") or {}).get("launches_per_iteration"))
        ok_eager = ok_compiled = stage.expect(counts == [2, 1], "add_relu: GPU launches per call eager 2, compiled 1",
                                              counts)
    stage.facts["pair"] = {m: p.name for m, p in found.items()}
    if ok_eager and ok_compiled:
        check.keep(stage, found["eager"], found["compiled"])
        pair = check.out / "traces"
        pair.mkdir(exist_ok=True)
        for p in (found["eager"], found["compiled"]):
            shutil.copy(p, pair / p.name)


def record_key(k: dict) -> tuple:
    return k.get("name"), k.get("trace_name"), tuple(k.get("aten_ops") or ())


def pair_of(check: Check, name: str) -> tuple[Path | None, Path | None]:
    eager = sorted(check.traces.glob(f"{name}_*eager.json.gz"))
    compiled = sorted(check.traces.glob(f"{name}_*compiled.json.gz"))
    return (eager[0] if eager else None), (compiled[0] if compiled else None)


def stage_summary(check: Check, stage: Stage) -> None:
    eager, compiled = pair_of(check, "add_relu")
    if not stage.expect(eager is not None and compiled is not None, "the add_relu pair from the stage before"):
        return
    check.kt(stage, ["summary", str(eager)], "summary eager")
    check.kt(stage, ["summary", str(compiled)], "summary compiled")
    scanner = summary_json(check, stage, compiled, "summary --format json (default decoder)")
    python = summary_json(check, stage, compiled, "summary --format json (KERNELTUI_DECODER=python)",
                          {"KERNELTUI_DECODER": "python"})
    if scanner is not None and python is not None:
        stage.expect(scanner == python, "the C scanner and the Python decoder give the same summary")
    rc, table_text = check.kt(stage, ["diff", str(eager), str(compiled), "--format", "table"], "diff --format table")
    if rc == 0:
        (check.traces / "add_relu_diff.txt").write_text(table_text)
        stage.facts["diff_table"] = table_text.splitlines()[:40]
    rc, diff_json = check.kt(stage, ["diff", str(eager), str(compiled), "--format", "json"], "diff --format json")
    if rc == 0:
        try:
            json.loads(diff_json[diff_json.index("{"):diff_json.rindex("}") + 1])
            stage.expect(True, "diff --format json is JSON")
        except ValueError as exc:
            stage.expect(False, "diff --format json is JSON", str(exc))
    rc, output = check.kt(stage, [], "open the diff's compiled trace headless", python=["-c", OPEN_PROBE, str(compiled)])
    stage.facts["open"] = output.strip().splitlines()[-1:] if output.strip() else []


def stage_provenance(check: Check, stage: Stage) -> None:
    eager, compiled = pair_of(check, "add_relu")
    if stage.expect(compiled is not None, "the add_relu pair from the stage before"):
        only = check.work / "provenance-only"
        check.kt(stage, ["capture", str(EXAMPLES / "add_relu.py"), *check.params("add_relu"), "--provenance-only",
                         "-o", str(only)], "capture add_relu --provenance-only")
        files = sorted(only.glob("*.provenance.json"))
        if stage.expect(len(files) == 1, "add_relu --provenance-only: one file", [f.name for f in files]):
            written = json.loads(files[0].read_text())
            in_trace = (load(compiled).get("kerneltui") or {}).get("provenance") or {}
            stage.expect(sorted(map(record_key, written.get("kernels", []))) == sorted(map(record_key, in_trace.get("kernels", []))),
                         "add_relu --provenance-only: the trace's records")
            shutil.copy(files[0], check.traces / files[0].name)
            check.kt(stage, ["diff", str(eager), str(compiled), "--provenance", str(files[0]), "--format", "table"],
                     "diff --provenance FILE")
    if check.args.quick:
        return
    for name in ("train_step", "gpt_step"):
        found = check.capture(stage, name, "eager,compiled")
        if "compiled" in found and check_compiled(check, stage, name, "default", found["compiled"]) and "eager" in found:
            rc, text = check.kt(stage, ["diff", str(found["eager"]), str(found["compiled"]), "--format", "table"],
                                f"diff {name}")
            if rc == 0:
                (check.traces / f"{name}_diff.txt").write_text(text)
                check.keep(stage, found["eager"], found["compiled"])


def stage_cudagraphs(check: Check, stage: Stage) -> None:
    for name, mode, optional in CUDAGRAPH_PLAN:
        if optional is not None and check.left() < optional:
            stage.facts.setdefault("optional_not_reached", []).append(f"{name} {mode}")
            print(f"  {name} {mode}: optional, not started with {check.left():.0f} s left", flush=True)
            continue
        if check.left() < 30:
            stage.skipped.append(f"{name} {mode}")
            continue
        found = check.capture(stage, name, "compiled", mode, AUTOTUNE_ENV if mode == "max-autotune" else None)
        if "compiled" in found and check_compiled(check, stage, name, mode, found["compiled"]):
            check.keep(stage, found["compiled"])


RUNNERS = {"env": stage_env, "add_relu": stage_add_relu, "summary": stage_summary,
           "provenance": stage_provenance, "cudagraphs": stage_cudagraphs}


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--cpu", action="store_true", help="run where there is no CUDA (CUDA hidden): the dry run")
    parser.add_argument("--quick", action="store_true",
                        help="env, add_relu, summary, and provenance of add_relu only (the CI dry run)")
    parser.add_argument("--stages", help=f"comma-separated, from {','.join(STAGES)} (default: all; with --quick "
                        "all but cudagraphs)")
    parser.add_argument("--out", type=Path, help="the results folder (default: $OUT, else a temporary one)")
    parser.add_argument("--deadline", type=float, default=None, metavar="S",
                        help="stop everything after S seconds in all (default: 280 on a GPU, 1500 with --cpu)")
    parser.add_argument("--command-timeout", type=float, default=200, metavar="S",
                        help="one command's limit (default: %(default)s)")
    parser.add_argument("--tar-limit-mib", type=float, default=15, help="traces.tar's size cap (default: %(default)s)")
    parser.add_argument("--warm-cache", action="store_true", help="use the usual Inductor cache, not a fresh one")
    args = parser.parse_args(argv)
    chosen = [s for s in (args.stages or "").split(",") if s] or [
        s for s in STAGES if not (args.quick and s == "cudagraphs")]
    if unknown := [s for s in chosen if s not in STAGES]:
        parser.error(f"unknown stage: {unknown[0]} (from {', '.join(STAGES)})")
    if args.deadline is None:
        args.deadline = 1500 if args.cpu else 280
    # torch and the device, for the table's first line even where the env stage is not run: from the
    # CUDA probe on a GPU; on a CPU from torch's metadata (importing torch would take the deadline's time)
    header = {"torch": _torch_version(), "device": "CPU"}
    if not args.cpu:
        says = ("import torch; c = torch.cuda.is_available(); print(c); print(torch.__version__); "
                "print(torch.cuda.get_device_name() if c else '')")
        probe = subprocess.run([sys.executable, "-c", says], capture_output=True, text=True, check=False)
        said = probe.stdout.splitlines()
        if said[:1] != ["True"] or len(said) < 3:
            print("gpu_check: CUDA is not available (--cpu runs the dry run)" + (
                f": {probe.stderr.strip().splitlines()[-1]}" if probe.stderr.strip() else ""), file=sys.stderr)
            return 2
        header = {"torch": said[1], "device": said[2]}
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    work = Path(tempfile.mkdtemp(prefix="kerneltui-gpu-check-"))
    out = out or work / "out"
    out.mkdir(parents=True, exist_ok=True)
    check = Check(args, out, work, started)
    check.header.update(header)
    check.traces.mkdir()
    print(f"gpu check: stages {','.join(chosen)}; results in {out}; work in {work}", flush=True)
    for stage in check.stages:
        if stage.name not in chosen:
            stage.status = "not run"
            continue
        if check.left() < 20:
            stage.status = "skipped"
            check.write()
            continue
        print(f"[{stage.name}] (budget {BUDGET_S[stage.name]} s, {check.left():.0f} s left)", flush=True)
        started = time.monotonic()
        try:
            RUNNERS[stage.name](check, stage)
        except Exception:  # noqa: BLE001  (a stage that breaks is a failed stage; the next ones still run)
            stage.expect(False, f"{stage.name}: the check itself raised", traceback.format_exc().splitlines()[-3:])
            traceback.print_exc()
        stage.seconds = time.monotonic() - started
        stage.status = "FAIL" if stage.failed else "partial" if stage.skipped else "pass"
        check.pack()
        check.write()
    check.header["finished"] = True
    check.write()
    print("\n" + table(check), end="")
    shutil.rmtree(work / "inductor-cache", ignore_errors=True)
    return {"PASS": 0, "FAIL": 1, "INCOMPLETE": 3}[verdict_of(check)]


if __name__ == "__main__":
    sys.exit(main())
