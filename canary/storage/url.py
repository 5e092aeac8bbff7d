"""The store a URL names: a path or `file://…` on this disk (LocalStore), `s3://bucket/prefix` an object store
(ObjectStore). Both kinds are known here, above them, so neither module needs the other."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from canary.kafka.secrets import refuse_credentials
from canary.storage.objects import ObjectStore  # fsspec and its S3 client load only when an object store is opened
from canary.storage.store import LocalStore, Store

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)


def open_store(url: str | Path, options: Mapping[str, Any] | None = None) -> Store:
    """The store at `url`: a path or `file://…` on this disk; `s3://bucket/prefix` through fsspec (`options`: the
    filesystem's settings, e.g. endpoint_url, key, secret; default: the usual AWS environment and files)."""
    text = str(url)
    match = _SCHEME.match(text)
    if match:  # a plain path is no URL: an @ in it is a file name's
        refuse_credentials(text, "give an object store's credentials as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                                 "(or ~/.aws/credentials, or the store's options)", where="storage URL")
    scheme = match.group(1).lower() if match else "file"
    if scheme == "file":
        return LocalStore(Path(text[len("file://"):] if match else text).expanduser())
    return ObjectStore(text, scheme, dict(options or {}))
