"""Runs in an object store through fsspec. S3 and S3-compatible servers take conditional writes (If-Match on the
ETag, If-None-Match for a new object), which the run state needs; stores without them are refused at open rather
than risking one task overwriting another's step."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

from canary.storage.store import Conflict, Store, StoreError, valid_key

CONDITIONAL = ("s3", "s3a")  # the protocols whose conditional writes this store knows
WORKDIR_ENV = "KAFKA_CANARY_WORKDIR"
# The audit log of an object store: one object per entry under `<key>.d/`, named so they sort by time.
LOG_SUFFIX = ".d"


class ObjectStore(Store):
    def __init__(self, url: str, scheme: str, options: dict[str, Any], fs: Any = None):
        if scheme not in CONDITIONAL:
            raise StoreError(f"run storage {url!r}: {scheme}:// is not supported (it needs conditional writes so two "
                             f"tasks never overwrite each other's step); use s3:// (any S3-compatible store) or a path")
        self.url = url.rstrip("/")
        self.scheme = scheme
        self.options = options
        self.fs = fs if fs is not None else _filesystem(scheme, options)
        self.root = self.url.split("://", 1)[1]
        self.bucket = self.root.split("/", 1)[0]
        if not self.bucket:
            raise StoreError(f"run storage {url!r} names no bucket: write {scheme}://BUCKET/PREFIX")
        self._sent: dict[str, tuple[int, int]] = {}  # file → (size, mtime_ns) as last pulled or pushed

    def child(self, name: str) -> Store:
        return self.adopted(ObjectStore(f"{self.url}/{valid_key(name)}", self.scheme, self.options, self.fs))

    def _path(self, key: str) -> str:
        return f"{self.root}/{valid_key(key)}"

    def read(self, key: str) -> bytes | None:
        try:
            return self._call(self.fs.cat_file, self._path(key))
        except FileNotFoundError:
            return None

    def read_versioned(self, key: str) -> tuple[bytes, str] | None:
        path = self._path(key)
        # The version first, then the bytes: should a write land in between, the bytes are newer than the version
        # and the next conditional write fails (and re-reads) instead of overwriting what it never saw.
        self.fs.invalidate_cache(path)
        try:
            etag = self._call(self.fs.info, path)["ETag"]
            data = self._call(self.fs.cat_file, path)
        except FileNotFoundError:
            return None
        return data, etag

    def write(self, key: str, data: bytes) -> None:
        self._call(self.fs.pipe_file, self._path(key), data)

    def write_if(self, key: str, data: bytes, version: str | None) -> str:
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        try:
            out = self._call(self.fs.pipe_file, self._path(key), data, **condition)
        except Conflict:
            raise
        except FileExistsError as exc:  # If-None-Match lost: someone created it first
            raise Conflict(f"{self.url}/{key} was created meanwhile") from exc
        if isinstance(out, dict) and "ETag" in out:
            return out["ETag"]
        return f'"{hashlib.md5(data).hexdigest()}"'  # a single-part object's ETag is its MD5

    def append(self, key: str, line: bytes) -> None:
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex}"
        self._call(self.fs.pipe_file, f"{self._path(key)}{LOG_SUFFIX}/{name}", line.rstrip(b"\n") + b"\n")

    def where(self, key: str) -> str:
        return f"{self.url}/{valid_key(key)}"

    def delete(self, key: str) -> None:
        path = self._path(key)
        self.fs.invalidate_cache(path)
        with contextlib.suppress(FileNotFoundError):  # already gone: nothing to do
            self._call(self.fs.rm, path, recursive=True)
        for relative in [name for name in self._sent if name == key or name.startswith(f"{key}/")]:
            del self._sent[relative]

    def lines(self, key: str) -> list[bytes]:
        folder = f"{self._path(key)}{LOG_SUFFIX}"
        self.fs.invalidate_cache(folder)
        try:
            names = sorted(self._call(self.fs.ls, folder, detail=False))
        except FileNotFoundError:
            return []
        if not names:
            return []
        chunks = self._call(self.fs.cat, names)
        return [line for name in names for line in chunks[name].splitlines() if line.strip()]

    def runs(self) -> list[tuple[str, float]]:
        self.fs.invalidate_cache(self.root)
        found = self._call(self.fs.glob, f"{self.root}/*/run.json", detail=True)
        return [(path.rsplit("/", 2)[-2], _mtime(info)) for path, info in found.items()]

    def names(self, limit: int = 5) -> list[str]:
        self.fs.invalidate_cache(self.root)
        try:
            found = self._call(self.fs.ls, self.root, detail=False)
        except FileNotFoundError:
            return []
        return sorted(path.rstrip("/").rsplit("/", 1)[-1] for path in found)[:limit]

    def workdir(self) -> Path:
        base = Path(os.environ.get(WORKDIR_ENV) or Path.home() / ".cache" / "kafka-canary" / "work")
        path = base / hashlib.sha256(self.url.encode()).hexdigest()[:16]
        path.mkdir(parents=True, exist_ok=True)
        return path

    def pull(self, workdir: Path) -> None:
        self.fs.invalidate_cache(self.root)
        try:
            found = self._call(self.fs.find, self.root, detail=True)
        except FileNotFoundError:
            return
        for path, info in found.items():
            relative = path[len(self.root) + 1:]
            if _managed(relative):
                continue
            local = workdir / relative
            if not local.exists() or local.stat().st_size != info.get("size"):
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(self._call(self.fs.cat_file, path))
            self._sent[relative] = _stamp(local)

    def push(self, workdir: Path) -> None:
        if not workdir.is_dir():
            return
        for local in sorted(p for p in workdir.rglob("*") if p.is_file()):
            relative = local.relative_to(workdir).as_posix()
            if _managed(relative) or self._sent.get(relative) == _stamp(local):
                continue
            self._call(self.fs.pipe_file, f"{self.root}/{relative}", local.read_bytes())
            self._sent[relative] = _stamp(local)

    def _call(self, method, *args, **kwargs):
        """The filesystem's call, its errors said as what to fix (never with the credentials)."""
        try:
            return method(*args, **kwargs)
        except (FileNotFoundError, FileExistsError) as exc:
            if _code(exc) == "NoSuchBucket":
                raise StoreError(f"run storage {self.url}: bucket {self.bucket!r} does not exist; create it (or fix "
                                 f"the URL)") from None
            raise
        except PermissionError as exc:
            raise StoreError(f"run storage {self.url}: the object store refused the credentials or the access "
                             f"({_code(exc) or exc.__class__.__name__}); check the access key, the secret and the "
                             f"bucket's policy") from None
        except OSError as exc:
            code = _code(exc)
            if code == "PreconditionFailed":
                raise Conflict(f"{self.url}: an object changed since it was read") from None
            if code == "NoSuchBucket":
                raise StoreError(f"run storage {self.url}: bucket {self.bucket!r} does not exist; create it (or fix "
                                 f"the URL)") from None
            raise StoreError(f"run storage {self.url}: {code or exc.__class__.__name__}: {exc}") from None
        except Exception as exc:  # the S3 client's own errors: the endpoint unreachable, no credentials at all
            name = exc.__class__.__name__
            if name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionError"):
                raise StoreError(f"run storage {self.url}: cannot reach the object store ({name}); check the "
                                 f"endpoint URL and that the store is up") from None
            if name == "NoCredentialsError":
                raise StoreError(f"run storage {self.url}: no credentials for the object store; set "
                                 f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the Airflow connection)") from None
            raise


def _filesystem(scheme: str, options: dict[str, Any]) -> Any:
    import fsspec

    settings = dict(options)
    endpoint = settings.pop("endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings.setdefault("client_kwargs", {})["endpoint_url"] = endpoint
    # Requests bounded in time and retried a few times only: an unreachable store fails a task within seconds.
    settings.setdefault("config_kwargs", {}).update({"connect_timeout": 5, "read_timeout": 30,
                                                     "retries": {"max_attempts": 3}})
    settings.setdefault("skip_instance_cache", True)
    return fsspec.filesystem(scheme, **settings)


def _managed(relative: str) -> bool:
    """Objects written through write_if/append, never copied as files."""
    return relative == "run.json" or relative.startswith("audit.jsonl")


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _mtime(info: dict) -> float:
    modified = info.get("LastModified")
    return modified.timestamp() if modified is not None and hasattr(modified, "timestamp") else 0.0


def _code(exc: BaseException | None) -> str | None:
    """The S3 error code behind a translated error (s3fs keeps the client's error as the cause)."""
    while exc is not None:
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            return response.get("Error", {}).get("Code")
        exc = exc.__cause__
    return None

