"""A few hundred fuzz mutants of the real traces on every run (benchmarks/fuzz.py runs thousands).

Fixed seed, so the same mutants every time. The promise checked is the one tests/fuzzing.py
states: exit 0/1/2, one-line messages, no traceback, under 10 s and 2 GB. A failure prints its
place (exception type and innermost kerneltui frame), the saved mutant and the command to rerun.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from tests import fuzzing

SEED = 20240611
COUNT = 400
BROWSER_SHARE = 0.015  # the headless browser is slower: a few mutants only
MAX_EVENTS = 400  # windows of the big seeds: small mutants, quick stages
# The 20,000-kernel and decompression-bomb mutants take seconds each: test_robust_analysis covers the
# first, benchmarks/fuzz.py both.
CI_CLASSES = tuple(c for c in fuzzing.CLASSES if c != "many_kernels")
CI_STAGES = ("load", "summary", "summary-json", "diff-ab", "diff-variant", "browser")


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    files = fuzzing.seed_files()
    assert files, "no seed traces (traces/, tests/data/)"
    cache = tmp_path_factory.mktemp("fuzz-cache")
    found = fuzzing.prepare_bases(files, cache=cache, max_events=MAX_EVENTS, windows=1, raw_limit=4 << 20)
    assert any(b.parsed for b in found)
    return found


def _fuzz_driver():
    """benchmarks/fuzz.py, imported by path (benchmarks/ is no package): its worker pool survives a segfault."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz.py"
    spec = importlib.util.spec_from_file_location("kerneltui_fuzz_driver", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(results: list[dict]) -> str:
    """One block per distinct place: how many mutants, which stages, and the smallest mutant to rerun."""
    groups: dict[tuple, list] = {}
    for r in results:
        for f in r["failures"]:
            groups.setdefault((f["kind"], f["type"], f["place"]), []).append((r, f))
    lines = []
    for (kind, typ, place), hits in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        r, f = min(hits, key=lambda h: h[0]["size"])
        stages = sorted({h[1]["stage"] for h in hits})
        lines.append(f"{kind}: {typ} at {place}:{f['line']} ({len({h[0]['index'] for h in hits})} mutants; "
                     f"{', '.join(stages)})")
        lines.append(f"    {f['message'][:200]}")
        lines.append(f"    mutant {r['index']} ({r['cls']} of {r['base']}, {r['size']:,} B): {r['info'][:160]}")
        lines.append(f"    saved {r['saved']}")
        lines.append(f"    {f['command'][:300]}")
        lines += [f"      {frame}" for frame in f["frames"][-4:]]
    return "\n".join(lines)


def test_mutants_keep_the_promise(bases, tmp_path):
    """In two worker processes (this machine's two cores): a mutant that segfaults fails the test, not pytest."""
    start = time.perf_counter()
    results = _fuzz_driver().run_batch(
        range(COUNT), bases, CI_CLASSES, seed=SEED, jobs=2, out=tmp_path / "failed",
        browser_share=BROWSER_SHARE, stages=CI_STAGES, skip_isolated=True,
    )
    assert len(results) == COUNT
    failing = [r for r in results if r["failures"]]
    print(f"{COUNT} mutants in {time.perf_counter() - start:.1f} s, {len(failing)} failing")
    if failing:  # (pytest.fail, not assert: the message, without a repr of every result)
        pytest.fail(f"{len(failing)} of {COUNT} mutants broke the promise:\n{_report(failing)}", pytrace=False)


def test_every_class_makes_mutants_and_they_are_reproducible(bases):
    small = [b for b in bases if b.parsed]
    for index, cls in enumerate(fuzzing.CLASSES):
        if cls in ("many_kernels", "huge"):
            continue  # big by design
        one = fuzzing.make_mutant(index, SEED, small, fuzzing.CLASSES)
        again = fuzzing.make_mutant(index, SEED, small, fuzzing.CLASSES)
        assert one.cls == cls
        assert (one.data, one.info, one.kind) == (again.data, again.info, again.kind)
        assert one.data is not None or one.kind in ("missing", "directory")


def test_the_checks_catch_a_traceback(bases, tmp_path, monkeypatch):
    """The fuzz test can fail: an analysis bug shows up as an exception at its place."""
    from kerneltui.trace import summary

    def broken(trace):
        raise IndexError("planted")

    monkeypatch.setattr(summary, "summarize", broken)
    base = next(b for b in bases if b.parsed)
    mutant = fuzzing.Mutant(0, "reserialize", base, "as is", Path(base.path).read_bytes(), ".json.gz")
    result = fuzzing.run_mutant(mutant, tmp_path, stages_wanted=("load",))
    assert [(f.kind, f.type, f.stage, f.message) for f in result.failures] == [("exception", "IndexError", "load", "planted")]
    assert result.saved == ""  # nothing kept unless asked


def test_the_checks_catch_an_exit_status_and_stray_stderr(tmp_path):
    stage = fuzzing.Stage("summary", ["summary", "x"], rc=3, stdout="", stderr="oops\n")
    mutant = fuzzing.Mutant(0, "foreign", None, "", b"")
    kinds = {f.kind for f in fuzzing.judge(stage, mutant, frozenset({0, 2}), "table", "kerneltui summary x")}
    assert kinds == {"exit-status", "stderr-format"}
    stage = fuzzing.Stage("summary-json", ["summary", "x"], rc=0, stdout='{"a": NaN}', stderr="")
    kinds = {f.kind for f in fuzzing.judge(stage, mutant, frozenset({0, 2}), "json", "")}
    assert kinds == {"output-json"}
