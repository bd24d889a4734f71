"""The column cache (trace/cache.py): a warm load is a cold load, only faster; a bad cache only costs speed.

Every test runs with its own XDG_CACHE_HOME (tests/conftest.py), never ~/.cache.
"""

from __future__ import annotations

import ast
import errno
import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kerneltui import cli
from kerneltui.trace import cache
from kerneltui.trace.load import read_trace
from kerneltui.trace.model import load_trace
from kerneltui.trace.schema import KernelColumns
from tests.conftest import EXTERNAL_TRACES, PROJECT_TRACES, ROOT, SHARED_TRACES, cache_env

EVERY_TRACE = sorted(SHARED_TRACES.glob("*.json.gz")) + sorted(p for p in EXTERNAL_TRACES.iterdir() if p.name != "README.md")
SMALL = PROJECT_TRACES / "add_relu_1M_eager.json.gz"
OTHER = PROJECT_TRACES / "add_relu_1M_compiled.json.gz"


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*" + cache.SUFFIX)) if directory.is_dir() else []


def no_cold_loads(monkeypatch) -> None:
    """From here on, a load that does not come from the cache fails."""

    def refuse(*args, **kwargs):
        raise AssertionError("read the trace instead of the cache")

    monkeypatch.setattr(cache, "read_trace", refuse)


def no_cache_reads(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("read the cache")

    monkeypatch.setattr(cache, "read_entry", refuse)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- a warm load is a cold load ---------------------------------------------------------------------
@pytest.mark.parametrize("path", EVERY_TRACE, ids=lambda p: p.name)
def test_warm_summary_json_is_byte_for_byte_the_cold_one(path, capsys, monkeypatch, private_cache):
    cold = run_cli(capsys, "summary", str(path), "--format", "json")
    assert len(entries(private_cache)) == 1
    no_cold_loads(monkeypatch)
    warm = run_cli(capsys, "summary", str(path), "--format", "json")
    assert warm == cold


@pytest.mark.parametrize("path", EVERY_TRACE, ids=lambda p: p.name)
def test_warm_raw_trace_and_meta_equal_the_cold_ones(path, monkeypatch):
    raw, meta = read_trace(path)
    assert set(vars(raw)) == cache.RAW_FIELDS  # a new RawTrace field: keep it in the cache, bump SCHEMA_VERSION
    cache.load(path)  # cold: writes the entry
    no_cold_loads(monkeypatch)
    warm, warm_meta = cache.load(path)
    assert warm_meta == meta
    assert set(vars(warm)) == cache.RAW_FIELDS
    for name, column in raw.columns.items():
        assert warm.columns[name].dtype == column.dtype
        np.testing.assert_array_equal(warm.columns[name], column, err_msg=name)
    for field in sorted(cache.RAW_FIELDS - {"columns", "losses"}):
        assert getattr(warm, field) == getattr(raw, field), field
        assert type(getattr(warm, field)) is type(getattr(raw, field)), field
    assert [type(x) for lane in warm.lanes for x in lane] == [type(x) for lane in raw.lanes for x in lane]
    assert warm.losses.events == raw.losses.events and warm.losses.fields == raw.losses.fields


def test_warm_trace_columns_equal_and_are_writable(monkeypatch):
    cold = load_trace(SMALL)
    no_cold_loads(monkeypatch)
    warm = load_trace(SMALL)
    assert list(warm.events.columns) == list(cold.events.columns)
    for name in cold.events.columns:
        np.testing.assert_array_equal(warm.events[name].to_numpy(), cold.events[name].to_numpy(), err_msg=name)
    assert warm.names == cold.names and warm.shapes_blob == cold.shapes_blob and warm.lanes.equals(cold.lanes)
    assert warm.meta == cold.meta
    k = cache.entry_key(SMALL)
    raw, _ = cache.read_entry(cache.entry_path(k), k)
    raw.columns["ts"][0] += 1  # a private, copy-on-write mapping: the arrays are ordinary ones...
    raw, _ = cache.read_entry(cache.entry_path(k), k)
    assert raw.columns["ts"][0] == cold.events["ts"].iat[0]  # ...and the file is untouched


def test_the_path_a_warm_load_reports_is_the_one_asked_for(tmp_path, monkeypatch):
    link = tmp_path / "link.json.gz"
    link.symlink_to(SMALL)
    load_trace(SMALL)
    no_cold_loads(monkeypatch)
    assert load_trace(link).meta.path == str(link)  # the same resolved file: served from its entry
    monkeypatch.chdir(SMALL.parent)
    assert load_trace(SMALL.name).meta.path == SMALL.name


def test_progress_reaches_the_end_on_a_warm_load():
    load_trace(SMALL)
    seen = []
    load_trace(SMALL, progress=seen.append)
    assert seen[-1] == 1.0


# -- the key --------------------------------------------------------------------------------------
def padded_trace(path: Path, name: str, pad: int = 0) -> None:
    """add_relu_1M_eager as plain JSON, its kernel renamed to ``name`` (keep the length), ``pad`` bytes either side."""
    doc = json.loads(gzip.decompress(SMALL.read_bytes()))
    text = json.dumps({"pad0": " " * pad, **doc, "pad1": " " * pad}, indent=1)
    path.write_text(text.replace("vectorized_elementwise_kernel", name))


@pytest.mark.parametrize("pad", [0, 3 << 20], ids=["small", "changed-in-the-middle"])
def test_a_file_replaced_in_place_with_the_same_size_and_mtime_is_not_served_stale(tmp_path, pad):
    path = tmp_path / "t.json"
    padded_trace(path, "vectorized_elementwise_kernel", pad)
    before = os.stat(path)
    first = load_trace(path)
    assert "vectorized_elementwise_kernel" in " ".join(first.names)
    padded_trace(path, "vectorised_elementwise_kernel", pad)  # same length: same size; same inode
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    second = load_trace(path)
    names = " ".join(second.names)
    assert "vectorised_elementwise_kernel" in names and "vectorized_elementwise_kernel" not in names
    assert len(entries(cache.cache_dir())) == 1  # the stale entry went when the new one was written


def test_a_file_replaced_by_rename_is_not_served_stale(tmp_path):
    path = tmp_path / "t.json.gz"
    shutil.copy(SMALL, path)
    a = load_trace(path)
    new = tmp_path / "new.json.gz"
    shutil.copy(OTHER, new)
    os.replace(new, path)
    b = load_trace(path)
    assert b.names != a.names and b.names == load_trace(OTHER, cache=False).names


def test_the_key_names_the_file_and_the_loader():
    key = cache.entry_key(SMALL)
    assert key["path"] == os.path.realpath(SMALL)
    st = os.stat(SMALL)
    assert (key["size"], key["mtime_ns"], key["inode"]) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert key["schema"] == cache.SCHEMA_VERSION and key["kerneltui"] and len(key["edges"]) == 32
    assert key["loader"] == cache.loader_digest()


def test_an_entry_from_an_older_schema_is_not_used(monkeypatch):
    load_trace(SMALL)
    (old,) = entries(cache.cache_dir())
    monkeypatch.setattr(cache, "SCHEMA_VERSION", cache.SCHEMA_VERSION + 1)
    read = []
    real = cache.read_entry

    def spy(where, key):
        read.append(where)
        return real(where, key)

    monkeypatch.setattr(cache, "read_entry", spy)
    trace = load_trace(SMALL)
    assert old not in read and not trace.meta.warnings
    (new,) = entries(cache.cache_dir())
    assert new != old  # written anew, the old generation removed
    assert cache.entry_key(SMALL)["schema"] == cache.SCHEMA_VERSION


def test_an_entry_written_for_another_key_is_refused(monkeypatch):
    """Even at the right file name, an entry whose recorded key differs (an older loader) is not used."""
    load_trace(SMALL)
    (where,) = entries(cache.cache_dir())
    key = cache.entry_key(SMALL)
    with pytest.raises(cache.StaleEntry):
        cache.read_entry(where, {**key, "schema": key["schema"] - 1})


def test_every_module_the_loader_imports_is_in_the_digest():
    """An edit to any module read_trace runs on changes loader_digest(): LOADER_MODULES lists them all."""
    here = ROOT / "kerneltui" / "trace"
    seen, todo = set(), ["load"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((here / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kerneltui.trace"):
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                todo += [m.split(".")[2] for m in modules if m.count(".") == 2 and (here / f"{m.split('.')[2]}.py").exists()]
    assert seen <= set(cache.LOADER_MODULES), seen - set(cache.LOADER_MODULES)


# -- a bad entry only costs speed -----------------------------------------------------------------------
def damage_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def damage_garbage(p: Path) -> None:
    p.write_bytes(os.urandom(p.stat().st_size))


def damage_empty(p: Path) -> None:
    p.write_bytes(b"")


def damage_column(p: Path) -> None:
    """One byte of the ts column's data flipped: the Arrow structure is whole, the checksum is not."""
    k = cache.entry_key(SMALL)
    raw, _ = cache.read_entry(p, k)
    data = bytearray(p.read_bytes())
    at = data.find(raw.columns["ts"].tobytes())
    assert at > 0
    data[at] ^= 0xFF
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [damage_truncate, damage_garbage, damage_empty, damage_column],
                         ids=["truncated", "garbage", "empty", "flipped-byte"])
def test_a_damaged_entry_is_ignored_rebuilt_and_mentioned_in_one_line(damage, capsys):
    cold = load_trace(SMALL)
    (where,) = entries(cache.cache_dir())
    damage(where)
    trace = load_trace(SMALL)
    assert trace.meta.warnings[: len(cold.meta.warnings)] == cold.meta.warnings
    (note,) = trace.meta.warnings[len(cold.meta.warnings) :]
    assert "\n" not in note and "cached columns" in note and "rebuilt" in note
    for name in cold.events.columns:
        np.testing.assert_array_equal(trace.events[name].to_numpy(), cold.events[name].to_numpy())
    again = load_trace(SMALL)  # rebuilt: served from the cache again, with no note
    assert again.meta == cold.meta
    # the CLI prints the note on stderr, once, and the summary is unchanged
    damage(where)
    rc, out, err = run_cli(capsys, "summary", str(SMALL), "--format", "json")
    assert rc == 0 and err.count("cached columns") == 1 and len(err.splitlines()) == 1
    assert json.loads(out)["trace"]["warnings"][-1].startswith("the cached columns")


@pytest.mark.parametrize("rows", [[1, 0], [-1, 0], [0, "past"], [0, 0]],
                         ids=["out of order", "negative", "past the last row", "twice"])
def test_an_entry_whose_kernels_side_table_does_not_fit_its_rows_is_not_read(rows):
    """Its checksums are right, but Trace.gpu finds a kernel's fields by a search of ascending rows within
    the table: such an entry is refused (and rebuilt from the trace), never read."""
    raw, meta = read_trace(SMALL)
    n = len(raw.columns["ts"])
    assert len(raw.kernel_fields) == 2
    side = {name: column.copy() for name, column in raw.kernel_fields.columns.items()}
    side["row"] = np.array([n if r == "past" else r for r in rows], np.int64)
    raw.kernel_fields = KernelColumns(side)
    key = cache.entry_key(SMALL)
    where = cache.entry_path(key)
    assert cache.write_entry(where, key, raw, meta)
    with pytest.raises(ValueError, match="the kernels' side table does not fit the columns"):
        cache.read_entry(where, key)


def test_a_summary_after_a_damaged_entry_prints_the_same_stdout(capsys):
    _, cold_out, _ = run_cli(capsys, "summary", str(SMALL))
    for report in cache.cache_dir().glob("*.report"):  # else the kept summary answers, without the columns
        report.unlink()
    damage_garbage(entries(cache.cache_dir())[0])
    rc, out, err = run_cli(capsys, "summary", str(SMALL))
    assert rc == 0 and out == cold_out and "cached columns" in err


def test_an_unwritable_cache_directory_costs_only_speed(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    trace = load_trace(SMALL)
    assert len(trace.events) and not trace.meta.warnings
    assert cache.stats().entries == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_cache_directory_costs_only_speed(private_cache):
    load_trace(OTHER)
    private_cache.chmod(0o500)
    try:
        trace = load_trace(SMALL)
        assert len(trace.events) and not trace.meta.warnings
        assert not load_trace(OTHER).meta.warnings  # reading still works, untouched
    finally:
        private_cache.chmod(0o700)


@pytest.mark.parametrize("failing", ["os.replace", "mkstemp"])
def test_a_full_disk_costs_only_speed_and_leaves_no_temporary_file(monkeypatch, private_cache, failing):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if failing == "os.replace":
        monkeypatch.setattr(cache.os, "replace", full)
    else:
        monkeypatch.setattr(cache, "_temp_file", full)
    trace = load_trace(SMALL)
    assert len(trace.events) and not trace.meta.warnings
    assert list(private_cache.iterdir()) == []


def test_directory_is_private_and_entries_are_0600(private_cache):
    load_trace(SMALL)
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700
    (entry,) = entries(private_cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_an_existing_open_directory_is_made_private(private_cache):
    private_cache.mkdir(mode=0o755)
    private_cache.chmod(0o755)
    load_trace(SMALL)
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700


CONCURRENT = """
import sys
from kerneltui.trace import load_trace
t = load_trace(sys.argv[1])
print(len(t.events), len(t.names), len(t.meta.warnings))
"""


def test_two_processes_loading_at_once_both_succeed_and_the_cache_ends_valid(private_cache):
    trace = SHARED_TRACES / "gpt_train_eager.json.gz"
    env = {**os.environ, **cache_env(), "PYTHONPATH": str(ROOT)}
    for _ in range(3):
        cache.clear(private_cache)
        procs = [
            subprocess.Popen([sys.executable, "-c", CONCURRENT, str(trace)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert outs[0][0] == outs[1][0] and outs[0][0].split()[2] == "0"
        (entry,) = entries(private_cache)
        assert not list(private_cache.glob(cache.TEMP_PREFIX + "*"))
        key = cache.entry_key(trace)
        raw, _ = cache.read_entry(entry, key)
        assert len(raw.columns["ts"]) == int(outs[0][0].split()[0])


def test_an_entry_written_later_is_whole_when_the_process_exits_at_once(private_cache):
    """The apps write a new entry in the background; a process that ends straight after still
    leaves the whole entry (the writer is not a daemon), and the next load is served from it."""
    trace = SHARED_TRACES / "gpt_train_eager.json.gz"
    code = "import sys; from kerneltui.trace.model import load_trace; load_trace(sys.argv[1], write_later=True)"
    subprocess.run([sys.executable, "-c", code, str(trace)], check=True, env={**os.environ, **cache_env(),
                   "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)
    (entry,) = entries(private_cache)
    assert not list(private_cache.glob(cache.TEMP_PREFIX + "*"))
    raw, _ = cache.read_entry(entry, cache.entry_key(trace))
    assert len(raw.columns["ts"]) == len(read_trace(trace)[0].columns["ts"])


# -- bounded -----------------------------------------------------------------------------------------
def test_eviction_removes_the_least_recently_used_entries(monkeypatch, private_cache):
    a, b, c = SMALL, OTHER, SHARED_TRACES / "add_relu_100_eager.json.gz"
    load_trace(a)
    load_trace(b)
    entry = {p: cache.entry_path(cache.entry_key(p)) for p in (a, b, c)}
    os.utime(entry[a], (1_000_000, 1_000_000))
    os.utime(entry[b], (2_000_000, 2_000_000))
    no = load_trace(a)  # a read touches: a is now the most recently used
    assert not no.meta.warnings
    load_trace(c)
    sizes = {p: entry[p].stat().st_size for p in (a, b, c)}
    entry[c].unlink()
    monkeypatch.setenv("KERNELTUI_CACHE_MAX", str(sum(sizes.values()) - 1))  # one of the three must go
    load_trace(c)
    assert entry[a].exists() and entry[c].exists() and not entry[b].exists()
    assert cache.stats().total_bytes == sizes[a] + sizes[c]


def test_an_entry_larger_than_the_cap_is_not_written(monkeypatch, private_cache):
    monkeypatch.setenv("KERNELTUI_CACHE_MAX", "1K")
    assert len(load_trace(SMALL).events)
    assert entries(private_cache) == []


def test_stale_temporary_files_are_swept(private_cache):
    private_cache.mkdir(mode=0o700)
    dead = private_cache / (cache.TEMP_PREFIX + "dead" + cache.SUFFIX)
    dead.write_bytes(b"half an entry")
    os.utime(dead, (1_000_000, 1_000_000))
    load_trace(SMALL)
    assert not dead.exists()


@pytest.mark.parametrize("text, size", [("123", 123), ("10G", 10 * 10**9), ("10GB", 10 * 10**9), ("1.5GiB", 3 << 29),
                                        ("500m", 500 * 10**6), ("2 KiB", 2048), ("0", 0), ("lots", None), ("", None)])
def test_sizes_for_the_cap(text, size):
    assert cache.parse_size(text) == size


def test_the_cap_defaults_to_10_gb(monkeypatch):
    assert cache.max_bytes() == 10 * 10**9
    monkeypatch.setenv("KERNELTUI_CACHE_MAX", "nonsense")
    assert cache.max_bytes() == 10 * 10**9
    monkeypatch.setenv("KERNELTUI_CACHE_MAX", "2G")
    assert cache.max_bytes() == 2 * 10**9


def test_the_directory_follows_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "kerneltui"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "kerneltui"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "kerneltui"


# -- off ------------------------------------------------------------------------------------------------
def test_cache_false_writes_and_reads_nothing(monkeypatch, private_cache):
    load_trace(SMALL, cache=False)
    assert not private_cache.exists()
    load_trace(SMALL)
    no_cache_reads(monkeypatch)
    assert len(load_trace(SMALL, cache=False).events)


@pytest.mark.parametrize("value", ["0", "off", "false", "no"])
def test_kerneltui_cache_0_writes_and_reads_nothing(monkeypatch, private_cache, value):
    monkeypatch.setenv("KERNELTUI_CACHE", value)
    load_trace(SMALL)
    assert not private_cache.exists()
    monkeypatch.delenv("KERNELTUI_CACHE")
    load_trace(SMALL)
    monkeypatch.setenv("KERNELTUI_CACHE", value)
    no_cache_reads(monkeypatch)
    assert len(load_trace(SMALL).events)


def test_a_read_only_file_system_costs_only_speed(monkeypatch, private_cache):
    """As a read-only directory behaves for any user (root included): every write, touch and unlink refused."""
    load_trace(OTHER)

    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    for name in ("replace", "utime", "unlink", "chmod"):
        monkeypatch.setattr(cache.os, name, refused)
    monkeypatch.setattr(cache, "_temp_file", refused)
    before = sorted(p.name for p in private_cache.iterdir())
    trace = load_trace(SMALL)
    assert len(trace.events) and not trace.meta.warnings
    warm = load_trace(OTHER)  # the entry already there is still read
    assert not warm.meta.warnings
    assert sorted(p.name for p in private_cache.iterdir()) == before
