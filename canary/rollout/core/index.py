"""The runs index: one small row per run under the runs' root (kind, cluster, change, verdict, status, start,
duration, what started it) and per health sweep, kept in one object beside the runs (`runs-index.json`) so that a
page of thousands of runs is one read, not one read of every run.json (on an object store, thousands of requests).

Each run's state writes its row when the row changes (RunState.save); the write is conditional, so rollouts writing
at once never lose each other's rows. The index is derived data: a failed write is logged and never fails a
rollout, and `rebuild` makes it again from the run.json files (what `entries` does when there is none yet). A
health sweep keeps its history elsewhere (canary.sweep): it writes its own row, and a rebuild keeps the sweeps' rows.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from canary.kafka.secrets import redacted
from canary.rollout.core.record import Origin, RunRecord, legacy_kind
from canary.storage import Conflict, Store, StoreError

log = logging.getLogger("canary.rollout")

INDEX_KEY = "runs-index.json"
INDEX_SCHEMA = 1
WRITE_ATTEMPTS = 30  # lost races in a row before giving up; each waits a little longer, at random (no lockstep)
# What a page may be filtered by, in the order the page shows the filters.
FILTERS = ("cluster", "kind", "verdict", "status")


SWEEP = "sweep"  # the kind of a health sweep's row


@dataclass(frozen=True)
class IndexEntry:
    """One run as the index shows it. `verdict` is "" until the judge decided; `duration_s` runs from the run's
    creation to the last step that finished; `report` is the page's path under the report pages
    (`runs/<run id>/report.html`, `sweeps/<cluster>/<sweep id>/report.html`); `airflow_run` "<dag id>/<run id>" when
    a DAG run started it."""

    run_id: str
    kind: str        # broker, client, migration or sweep
    cluster: str
    change: str
    verdict: str
    outcome: str
    status: str
    started_ms: int
    duration_s: float | None
    trigger: str = ""
    report: str = ""
    airflow_run: str = ""

    @classmethod
    def of(cls, record: RunRecord) -> IndexEntry:
        spec = record.spec
        finished = [s.finished_ms for s in record.steps.values() if s.finished_ms is not None]
        origin = record.origin
        return cls(run_id=record.run_id, kind=str(record.kind or legacy_kind(spec)), cluster=cluster_of(spec),
                   change=change_of(spec),
                   verdict=record.verdict.verdict if record.verdict else "", outcome=str(record.outcome()),
                   status=str(record.status), started_ms=record.created_ms,
                   duration_s=round((max(finished) - record.created_ms) / 1000, 1) if finished else None,
                   trigger=str(origin) if origin else "", report=f"runs/{record.run_id}/report.html",
                   airflow_run=airflow_run(origin))

    @classmethod
    def of_sweep(cls, cluster: str, sweep_id: str, verdict: str, started_ms: int, finished_ms: int,
                 origin: Origin | None) -> IndexEntry:
        """A health sweep's row (its report is in the cluster's history, canary.sweep)."""
        return cls(run_id=sweep_row_id(cluster, sweep_id), kind=SWEEP, cluster=cluster, change="health sweep",
                   verdict=verdict, outcome="", status="done", started_ms=started_ms,
                   duration_s=round((finished_ms - started_ms) / 1000, 1), trigger=str(origin) if origin else "",
                   report=f"sweeps/{cluster}/{sweep_id}/report.html", airflow_run=airflow_run(origin))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexEntry:
        values: dict[str, Any] = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**({f.name: None for f in fields(cls) if f.default is MISSING} | values))


def sweep_row_id(cluster: str, sweep_id: str) -> str:
    return f"{SWEEP}-{cluster}-{sweep_id}"


def airflow_run(origin: Origin | None) -> str:
    """"<dag id>/<run id>" of the DAG run that started a run, "" when none did."""
    return f"{origin.dag_id}/{origin.airflow_run_id}" if origin and origin.dag_id and origin.airflow_run_id else ""


def _section(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    found = spec.get(name)
    return found if isinstance(found, Mapping) else {}


def cluster_of(spec: Mapping[str, Any]) -> str:
    """How a person names the run's cluster: its bootstrap servers, else the embedded cluster's directory."""
    cluster = _section(spec, "cluster")
    for value in (cluster.get("bootstrap_servers"), spec.get("bootstrap_servers"), cluster.get("dir"),
                  spec.get("cluster_dir")):
        if value:
            return str(value)
    return "-"


def change_of(spec: Mapping[str, Any]) -> str:
    """The change in a few words: 'version 4.1.2, num.io.threads=6' or 'v1 → v2'."""
    if "from_version" in spec:
        return f"{spec.get('from_version')} → {spec.get('to_version')}"
    change = _section(spec, "change")
    parts = [f"version {change['version']}"] if change.get("version") else []
    parts += [f"{k}={v}" for k, v in sorted(redacted(dict(change.get("config") or {})).items())]  # a public page
    return ", ".join(parts) or ("group.protocol=consumer" if "out_dir" in spec else "-")


class RunsIndex:
    """The index of the runs under `root` (the runs' root store)."""

    def __init__(self, root: Store):
        self.root = root

    def _read(self) -> tuple[dict[str, dict] | None, str | None]:
        """The rows and the index's version; rows None when there is no index, or one this version cannot read
        (damaged, another schema): then it is made again from the runs."""
        found = self.root.read_versioned(INDEX_KEY)
        if found is None:
            return None, None
        try:
            data = json.loads(found[0])
            rows = data["runs"] if data.get("schema") == INDEX_SCHEMA else None
        except (ValueError, TypeError, KeyError, AttributeError):
            rows = None
        if not isinstance(rows, dict):
            log.warning("the runs index %s cannot be read; it is made again from the runs",
                        self.root.where(INDEX_KEY))
            return None, found[1]
        return rows, found[1]

    def _write(self, change: Any) -> None:
        """Applies `change(rows)` to the index, conditionally, again on a lost race."""
        for attempt in range(WRITE_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, 0.005 * attempt))
            rows, version = self._read()
            rows = rows if rows is not None else {}
            change(rows)
            text = json.dumps({"schema": INDEX_SCHEMA, "runs": rows}, separators=(",", ":"), sort_keys=True)
            try:
                self.root.write_if(INDEX_KEY, text.encode(), version)
                return
            except Conflict:
                continue
        raise StoreError(f"the runs index {self.root.where(INDEX_KEY)} kept changing: {WRITE_ATTEMPTS} writes in a "
                         f"row lost")

    def put(self, entry: IndexEntry) -> None:
        """Adds or replaces the row of `entry.run_id`."""
        self._write(lambda rows: rows.__setitem__(entry.run_id, asdict(entry)))

    def remove(self, run_ids: Iterable[str]) -> None:
        """Drops the rows of `run_ids` (sweeps the history no longer keeps)."""
        gone = set(run_ids)
        if gone:
            self._write(lambda rows: [rows.pop(run_id, None) for run_id in gone])

    def entries(self) -> list[IndexEntry]:
        """Every run's row, newest first; made from the runs when there is no index yet."""
        rows, _ = self._read()
        if rows is None:
            return self.rebuild()
        return _newest_first(IndexEntry.from_json(row) for row in rows.values())

    def rebuild(self) -> list[IndexEntry]:
        """The index made again from every run.json under the root (one read per run), written, returned; the
        sweeps' rows (not made from runs) are kept."""
        made: dict[str, dict] = {}
        for name, _ in self.root.runs():
            try:
                raw = self.root.child(name).read("run.json")
                made[name] = asdict(IndexEntry.of(RunRecord.load(json.loads(raw or b"{}"))))
            except (OSError, StoreError, ValueError) as exc:  # not a run this version reads: left out, said why
                log.warning("run %s is left out of the runs index: %s", name, str(exc).splitlines()[0][:200])
        kept: dict[str, dict] = {}

        def replace(rows: dict[str, dict]) -> None:
            kept.clear()
            kept.update({k: row for k, row in rows.items() if row.get("kind") == SWEEP})
            rows.clear()
            rows.update(kept | made)

        self._write(replace)
        return _newest_first(IndexEntry.from_json(row) for row in (kept | made).values())


def _newest_first(entries: Iterable[IndexEntry]) -> list[IndexEntry]:
    return sorted(entries, key=lambda e: (e.started_ms or 0, e.run_id), reverse=True)


@dataclass(frozen=True)
class Page:
    rows: list[IndexEntry]
    total: int           # rows matching the filters
    page: int            # from 1
    pages: int
    choices: dict[str, list[str]]  # each filter's values among all runs, for the page's selects


def query(entries: list[IndexEntry], filters: Mapping[str, str], page: int = 1, per_page: int = 50) -> Page:
    """The `page`th page (newest first) of the entries matching every filter given (FILTERS; empty: any)."""
    wanted = {k: v for k, v in filters.items() if k in FILTERS and v}
    matching = [e for e in entries if all(getattr(e, k) == v for k, v in wanted.items())]
    pages = max(1, -(-len(matching) // per_page))
    page = min(max(1, page), pages)
    choices = {k: sorted({getattr(e, k) for e in entries if getattr(e, k)}) for k in FILTERS}
    return Page(matching[(page - 1) * per_page:page * per_page], len(matching), page, pages, choices)
