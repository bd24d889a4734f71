"""One prepared check of capture provenance on a CUDA machine (docs/capture.md#provenance).

    python benchmarks/gpu_check_provenance.py                 # needs CUDA; a few minutes on an H200
    OUT=/somewhere python benchmarks/gpu_check_provenance.py  # also copies traces, diffs and log there
    python benchmarks/gpu_check_provenance.py --cpu --compile-modes default   # the plumbing, on a CPU

For each workload (examples/add_relu.py, mlp.py, train_step.py, gpt_step.py) it runs
`kerneltui capture` eager and compiled (default) and compiled max-autotune, in a fresh Inductor
cache, then `kerneltui diff` eager against each compiled trace, and checks:

  - every capture and diff exits 0, and each compiled trace has a provenance block;
  - add_relu: 2 GPU kernels per call eager, 1 compiled (default mode), and its one kernel's
    record covers aten.add and aten.relu at examples/add_relu.py's `(a + b).relu()`;
  - every Triton kernel in every compiled trace has a record, joined by name or by the
    kernel_hash its launching op carries, with ATen ops and a source line;
  - `--provenance-only` on add_relu (now an FX-cache hit) gives the records its trace has, and
    `kerneltui diff --provenance FILE` accepts that file.

With --cpu the C++ kernels (cpu_op events graph_N_cpp_...) stand in for the Triton ones and
the launch counts are not checked. Prints a summary; exits 1 if any check fails, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
WORKLOADS = ("add_relu", "mlp", "train_step", "gpt_step")
COMPILE_MODES = ("default", "max-autotune")
ADD_RELU_CODE = "return (a + b).relu()"


@dataclass
class Check:
    failures: list[str] = field(default_factory=list)
    rows: list[tuple[str, ...]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def expect(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(what)
            print(f"FAIL {what}", flush=True)
        return ok


def run(check: Check, argv: list[str], deadline: float, env: dict[str, str], label: str) -> tuple[int, str]:
    """A kerneltui command in a subprocess, within what is left of the deadline."""
    left = deadline - time.monotonic()
    if left < 20:
        check.expect(False, f"{label}: not run, the deadline was reached")
        return -1, ""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "kerneltui", *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=left, check=False)
    except subprocess.TimeoutExpired:
        check.expect(False, f"{label}: timed out after {left:.0f} s")
        return -1, ""
    output = done.stdout + done.stderr
    check.log.append(f"$ kerneltui {' '.join(argv)}\n# rc {done.returncode}, {time.monotonic() - started:.1f} s\n{output}")
    print(f"{label}: rc {done.returncode} in {time.monotonic() - started:.1f} s", flush=True)
    check.expect(done.returncode == 0, f"{label}: exit {done.returncode}: {output.strip().splitlines()[-1:]}")
    return done.returncode, output


def load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def trace_paths(out_dir: Path, name: str, compile_mode: str) -> tuple[Path, Path]:
    """The eager trace and the compiled one of that mode (workloads run with their defaults)."""
    found = sorted(out_dir.glob(f"{name}_*eager.json.gz"))
    suffix = "compiled" if compile_mode == "default" else f"compiled-{compile_mode}"
    return (found[0] if found else out_dir / f"{name}_eager.json.gz",
            next(iter(sorted(out_dir.glob(f"{name}_*{suffix}.json.gz"))), out_dir / f"{name}_{suffix}.json.gz"))


def generated_kernels(trace: dict, cpu: bool) -> list[tuple[str, str | None]]:
    """(name, kernel_hash) of each generated-kernel event: Triton kernels on the GPU, C++ ones on a CPU."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    if cpu:
        return [(e["name"], None) for e in events if e.get("cat") == "cpu_op" and re.match(r"graph_\d+_cpp_", e["name"])]
    hashes = {}  # Inductor's launcher records a cpu_op named after the kernel, with its kernel_hash
    for e in events:
        digest = (e.get("args") or {}).get("kernel_hash")
        if e.get("cat") == "cpu_op" and digest:
            hashes.setdefault(e["name"], digest)
    return [(e["name"], hashes.get(e["name"])) for e in events
            if e.get("cat") == "kernel" and e["name"].startswith("triton_")]


def check_compiled(check: Check, name: str, mode: str, path: Path, cpu: bool) -> tuple[str, ...]:
    label = f"{name} compiled {mode}"
    if not check.expect(path.is_file(), f"{label}: no trace at {path}"):
        return (name, mode, "-", "-", "-", "-")
    trace = load(path)
    block = trace.get("kerneltui", {}).get("provenance")
    if not check.expect(isinstance(block, dict) and block.get("kernels"), f"{label}: no provenance records "
                        f"({(block or {}).get('reason', 'no block')})"):
        return (name, mode, "-", "0", "-", "-")
    records = block["kernels"]
    by_name = {n: k for k in records for n in (k["trace_name"], k["name"])}
    by_hash = {k["kernel_hash"]: k for k in records if k.get("kernel_hash")}
    events = generated_kernels(trace, cpu)
    missing = sorted({n for n, h in events if n not in by_name and h not in by_hash})
    matched = [by_name.get(n) or by_hash.get(h) for n, h in events]
    matched = [k for k in matched if k is not None]
    check.expect(bool(events), f"{label}: no generated kernel in the trace")
    check.expect(not missing, f"{label}: {len(missing)} kernels without provenance: {missing[:5]}")
    bare = sorted({k["name"] for k in matched if not k["aten_ops"] or not k["source_lines"]})
    check.expect(not bare, f"{label}: records without ATen ops or source lines: {bare[:5]}")
    if name == "add_relu":
        fused = [k for k in records if not k["extern"]]
        ok = len(fused) == 1 and {op.split(".")[1] for op in fused[0]["aten_ops"]} == {"add", "relu"} and any(
            s["file"] == str(EXAMPLES / "add_relu.py") and s["code"] == ADD_RELU_CODE for s in fused[0]["source_lines"])
        check.expect(ok, f"{label}: expected one kernel covering add and relu at add_relu.py, got "
                     f"{[(k['name'], k['aten_ops'], k['source_lines']) for k in fused]}")
    capture = trace["kerneltui"]["capture"]
    return (name, mode, f"{capture.get('compile_seconds')}", str(len(records)),
            f"{len(events) - sum(n in missing for n, _ in events)}/{len(events)}", block["source"])


def launches_per_call(path: Path) -> float:
    sys.path.insert(0, str(ROOT))
    from kerneltui.trace import load_trace
    from kerneltui.trace.summary import summarize

    return summarize(load_trace(path)).launches_per_iteration


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--cpu", action="store_true", help="run where there is no CUDA: checks the plumbing only")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated (default: all of {WORKLOADS})")
    parser.add_argument("--compile-modes", default=",".join(COMPILE_MODES), help="comma-separated (default: %(default)s)")
    parser.add_argument("--deadline", type=float, default=540, metavar="S",
                        help="stop starting commands after S seconds in all (default: %(default)s)")
    parser.add_argument("--warm-cache", action="store_true", help="use the usual Inductor cache, not a fresh one")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.compile_modes.split(",") if m]
    if unknown := [w for w in workloads if w not in WORKLOADS] + [m for m in modes if m not in COMPILE_MODES]:
        parser.error(f"unknown workload or compile mode: {unknown[0]}")
    if "default" not in modes:
        parser.error("--compile-modes must include default (the eager/compiled pair is captured with it)")

    import torch  # after --help, which must work without a GPU

    if not args.cpu and not torch.cuda.is_available():
        print("gpu_check_provenance: CUDA is not available (use --cpu to check the plumbing)", file=sys.stderr)
        return 2
    started = time.monotonic()
    deadline = started + args.deadline
    check = Check()
    work = Path(tempfile.mkdtemp(prefix="kerneltui-gpu-check-"))
    out_dir = work / "traces"
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    if not args.warm_cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor-cache")
    if args.cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if not args.cpu else 'CPU'}; work in {work}",
          flush=True)
    try:
        for name in workloads:
            script = str(EXAMPLES / f"{name}.py")
            run(check, ["capture", script, "--modes", "eager,compiled", "-o", str(out_dir)], deadline, env,
                f"capture {name}")
            for mode in modes[1:]:
                run(check, ["capture", script, "--modes", "compiled", "--compile-mode", mode, "-o", str(out_dir)],
                    deadline, env, f"capture {name} {mode}")
            for mode in modes:
                eager, compiled = trace_paths(out_dir, name, mode)
                check.rows.append(check_compiled(check, name, mode, compiled, args.cpu))
                if eager.is_file() and compiled.is_file():
                    _, table = run(check, ["diff", str(eager), str(compiled), "--format", "table"], deadline, env,
                                   f"diff {name} {mode}")
                    (out_dir / f"{name}_diff_{mode}.txt").write_text(table)
        if "add_relu" in workloads and not args.cpu:
            eager, compiled = trace_paths(out_dir, "add_relu", "default")
            if eager.is_file() and compiled.is_file():
                counts = (launches_per_call(eager), launches_per_call(compiled))
                check.expect(counts == (2, 1), f"add_relu: GPU launches per call eager, compiled = {counts}, not (2, 1)")
        if "add_relu" in workloads:
            only = work / "provenance-only"
            run(check, ["capture", str(EXAMPLES / "add_relu.py"), "--provenance-only", "-o", str(only)], deadline,
                env, "capture add_relu --provenance-only")
            files = sorted(only.glob("*.provenance.json"))
            eager, compiled = trace_paths(out_dir, "add_relu", "default")
            if check.expect(len(files) == 1 and compiled.is_file(), "add_relu --provenance-only: no file"):
                written = json.loads(files[0].read_text())
                in_trace = load(compiled)["kerneltui"]["provenance"]
                check.expect(written["kernels"] == in_trace["kernels"],
                             "add_relu --provenance-only: its records differ from the trace's")
                shutil.copy(files[0], out_dir / files[0].name)
                run(check, ["diff", str(eager), str(compiled), "--provenance", str(files[0]), "--format", "table"],
                    deadline, env, "diff add_relu --provenance")
    finally:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "commands.log").write_text("\n".join(check.log))
        if os.environ.get("OUT"):
            target = Path(os.environ["OUT"]) / "gpu_check_provenance"
            shutil.copytree(out_dir, target, dirs_exist_ok=True)
            print(f"copied the traces, diffs and log to {target}")

    print(f"\n{'workload':<12}{'mode':<14}{'compile s':>10}{'records':>9}{'kernels w/ record':>19}  source")
    for name, mode, seconds, records, joined, source in check.rows:
        print(f"{name:<12}{mode:<14}{seconds:>10}{records:>9}{joined:>19}  {source}")
    print(f"\n{len(check.failures)} failure{'s' * (len(check.failures) != 1)} in "
          f"{time.monotonic() - started:.0f} s" + "".join(f"\n  - {f}" for f in check.failures))
    shutil.rmtree(work / "inductor-cache", ignore_errors=True)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
