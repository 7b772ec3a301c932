"""One package's folder of the on-disk cache: verified entries, atomic writes, a lock per entry.

In: a directory and the bytes a build produced. Out: paths of entries whose content matches
the hash recorded when they were written (only those reach the dynamic loader), small
checksummed text records, and the recorded identity of a compiler.

Layout of a folder:
  <name>                    an entry (a shared library), written whole, fsynced, renamed in
  <name>.sha256             its record "v1 <key> <size> <sha256>", checked before every use;
                            its mtime is the entry's last use (least-recently-used eviction)
  <stem>.lock               fcntl lock: one process builds an entry, the others wait for it
  <subdir>/<record>         small text records "v1 <checksum> <text>" (index, compilers)
  .<name>.<pid>@<host>.<random>[.<ext>].tmp   temporary files, removed once their process
                            is gone or they are older than an hour

Anything that cannot be read, decoded or trusted is a miss: it is removed (one warning per
entry per process) and rebuilt. A folder that cannot be written (read-only, a file in its
place, no permission) gives way to a private temporary folder for this process, with one
warning, once something must be written; verified entries of a read-only folder are used
(a read-only warm cache works silently).

NOTE: guards/native/disk_cache.py is the same module (the packages do not depend on each
other); change both.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: Temporary files older than this are removed even if their process seems alive (seconds).
TEMP_MAX_AGE_S = 3600.0
_FORMAT = "v1"
_RECORD_SUFFIX = ".sha256"
_HOST = re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname())[:16]
_TEMP = re.compile(r"^\..+\.(?P<pid>\d+)@(?P<host>[A-Za-z0-9-]{0,16})\.[0-9a-f]{12}"
                   r"(\.[A-Za-z0-9]+)*\.tmp$")


def resolve_dir(text: str) -> Path:
    """`~` expanded and a relative path made absolute (against the current directory)."""
    return Path(os.path.abspath(os.path.expanduser(text)))


def _remove(path: Path) -> None:
    """Remove a file, link or directory tree; errors ignored (the caller checks again)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except OSError:
        pass


def _hash_file(path: Path) -> tuple[str, int]:
    """(sha256 hex digest, size) of the file's bytes."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        _fsync_file(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # NOTE: EPERM: it exists, owned by someone else
        return True
    return True


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class DiskCache:
    """The cache folder `directory` of one package (see the module doc). Thread-safe."""

    def __init__(self, directory: Path, label: str, log: logging.Logger,
                 on_evict: Callable[[DiskCache, list[str]], None] | None = None) -> None:
        self.primary = directory
        #: Where entries are written: `primary`, or a private folder if it is unusable.
        self.directory = directory
        self.label = label
        self.log = log
        self._mutex = threading.Lock()
        self._private: Path | None = None
        self._reported: set[str] = set()
        #: Called with the names of entries that eviction removed (to drop what refers to them).
        self.on_evict = on_evict
        #: Why `primary` cannot be written (found when opened), if so.
        self._unwritable: OSError | None = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._probe(directory)
        except OSError as exc:
            self._unwritable = exc
        else:
            self.sweep()

    # -- the folder -------------------------------------------------------------------------
    @staticmethod
    def _probe(directory: Path) -> None:
        """Raise OSError unless a file can be created and removed in `directory`."""
        probe = directory / f".probe.{os.getpid()}@{_HOST}.{secrets.token_hex(6)}.tmp"
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        os.unlink(probe)

    def degrade(self, exc: OSError) -> None:
        """Write to a private temporary folder from now on (one warning per process)."""
        with self._mutex:
            if self._private is None:
                private = Path(tempfile.mkdtemp(prefix=f"{self.label}-cache-"))
                atexit.register(shutil.rmtree, private, True)
                self._private = private
                self.log.warning(
                    "%s: cache directory %s is not usable (%s); compiling into the private "
                    "directory %s for this process", self.label, self.primary, exc, private)
            self.directory = self._private

    @property
    def degraded(self) -> bool:
        """Whether writes go to a private folder because the configured one is unusable."""
        return self._private is not None

    def writable_directory(self) -> Path:
        """The folder to write to: `directory`, a private one if it cannot be written (one
        warning). Raises OSError if no private folder can be made either."""
        if self._unwritable is not None and not self.degraded:
            self.degrade(self._unwritable)
        return self.directory

    @property
    def writable(self) -> bool:
        """Whether `directory` can be written (else: read what it has, write nothing)."""
        return self._unwritable is None or self.degraded

    def _dirs(self) -> list[Path]:
        """Folders lookups read, writable one first."""
        return [self.directory] if self.directory == self.primary else [self.directory,
                                                                          self.primary]

    def new_temp(self, name: str, ext: str = "") -> Path:
        """A fresh temporary path for entry `name` (its pid marks it for `sweep`)."""
        suffix = f".{ext}" if ext else ""
        return self.directory / f".{name}.{os.getpid()}@{_HOST}.{secrets.token_hex(6)}" \
                                f"{suffix}.tmp"

    def sweep(self) -> None:
        """Remove temporary files whose process is gone or that are older than an hour."""
        now = time.time()
        for folder in [self.directory, *(p for p in self._subdirs())]:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if not (name.startswith(".") and name.endswith(".tmp")):
                    continue
                match = _TEMP.match(name)
                try:
                    age = now - entry.stat(follow_symlinks=False).st_mtime
                except OSError:
                    continue
                dead = (match is not None and match["host"] == _HOST
                        and not _pid_alive(int(match["pid"])))
                if dead or age > TEMP_MAX_AGE_S:
                    _remove(Path(entry.path))

    def _subdirs(self) -> Iterator[Path]:
        try:
            for entry in os.scandir(self.directory):
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                    yield Path(entry.path)
        except OSError:
            return

    # -- locks ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Hold the lock of entry `name` (waits for a process that builds it)."""
        try:
            fd = self._acquire(self.directory / name, blocking=True)
        except OSError as exc:
            self.degrade(exc)
            fd = self._acquire(self.directory / name, blocking=True)
        assert fd is not None
        try:
            yield
        finally:
            os.close(fd)  # NOTE: closing releases the flock

    @staticmethod
    def _lock_path(path: Path) -> Path:
        return path.with_name(path.name.rsplit(".", 1)[0] + ".lock")

    def _acquire(self, path: Path, blocking: bool) -> int | None:
        """The fd holding `path`'s lock file locked, or None (not blocking, and busy).
        NOTE: a lock file is only removed by its holder (eviction); a waiter that got the
        lock of a removed file sees another inode at the path and tries again."""
        lock_path = self._lock_path(path)
        for _ in range(100):
            if lock_path.exists() and not lock_path.is_file():
                _remove(lock_path)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            except OSError:
                os.close(fd)
                raise
            try:
                now = os.stat(lock_path)
                held = os.fstat(fd)
                same = (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev)
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)
        raise OSError(f"lock file {lock_path} keeps being replaced")

    # -- entries ----------------------------------------------------------------------------
    @staticmethod
    def _record_path(path: Path) -> Path:
        return path.with_name(path.name + _RECORD_SUFFIX)

    def _problem(self, path: Path, key: str) -> str | None:
        """None if `path` holds the entry recorded for `key`, "missing", or what is wrong."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unreadable: {exc}"
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        try:
            with open(self._record_path(path), "rb") as f:
                raw = f.read(512)
            fmt, recorded_key, size, digest = raw.decode("ascii").split()
            recorded_size = int(size)
        except FileNotFoundError:
            return "its hash was never recorded"
        except (OSError, ValueError) as exc:  # NOTE: UnicodeDecodeError is a ValueError
            return f"its hash record is unreadable ({type(exc).__name__})"
        if fmt != _FORMAT or recorded_key != key:
            return "its hash record is for another entry"
        if st.st_size != recorded_size:
            return f"{st.st_size} bytes, {recorded_size} recorded (truncated?)"
        try:
            actual, _ = _hash_file(path)
        except OSError as exc:
            return f"unreadable: {exc}"
        if actual != digest:
            return "its content differs from the recorded hash"
        return None

    def _report(self, path: Path, problem: str) -> None:
        with self._mutex:
            first = str(path) not in self._reported
            self._reported.add(str(path))
        if first:
            self.log.warning("%s: cache entry %s is damaged (%s); removed, it will be rebuilt",
                             self.label, path, problem)

    def lookup(self, name: str, key: str, *, locked: bool = False) -> Path | None:
        """The path of entry `name` built for `key` if its content is the recorded one, else
        None (a damaged entry is removed). `locked`: the caller holds `lock(name)`."""
        for folder in self._dirs():
            path = folder / name
            problem = self._problem(path, key)
            if problem is None:
                self._touch(path)
                return path
            if problem == "missing" or folder != self.directory or not self.writable:
                continue
            if not locked:
                # NOTE: a writer renames the entry, then its record: look again under the lock
                with self.lock(name):
                    if self.directory != folder:
                        continue
                    problem = self._problem(path, key)
                    if problem is None:
                        self._touch(path)
                        return path
                    if problem != "missing":
                        self.discard(name, problem)
            else:
                self.discard(name, problem)
        return None

    def discard(self, name: str, problem: str) -> None:
        """Remove entry `name` and its record (warning once). Call with its lock held."""
        path = self.directory / name
        self._report(path, problem)
        _remove(path)
        _remove(self._record_path(path))

    def _touch(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            os.utime(self._record_path(path))

    def store(self, name: str, key: str, produce: Callable[[Path], None],
              limit_bytes: int) -> Path:
        """Entry `name`: the verified cached one, or `produce(temp_path)`'s output moved into
        place with its hash recorded. Builds of one name are serialized across processes;
        an unusable folder means building in a private one. Exceptions of `produce` (other
        than OSError) propagate, with its temporary files removed."""
        self.writable_directory()
        try:
            return self._store_in(name, key, produce, limit_bytes)
        except OSError as exc:
            if self.degraded:
                raise
            self.degrade(exc)
            return self._store_in(name, key, produce, limit_bytes)

    def _store_in(self, name: str, key: str, produce: Callable[[Path], None],
                  limit_bytes: int) -> Path:
        with self.lock(name):
            hit = self.lookup(name, key, locked=True)
            if hit is not None:
                return hit
            self._remove_temps(name)  # NOTE: whoever wrote them held this lock: they are dead
            temp = self.new_temp(name)
            try:
                produce(temp)
                path = self._commit(temp, name, key)
            finally:
                self._remove_temps(name)
        removed = self.evict(limit_bytes, keep=path)
        if removed and self.on_evict is not None:
            self.on_evict(self, removed)
        return path

    def _remove_temps(self, name: str) -> None:
        prefix = f".{name}."
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.directory):
                if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                    _remove(Path(entry.path))

    def _commit(self, temp: Path, name: str, key: str) -> Path:
        _fsync_file(temp)
        digest, size = _hash_file(temp)
        target = self.directory / name
        record = self.new_temp(name, "rec")
        record.write_text(f"{_FORMAT} {key} {size} {digest}\n")
        _fsync_file(record)
        if target.is_dir() and not target.is_symlink():
            _remove(target)
        os.replace(temp, target)
        os.replace(record, self._record_path(target))
        _fsync_dir(self.directory)
        return target

    def evict(self, limit_bytes: int, keep: Path | None = None) -> list[str]:
        """Remove least-recently-used entries until they total at most `limit_bytes`
        (0: no limit); returns the names removed. Entries being built are skipped."""
        if limit_bytes <= 0:
            return []
        entries: list[tuple[float, int, Path]] = []
        try:
            for item in os.scandir(self.directory):
                if not item.name.endswith(_RECORD_SUFFIX) or item.name.startswith("."):
                    continue
                entry = Path(item.path[:-len(_RECORD_SUFFIX)])
                try:
                    used = item.stat().st_mtime
                    size = entry.stat().st_size
                except OSError:
                    continue
                entries.append((used, size, entry))
        except OSError:
            return []
        total = sum(size for _, size, _ in entries)
        removed: list[str] = []
        for _, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= limit_bytes:
                break
            if keep is not None and entry == keep:
                continue
            try:
                fd = self._acquire(entry, blocking=False)
            except OSError:
                continue
            if fd is None:
                continue
            try:
                _remove(entry)
                _remove(self._record_path(entry))
                _remove(self._lock_path(entry))
            finally:
                os.close(fd)
            total -= size
            removed.append(entry.name)
        return removed

    # -- small records ----------------------------------------------------------------------
    def read_record(self, subdir: str, name: str) -> str | None:
        """The text recorded under `subdir/name`, or None (a damaged record is removed)."""
        for folder in self._dirs():
            path = folder / subdir / name
            try:
                with open(path, "rb") as f:
                    raw = f.read(4096)
                fmt, checksum, text = raw.decode("utf-8").rstrip("\n").split(" ", 2)
                if fmt == _FORMAT and checksum == _checksum(text):
                    return text
                problem = "its checksum does not match"
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                problem = f"unreadable ({type(exc).__name__})"
            if folder == self.directory and self.writable:
                self._report(path, problem)
                _remove(path)
        return None

    def write_record(self, subdir: str, name: str, text: str) -> None:
        """Record one line of `text` under `subdir/name` (atomically; errors ignored: a
        record is only a shortcut)."""
        assert "\n" not in text
        if not self.writable:
            return
        folder = self.directory / subdir
        try:
            folder.mkdir(exist_ok=True)
            temp = folder / f".{name}.{os.getpid()}@{_HOST}.{secrets.token_hex(6)}.tmp"
            temp.write_text(f"{_FORMAT} {_checksum(text)} {text}\n")
            os.replace(temp, folder / name)
        except OSError as exc:
            self.log.debug("%s: cannot write record %s/%s: %s", self.label, subdir, name, exc)

    def records(self, subdir: str) -> list[str]:
        """Names of the records under `subdir` in the writable folder."""
        try:
            return [e.name for e in os.scandir(self.directory / subdir)
                    if not e.name.startswith(".")]
        except OSError:
            return []

    def remove_record(self, subdir: str, name: str) -> None:
        """Forget a record (errors ignored)."""
        _remove(self.directory / subdir / name)

    # -- the compiler -----------------------------------------------------------------------
    def compiler_version(self, cxx: str) -> str | None:
        """The first line of `cxx --version`, run once per compiler binary and recorded
        (keyed by its path, size and mtime). If `cxx` is not installed, the version recorded
        when it last was (lookups only: nothing can be built); None if never recorded.
        Raises OSError or subprocess.SubprocessError if an installed `cxx` does not run."""
        last = f"last-{_checksum(cxx)}"
        found = shutil.which(cxx)
        if found is None:
            return self.read_record("compilers", last)
        real = os.path.realpath(found)
        st = os.stat(real)
        name = _checksum(f"{real}\0{st.st_size}\0{st.st_mtime_ns}")
        version = self.read_record("compilers", name)
        if version is None:
            out = subprocess.run([found, "--version"], capture_output=True, text=True,
                                 check=True, timeout=60)
            lines = out.stdout.strip().splitlines()
            version = lines[0].strip() if lines else ""
            self.write_record("compilers", name, version)
        if self.read_record("compilers", last) != version:
            self.write_record("compilers", last, version)
        return version
