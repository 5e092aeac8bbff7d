"""Run storage addressed by URL: where a rollout's state, audit log, analysis and report live, so that any
machine (an Airflow worker, the API server that serves the reports, a laptop running the CLI) finds the same run.

`file:///path` or a plain path is the embedded default: the run directory on this machine's disk.
`s3://bucket/prefix` is an object store through fsspec (any S3-compatible server: credentials and endpoint from
the usual AWS settings, or from `options`). The run state is written conditionally (If-Match on the object's
ETag, a lock file on disk), so two tries of a task never overwrite each other's step; the audit log is appended
one object per entry on object stores, so concurrent writers never lose a line.
"""

from canary.storage.store import Conflict, Store, StoreError
from canary.storage.url import open_store

__all__ = ["Conflict", "Store", "StoreError", "open_store"]
