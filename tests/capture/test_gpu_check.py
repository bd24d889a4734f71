"""The GPU check (benchmarks/gpu_check.py, docs/capture.md#the-gpu-check): its CPU dry run, its files.

The dry run (`--cpu --quick`) runs the check's first four stages as the GPU machine would, with
CUDA hidden: kerneltui from this checkout, a fresh Inductor cache, about a minute here. The join
that reads kernel hashes off the launches is checked on a made-up GPU trace, without torch.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "benchmarks" / "gpu_check.py"
# what may come back from the device tool's $OUT: 8 files, 2 folders down, plain names
OUT_NAME = re.compile(r"[A-Za-z0-9._-]+")


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)
    spec.loader.exec_module(module)
    return module


def test_a_rerun_without_the_env_stage_still_names_torch_and_the_device(tmp_path):
    torch = pytest.importorskip("torch")
    out = tmp_path / "out"
    # summary alone reads add_relu's pair, which this run did not make: it fails, at once
    done = subprocess.run([sys.executable, str(CHECK), "--cpu", "--stages", "summary", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    table = (out / "results.txt").read_text().splitlines()
    assert table[0] == f"kerneltui GPU check (CPU dry run): CPU, torch {torch.__version__}"
    assert table[-1].startswith("FAIL: 0/1 stages passed")


def test_cpu_dry_run_passes_and_writes_its_stage_files(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(CHECK), "--cpu", "--quick", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    results = json.loads((out / "results.json").read_text())
    assert results["finished"] is True and results["cpu"] is True
    status = {s["name"]: s["status"] for s in results["stages"]}
    assert status == {"env": "pass", "add_relu": "pass", "summary": "pass", "provenance": "pass",
                      "cudagraphs": "not run"}
    for stage in results["stages"]:
        assert stage["failed"] == [] and all(c["ok"] for c in stage["checks"]), stage
    stages = {s["name"]: s for s in results["stages"]}
    assert stages["env"]["facts"]["kerneltui"][1] == str(ROOT / "kerneltui")  # the checkout's, not an install
    assert stages["env"]["facts"]["decoder"] in ("C scanner", "python")
    assert stages["add_relu"]["facts"]["add_relu default"]["records"] == 1
    pair = ["add_relu_n1000000_eager.json.gz", "add_relu_n1000000_compiled.json.gz"]
    assert stages["add_relu"]["traces"] == pair

    # the pass/fail table: printed at the end and written as results.txt
    table = (out / "results.txt").read_text()
    assert table in done.stdout
    rows = {line.split()[0]: line.split()[1] for line in table.splitlines()[2:-1]}
    assert rows == {"env": "pass", "add_relu": "pass", "summary": "pass", "provenance": "pass", "cudagraphs": "not"}
    assert re.search(r"^PASS: 4/4 stages passed in \d+ s$", table.splitlines()[-1])

    # the files, as the device tool brings them back: few, shallow, plainly named
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["check.log", "results.json", "results.txt", "traces.tar", *sorted(f"traces/{n}" for n in pair)]
    assert len(files) <= 7  # and setup.log from gpu_check.sh: 8 at most
    assert all(OUT_NAME.fullmatch(part) for f in files for part in f.split("/"))
    with tarfile.open(out / "traces.tar") as tar:
        members = sorted(tar.getnames())
    assert members == sorted([f"traces/{n}" for n in pair] + ["traces/add_relu_diff.txt",
                                                              "traces/add_relu_n1000000_compiled.provenance.json"])
    log = (out / "check.log").read_text()
    assert "capture" in log and "--provenance-only" in log and "# [summary] diff --format table: rc 0" in log


def test_a_deadline_skips_the_stages_it_reaches(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    # 21 s: env starts (a stage starts with 20 s left) and takes a few; add_relu does not
    done = subprocess.run([sys.executable, str(CHECK), "--cpu", "--stages", "env,add_relu", "--deadline", "21",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    results = json.loads((out / "results.json").read_text())
    status = {s["name"]: s["status"] for s in results["stages"]}
    assert done.returncode == 3, done.stdout  # INCOMPLETE: nothing failed, something left out
    assert status.pop("env") in ("pass", "partial")  # partial: the deadline stopped one of its commands
    assert status == {"add_relu": "skipped", "summary": "not run", "provenance": "not run", "cudagraphs": "not run"}
    assert re.search(r"^INCOMPLETE: [01]/1 stages passed in \d+ s; skipped: add_relu$",
                     (out / "results.txt").read_text().splitlines()[-1])


def test_usage_errors_exit_2():
    done = subprocess.run([sys.executable, str(CHECK), "--stages", "env,nope"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "unknown stage: nope" in done.stderr


def test_kernels_join_by_their_launch_hash_not_their_name():
    """Two graphs each launch a kernel called triton_poi_fused_add_0: each gets its own launch's
    kernel_hash (through the runtime call's correlation id); a CUDA-graph replay gets none."""
    check = load_check()

    def launch(ts, digest, corr):
        return [{"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_0", "ts": ts, "dur": 10, "tid": 1,
                 "args": {"kernel_hash": digest}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cuLaunchKernel", "ts": ts + 2, "dur": 5, "tid": 1,
                 "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "ts": ts + 20, "dur": 3, "tid": 7,
                 "args": {"correlation": corr}}]

    replay = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 500, "dur": 5, "tid": 1,
               "args": {"correlation": 9}},
              {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "ts": 520, "dur": 3, "tid": 7,
               "args": {"correlation": 9}}]
    trace = {"traceEvents": [*launch(100, "aaaa", 1), *launch(200, "bbbb", 2), *replay]}
    assert check.generated_kernels(trace, cpu=False) == [
        ("triton_poi_fused_add_0", "aaaa"), ("triton_poi_fused_add_0", "bbbb"), ("triton_poi_fused_add_0", None)]


def test_the_launch_hash_of_a_real_h200_kernel():
    """The shipped H200 trace: Inductor's launcher op and the kernel share an External id (the launch
    itself is a cuda_driver cuLaunchKernel)."""
    check = load_check()
    trace = json.loads(gzip.decompress((ROOT / "traces" / "add_relu_1M_compiled.json.gz").read_bytes()))
    assert check.generated_kernels(trace, cpu=False) == [
        ("triton_poi_fused_add_relu_0", "cyqo6qgngcleqcjm7nccqpqwmapn3gmvgbpsnnaser7sz3hxoxqi")]


def with_records(tmp_path: Path, records: list[dict]) -> Path:
    """The shipped H200 compiled trace with a provenance block, as a capture on a GPU writes it."""
    trace = json.loads(gzip.decompress((ROOT / "traces" / "add_relu_1M_compiled.json.gz").read_bytes()))
    trace["kerneltui"] = {"capture": {"compile_seconds": 1.5},
                          "provenance": {"version": 1, "source": "inductor provenance tracking", "torch": "2.11.0",
                                         "kernels": records}}
    path = tmp_path / "add_relu_n1000000_compiled.json.gz"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return path


def record(**changes) -> dict:
    return {"name": "triton_poi_fused_add_relu_0", "trace_name": "triton_poi_fused_add_relu_0",
            "graph": "0_inference", "cache_key": "fiqb4u5xzpxcsoundjww3ityicpcg4vasdmo", "compile_id": "0/0",
            "extern": False, "kernel_hash": "cyqo6qgngcleqcjm7nccqpqwmapn3gmvgbpsnnaser7sz3hxoxqi",
            "aten_ops": ["aten.add.Tensor", "aten.relu.default"], "post_grad_nodes": ["add", "relu"],
            "pre_grad_nodes": ["add", "relu"],
            "source_lines": [{"file": str(ROOT / "examples" / "add_relu.py"), "line": 14, "function": "add_relu",
                              "code": "return (a + b).relu()"}], "module_paths": [], **changes}


def test_the_gpu_checks_of_a_compiled_trace(tmp_path):
    """What the dry run cannot reach: the checks of a GPU trace's records (Triton kernels, hashes)."""
    check = load_check()
    gpu = SimpleNamespace(cpu=False)
    stage = check.Stage("add_relu")
    assert check.check_compiled(gpu, stage, "add_relu", "default", with_records(tmp_path, [record()])), stage.checks
    facts = stage.facts["add_relu default"]
    assert (facts["records"], facts["kernel_events"], facts["with_hash"], facts["compile_seconds"]) == (1, 1, 1, 1.5)

    stage = check.Stage("add_relu")
    assert not check.check_compiled(gpu, stage, "add_relu", "default",
                                    with_records(tmp_path, [record(aten_ops=[], cache_key=None)]))
    assert stage.failed == ["add_relu default: records with ATen ops and source lines",
                            "add_relu default: records with graph, cache key and compile id",
                            "add_relu default: one fused kernel covering add and relu at add_relu.py's line"]

    stage = check.Stage("add_relu")  # the record of another graph's kernel of that name: not this one's
    assert not check.check_compiled(gpu, stage, "add_relu", "default",
                                    with_records(tmp_path, [record(kernel_hash="another", graph="1_inference")]))
    # and kerneltui's own join fails too, until it joins by hash before name (issue 22)
    assert stage.failed[0] == "add_relu default: a hashed kernel's record has its hash"
    assert stage.failed[1:] in ([], ["add_relu default: kerneltui's join agrees with the kernels' hashes"])

    stage = check.Stage("train_step")  # a record of another kernel only: this one has none
    assert not check.check_compiled(gpu, stage, "train_step", "reduce-overhead", with_records(
        tmp_path, [record(name="triton_poi_fused_mul_1", trace_name="triton_poi_fused_mul_1", kernel_hash="x")]))
    assert stage.failed == ["train_step reduce-overhead: every generated kernel has a record"]
