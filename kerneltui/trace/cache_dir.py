"""Where kerneltui keeps what it caches, and which files there it trusts (no numpy, no pyarrow).

The cache directory is ``$XDG_CACHE_HOME/kerneltui`` (else ``~/.cache/kerneltui``). Three kinds
of entry live there, each named ``<path digest>-<entry digest>`` by the file it is for:
``.arrow``, a trace's decoded columns (trace/cache.py); ``.report``, the output of a ``summary``
of it (commands/report_cache.py); ``.screen``, the first screen ``open`` drew of it
(commands/kept_screen.py). This module is the part they share: whether the directory may be
used at all, how an entry is opened and what the sweeps may remove. It imports nothing
heavy, so that a command answered from a kept entry starts in a few milliseconds.

Only this user's own files are trusted (a planted entry could show any numbers): the
directory must be theirs, not a symbolic link and private (kerneltui creates it 0700, and
chmods one of theirs that is open to others), in a directory no other user may write to (a
sticky one, like /tmp, will do), else it is not used at all and one line on stderr says why.
An entry is opened without following a link or waiting on a FIFO, and used only if it is a
regular file of this user's; the sweeps (stale temporary files, eviction, ``kerneltui cache
--clear``) remove only such files, by the names kerneltui gives them.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".arrow"
REPORT_SUFFIX = ".report"
SCREEN_SUFFIX = ".screen"
TEMP_PREFIX = ".tmp-"
# The only names the sweeps remove: entries (cache.entry_path's, report_cache's), and temporary files (mkstemp's).
ENTRY_NAME = re.compile(r"[0-9a-f]{16}-[0-9a-f]{24}\.(?:arrow|report|screen)")
TEMP_NAME = re.compile(r"\.tmp-[0-9a-z_]+\.(?:arrow|report|screen)")
EDGE_BYTES = 1 << 20  # a file's identity hashes its first and last MiB
DEFAULT_MAX_BYTES = 10 * 10**9
_STALE_TEMP_S = 3600  # a temporary file this old belongs to a writer that died
_OFF = {"0", "false", "no", "off"}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def file_identity(path: str | os.PathLike) -> dict:
    """What a regular file is now: resolved path, size, times, inode and its first and last MiB.

    Raises OSError when it is missing, unreadable or no regular file (opened without waiting on a FIFO)."""
    resolved = os.path.realpath(path)
    fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK)  # swapped for a FIFO since the caller looked: no wait
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", resolved)
        h = hashlib.blake2b(digest_size=16)
        h.update(f.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            f.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            h.update(f.read(EDGE_BYTES))
    return {
        "path": resolved,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,  # any write, even one that restores size and mtime, moves it
        "inode": st.st_ino,
        "device": st.st_dev,
        "edges": h.hexdigest(),
    }


def path_digest(resolved: str) -> str:
    """The first half of an entry's name: the same for every entry of one file."""
    return hashlib.blake2b(resolved.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kerneltui``, else ``~/.cache/kerneltui``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kerneltui"


def enabled(cache: bool | None = None) -> bool:
    """``cache`` if given, else on unless KERNELTUI_CACHE=0."""
    if cache is not None:
        return bool(cache)
    return os.environ.get("KERNELTUI_CACHE", "1").strip().lower() not in _OFF


def parse_size(text: str) -> int | None:
    """'10G' or '10GB' (10**10), '1.5GiB' (1.5 * 2**30), '123' (bytes) -> bytes; None if not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    power = " kmgt".index(m.group(2).lower() or " ")
    base = 1024 if (m.group(3) or "").lower() == "ib" else 1000
    return int(float(m.group(1)) * base**power)


def max_bytes() -> int:
    """The cap on the directory: KERNELTUI_CACHE_MAX (bytes, or with a K/M/G/T suffix), else 10 GB."""
    configured = os.environ.get("KERNELTUI_CACHE_MAX")
    size = parse_size(configured) if configured else None
    return DEFAULT_MAX_BYTES if size is None else size


def regular_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file: a pipe, FIFO or device is read once as it comes (opened to
    compute a key, it would block or lose the bytes read), and its stat is no identity for a key."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # missing or unreadable: read_trace words the error


class RefusedEntry(Exception):
    """A name in the cache that is no regular file of this user's (a link, a FIFO, another user's
    file): never read, never removed; a miss."""


def open_entry(where: Path) -> int:
    """A file descriptor on the entry ``where``, if it is a regular file of this user's; raises RefusedEntry."""
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO opens at once, a link not at all
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedEntry(f"{where} is a symbolic link") from None
        raise
    if not _ours(os.fstat(fd)):
        os.close(fd)
        raise RefusedEntry(f"{where} is not a regular file of this user's")
    return fd


class UnsafeDir(Exception):
    """A cache directory another user could plant entries in, or swap for theirs: never used. Says why."""


def private_dir(directory: Path, create: bool = False) -> bool:
    """Whether the cache directory is there (created 0700 when ``create``), this user's and private
    (chmod'ed 0700 if it was open to others). Raises UnsafeDir when it is a symbolic link, another
    user's, or in a directory other users may write to, or cannot be made private; OSError when it
    cannot be made or opened. A few system calls: every load asks."""
    _check_parent(directory.parent, create)
    if create:
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # neither a link nor a wait on a FIFO
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeDir(f"{directory} is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(directory))
        if st.st_uid != os.geteuid():
            raise UnsafeDir(f"{directory} is owned by another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            try:
                os.fchmod(fd, 0o700)  # the very directory checked: traces hold source paths and host names
            except OSError as exc:
                raise UnsafeDir(f"{directory} is {_open_to(st.st_mode)} and could not be made private "
                                f"({exc.strerror})") from None
    finally:
        os.close(fd)
    return True


def _check_parent(parent: Path, create: bool) -> None:
    """Whoever may write to the cache directory's parent may rename it and put theirs in its place:
    only this user or root (a symbolic link to it is fine: what counts is where it leads). In a sticky
    directory, like /tmp, no one renames what is not theirs. Group-writable is fine when it is this
    user's (a user private group, as umask 002 makes)."""
    if create:
        _make_parents(parent)
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        return  # nothing there, the cache directory either
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise UnsafeDir(f"{parent} is owned by another user (uid {st.st_uid})")
    if not st.st_mode & stat.S_ISVTX:
        if st.st_mode & 0o002:
            raise UnsafeDir(f"{parent} is writable by others")
        if st.st_mode & 0o020 and st.st_uid != me:
            raise UnsafeDir(f"{parent} is writable by its group")


def _make_parents(parent: Path) -> None:
    """The missing directories above the cache's, each 0700 (as the XDG spec asks)."""
    missing = []
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass


def _open_to(mode: int) -> str:
    if mode & 0o002:
        return "writable by others"
    return "writable by its group" if mode & 0o020 else "readable by others"


_told: set[str] = set()


def _tell(exc: UnsafeDir) -> None:
    """One line on stderr, once a process (diff loads two traces), on why the cache is not used."""
    from kerneltui.terminal_text import printable

    line = f"kerneltui: cache not used: {exc}"
    if line not in _told:
        _told.add(line)
        print(printable(line), file=sys.stderr)


def _ours(st: os.stat_result) -> bool:
    """A regular file of this user's (from an lstat or fstat: a link is neither)."""
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def _free_or_ours(where: Path) -> bool:
    try:
        return _ours(os.lstat(where))
    except FileNotFoundError:
        return True


@dataclass(frozen=True)
class CacheStats:
    directory: Path
    entries: int  # traces' columns (.arrow)
    total_bytes: int  # of every entry, reports included
    max_bytes: int
    reports: int = 0  # kept summary outputs (.report)
    screens: int = 0  # kept first screens of `open` (.screen)


def _entries(directory: Path, name: re.Pattern = ENTRY_NAME) -> list[tuple[Path, os.stat_result]]:
    """The files named ``name`` (entries, else temporary files) that are regular files of this user's."""
    out = []
    try:
        with os.scandir(directory) as found:
            for e in found:
                if name.fullmatch(e.name):
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # evicted by another process meanwhile
                    if _ours(st):
                        out.append((directory / e.name, st))
    except OSError:
        pass  # no directory (or none this user may read): no entries
    return out


def stats(directory: Path | None = None) -> CacheStats:
    directory = cache_dir() if directory is None else directory
    entries = _entries(directory)
    reports = sum(p.name.endswith(REPORT_SUFFIX) for p, _ in entries)
    screens = sum(p.name.endswith(SCREEN_SUFFIX) for p, _ in entries)
    return CacheStats(directory, len(entries) - reports - screens, sum(st.st_size for _, st in entries), max_bytes(),
                      reports, screens)


def clear(directory: Path | None = None) -> tuple[int, int]:
    """Remove every entry (and leftover temporary files); returns (entries, bytes) removed.
    Raises UnsafeDir (and removes nothing) where the cache would not be used."""
    directory = cache_dir() if directory is None else directory
    try:
        private_dir(directory)
    except OSError:
        pass  # not a directory, or none this user may open: nothing to remove
    count = size = 0
    for p, st in _entries(directory):
        if _remove(p):
            count += 1
            size += st.st_size
    for p, _ in _entries(directory, TEMP_NAME):
        _remove(p)
    return count, size


def evict(directory: Path, cap: int, keep: Path | None = None) -> None:
    """Remove least recently used entries (by mtime: a read touches its entry) until the rest fit ``cap``."""
    now = time.time()
    for p, st in _entries(directory, TEMP_NAME):
        if now - st.st_mtime > _STALE_TEMP_S:
            _remove(p)
    entries = sorted(_entries(directory), key=lambda e: e[1].st_mtime_ns)
    total = sum(st.st_size for _, st in entries)
    for p, st in entries:
        if total <= cap:
            break
        if keep is not None and p.name == keep.name:
            continue
        if _remove(p):
            total -= st.st_size


def _touch(where: Path) -> None:
    try:
        os.utime(where)
    except OSError:
        pass  # a read-only cache: the order of eviction is all that is lost


def _remove(p: Path) -> bool:
    try:
        os.unlink(p)
        return True
    except OSError:
        return False
