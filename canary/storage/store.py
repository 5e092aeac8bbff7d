"""One interface for where runs live, and the local-disk store (the embedded default)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
from abc import ABC, abstractmethod
from pathlib import Path

from canary.errors import CanaryError

# What LocalStore's own writes leave beside an object for a moment: `.run.json.lock`, `.run.json.1234.tmp`.
_BOOKKEEPING = re.compile(r"^\..+\.(lock|\d+\.tmp)$")


class StoreError(CanaryError):
    """The store cannot be used: unreachable, missing bucket, refused credentials, an unsupported URL."""


class Conflict(CanaryError):
    """A conditional write lost: someone else wrote the object since it was read."""


class Store(ABC):
    """Objects under one root (`url`), by key (`a/b.json`). Keys never start with `/` and never hold `..`."""

    url: str
    parent: Store | None = None  # the store this one is a child of (the runs' root of a run's store)

    @abstractmethod
    def child(self, name: str) -> Store:
        """The store rooted at `name` under this one (one run's objects under the runs' root); its `parent` is
        this one."""

    def adopted(self, child: Store) -> Store:
        child.parent = self
        return child

    @abstractmethod
    def read(self, key: str) -> bytes | None:
        """The object, None when it does not exist."""

    @abstractmethod
    def read_versioned(self, key: str) -> tuple[bytes, str] | None:
        """The object and its version token for `write_if`, None when it does not exist."""

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Writes the whole object at once: a reader sees the old or the new bytes, never a part."""

    @abstractmethod
    def write_if(self, key: str, data: bytes, version: str | None) -> str:
        """Writes only if the object is still at `version` (None: only if it does not exist); returns the new
        version. Raises Conflict when someone wrote it in between."""

    @abstractmethod
    def append(self, key: str, line: bytes) -> None:
        """Adds one line to the log `key`; concurrent appenders on any machine never lose one."""

    @abstractmethod
    def where(self, key: str) -> str:
        """Where `key` is, as a person looks for it: a path on this disk, or the object's URL."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Removes `key`, or everything under it (a folder); nothing when it is not there."""

    @abstractmethod
    def lines(self, key: str) -> list[bytes]:
        """The log `key`'s lines in the order they were appended (by time across writers)."""

    @abstractmethod
    def runs(self) -> list[tuple[str, float]]:
        """The names of the children holding a run (a `run.json`), with its last change (epoch seconds)."""

    @abstractmethod
    def names(self, limit: int = 5) -> list[str]:
        """Up to `limit` names of what the store holds at its top (files and folders, objects and prefixes), sorted;
        [] when it holds nothing or does not exist yet. Its own bookkeeping (a write's lock and temporary files) is
        left out. StoreError when the root is not a place for files (a file, a device, unreadable)."""

    @abstractmethod
    def workdir(self) -> Path:
        """The local directory where a task writes files for this store (observations, analysis, report)."""

    @abstractmethod
    def pull(self, workdir: Path) -> None:
        """Brings the store's files into `workdir` (what an earlier task on another machine left)."""

    @abstractmethod
    def push(self, workdir: Path) -> None:
        """Sends the files of `workdir` that changed since the last pull or push into the store."""


def valid_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"not a key of a run's storage: {key!r}")
    return key


class LocalStore(Store):
    """A directory on this machine's disk: the run directory itself is the task's work directory."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.url = self.root.as_uri() if self.root.is_absolute() else str(self.root)

    def child(self, name: str) -> Store:
        return self.adopted(LocalStore(self.root / valid_key(name)))

    def _path(self, key: str) -> Path:
        return self.root / valid_key(key)

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def read_versioned(self, key: str) -> tuple[bytes, str] | None:
        data = self.read(key)
        return None if data is None else (data, _digest(data))

    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def write_if(self, key: str, data: bytes, version: str | None) -> str:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # The lock file serialises writers on this disk (processes of one machine, or hosts sharing it by NFS with
        # working locks); the check and the rename happen under it.
        with open(path.with_name(f".{path.name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.read_versioned(key)
            if (current[1] if current else None) != version:
                raise Conflict(f"{path} changed since it was read")
            self.write(key, data)
        return _digest(data)

    def append(self, key: str, line: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One write of the whole line with O_APPEND: concurrent appenders on this disk interleave whole lines.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.rstrip(b"\n") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)

    def where(self, key: str) -> str:
        return str(self._path(key))

    def delete(self, key: str) -> None:
        path = self._path(key)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def lines(self, key: str) -> list[bytes]:
        data = self.read(key)
        return [line for line in (data or b"").splitlines() if line.strip()]

    def runs(self) -> list[tuple[str, float]]:
        return [(p.parent.name, p.stat().st_mtime) for p in self.root.glob("*/run.json")]

    def names(self, limit: int = 5) -> list[str]:
        if not self.root.exists():
            return []
        if not self.root.is_dir():
            raise StoreError(f"run storage {self.url}: {self.root} is not a directory, so it cannot hold a run (a run "
                             f"directory must be new, empty or a run of kafka-canary's); use another --run-dir")
        try:
            found = sorted(p.name for p in self.root.iterdir() if not _BOOKKEEPING.match(p.name))
        except OSError as exc:
            raise StoreError(f"run storage {self.url}: cannot read the directory {self.root} "
                             f"({exc.strerror or exc})") from None
        return found[:limit]

    def workdir(self) -> Path:
        return self.root

    def pull(self, workdir: Path) -> None:
        """Nothing to bring: the work directory is the store."""

    def push(self, workdir: Path) -> None:
        """Nothing to send: the work directory is the store."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
