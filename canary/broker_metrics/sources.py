"""Where broker metrics come from: one interface, two sources.

`sample()` gives one value per broker and catalogue metric at that moment. A rate needs two readings of its
counter, so an `ExporterSource` gives rates from its second sample on (a counter that went down — the broker
restarted — gives no rate until the next sample); a `PrometheusSource` asks Prometheus for rates over a window.
`check()` names every broker whose metrics cannot be read, so a rollout refuses in preflight instead of judging a
gap."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import requests
from prometheus_client.parser import text_string_to_metric_families

from canary.broker_metrics.catalogue import CATALOGUE, BrokerMetric, label_regex
from canary.errors import CanaryError

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]   # (name, labels) -> value of one scrape


class BrokerMetricsError(CanaryError):
    """A broker's metrics cannot be read; the message names the broker and the cause."""


@dataclass(frozen=True)
class BrokerSample:
    broker: int
    metric: str
    value: float
    ts_ms: int


class BrokerMetricsSource(Protocol):
    def sample(self) -> list[BrokerSample]:
        """Every catalogue metric of every broker that has a value now; an unreadable broker is left out."""
        ...

    def check(self) -> None:
        """Raises BrokerMetricsError naming every broker whose metrics cannot be read."""
        ...

    def only(self, metrics: Iterable[BrokerMetric], brokers: Iterable[int] | None = None) -> BrokerMetricsSource:
        """A source of the same brokers (or of `brokers` among them), reading `metrics` instead of the catalogue."""
        ...


def _among(by_broker: Mapping[int, str], brokers: Iterable[int] | None) -> dict[int, str]:
    """`by_broker` restricted to `brokers` (all of it when None)."""
    if brokers is None:
        return dict(by_broker)
    wanted = set(brokers)
    return {b: v for b, v in by_broker.items() if b in wanted}


def _value(series: Series, metric: BrokerMetric) -> float | None:
    """The sum of the series matching `metric` in one scrape, or None when there is none."""
    wanted = set(metric.labels.items())
    found = [v for (name, labels), v in series.items() if name == metric.series and wanted <= labels]
    return sum(found) if found else None


def parse_exposition(text: str) -> Series:
    """Prometheus text exposition -> (sample name, labels) -> value."""
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            series[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return series


def _interval_mean(metric: BrokerMetric, series: Series, old_series: Series) -> float | None:
    """The mean of what the histogram recorded between two scrapes: the change of its sum over that of its count
    (none when it recorded nothing, or its count went down: the broker restarted)."""
    mean, count = _value(series, metric), _value(series, metric.counts())
    old_mean, old_count = _value(old_series, metric), _value(old_series, metric.counts())
    if mean is None or count is None or old_mean is None or old_count is None or count <= old_count:
        return None
    return (mean * count - old_mean * old_count) / (count - old_count)


class ExporterSource:
    """The JMX exporter agents of brokers we started: `endpoints` maps a broker id to its http://host:port."""

    def __init__(self, endpoints: Mapping[int, str], metrics: Iterable[BrokerMetric] = CATALOGUE,
                 timeout: float = 5.0):
        self.endpoints = dict(endpoints)
        self.metrics = tuple(metrics)
        self.timeout = timeout
        self._previous: dict[int, tuple[float, Series]] = {}

    def only(self, metrics: Iterable[BrokerMetric], brokers: Iterable[int] | None = None) -> ExporterSource:
        return ExporterSource(_among(self.endpoints, brokers), metrics, self.timeout)

    def _scrape(self, broker: int) -> Series:
        url = f"{self.endpoints[broker]}/metrics"
        try:
            response = requests.get(url, timeout=self.timeout)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise BrokerMetricsError(f"broker {broker}: cannot read its metrics at {url}: "
                                     f"{type(exc).__name__}") from None
        return parse_exposition(response.text)

    def check(self) -> None:
        if not self.endpoints:
            raise BrokerMetricsError("no broker serves its metrics: brokers started before the metrics agent existed "
                                     "have no metrics port; restart them (kafka-canary cluster restart-broker ID)")
        problems = []
        for broker in sorted(self.endpoints):
            try:
                series = self._scrape(broker)
            except BrokerMetricsError as exc:
                problems.append(str(exc))
                continue
            needed = [*self.metrics, *(m.counts() for m in self.metrics if m.kind == "mean")]
            missing = sorted({m.series for m in needed if _value(series, m) is None})
            if missing:
                problems.append(f"broker {broker}: its metrics lack {', '.join(missing)}")
        if problems:
            raise BrokerMetricsError("; ".join(problems))

    def sample(self) -> list[BrokerSample]:
        samples = []
        for broker in sorted(self.endpoints):
            try:
                series = self._scrape(broker)
            except BrokerMetricsError:
                self._previous.pop(broker, None)  # down: its next rate starts afresh
                continue
            now = time.time()
            before = self._previous.get(broker)
            self._previous[broker] = (now, series)
            for metric in self.metrics:
                value = self._reading(metric, series, before, now)
                if value is not None:
                    samples.append(BrokerSample(broker, metric.name, value, int(now * 1000)))
        return samples

    @staticmethod
    def _reading(metric: BrokerMetric, series: Series, before: tuple[float, Series] | None,
                 now: float) -> float | None:
        value = _value(series, metric)
        if value is None or metric.kind == "gauge":
            return value
        if before is None:
            return None
        then, old_series = before
        if metric.kind == "mean":
            return _interval_mean(metric, series, old_series)
        old = _value(old_series, metric)
        if old is None or value < old or now <= then:  # a counter that went down: the broker restarted
            return None
        rate = (value - old) / (now - then) * metric.scale
        # Kafka marks idle time when a wait ends, so an interval can hold a little more than its length: a share
        # is at most 1.
        return min(rate, 1.0) if metric.unit == "ratio" else rate


class PrometheusSource:
    """A Prometheus server (`url`) that scrapes the brokers; `brokers` maps a broker id to the value of
    `broker_label` on its series. `window`: the rate window (at least two scrape intervals). `headers`: credentials
    (e.g. Authorization), taken from the environment by the caller and never stored. `queries`: PromQL per metric
    name overriding the catalogue's (`{brokers}` stands for the broker label's regex)."""

    def __init__(self, url: str, brokers: Mapping[int, str], broker_label: str = "broker", window: str = "30s",
                 metrics: Iterable[BrokerMetric] = CATALOGUE, queries: Mapping[str, str] | None = None,
                 headers: Mapping[str, str] | None = None, timeout: float = 10.0):
        self.url = url.rstrip("/")
        self.brokers = dict(brokers)
        self.broker_label = broker_label
        self.window = window
        self.metrics = tuple(metrics)
        self.queries = dict(queries or {})
        self.headers = dict(headers or {})
        self.timeout = timeout
        self._by_label = {label: broker for broker, label in self.brokers.items()}

    def only(self, metrics: Iterable[BrokerMetric], brokers: Iterable[int] | None = None) -> PrometheusSource:
        return PrometheusSource(self.url, _among(self.brokers, brokers), self.broker_label, self.window, metrics,
                                self.queries, self.headers, self.timeout)

    def query_of(self, metric: BrokerMetric) -> str:
        regex = label_regex(self._by_label)
        if metric.name in self.queries:
            return self.queries[metric.name].replace("{brokers}", regex)
        return metric.promql(self.broker_label, regex, self.window)

    def _query(self, query: str) -> tuple[float, dict[int, float]]:
        try:
            response = requests.get(f"{self.url}/api/v1/query", params={"query": query}, headers=self.headers,
                                    timeout=self.timeout)
        except requests.RequestException as exc:
            raise BrokerMetricsError(f"cannot reach Prometheus at {self.url}: {type(exc).__name__}") from None
        if response.status_code in (401, 403):
            raise BrokerMetricsError(f"Prometheus at {self.url} refused the credentials (HTTP "
                                     f"{response.status_code})")
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            raise BrokerMetricsError(f"{self.url} answered the query with a JSON {type(body).__name__}, not the "
                                     f"object of Prometheus's HTTP API; check broker_metrics.prometheus.url")
        if body.get("status") != "success":
            error = str(body.get("error") or f"HTTP {response.status_code}")[:300]
            raise BrokerMetricsError(f"Prometheus at {self.url} refused the query {query!r}: {error}")
        return self._values(body, query)

    def _values(self, body: dict, query: str) -> tuple[float, dict[int, float]]:
        """The time and per-broker values of a successful instant-vector answer; BrokerMetricsError naming what is
        wrong with an answer of another shape."""
        data = body.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise BrokerMetricsError(f"Prometheus at {self.url} answered the query {query!r} without data.result (a "
                                     f"list of series); check broker_metrics.prometheus.url and the query")
        values: dict[int, float] = {}
        now = time.time()
        for item in result:
            labels = item.get("metric") if isinstance(item, dict) else None
            broker = self._by_label.get(labels.get(self.broker_label, "")) if isinstance(labels, dict) else None
            if broker is None:
                continue
            try:
                at, text = item["value"]
                values[broker] = float(text)
                now = float(at)
            except (KeyError, TypeError, ValueError):
                raise BrokerMetricsError(f"Prometheus at {self.url} answered the query {query!r} with a value that "
                                         f"is not a [time, number] pair for broker {broker}: "
                                         f"{str(item.get('value'))[:100]!r}; the query must give an instant "
                                         f"vector") from None
        return now, values

    def check(self) -> None:
        seen: set[int] = set()
        for metric in self.metrics:
            seen |= set(self._query(self.query_of(metric))[1])
        missing = sorted(set(self.brokers) - seen)
        if missing:
            raise BrokerMetricsError(f"Prometheus at {self.url} has no metrics for brokers {missing} (series labelled "
                                     f"{self.broker_label}={[self.brokers[b] for b in missing]}); check the label "
                                     f"mapping and that Prometheus scrapes them")

    def sample(self) -> list[BrokerSample]:
        samples = []
        for metric in self.metrics:
            at, values = self._query(self.query_of(metric))
            samples += [BrokerSample(broker, metric.name, value, int(at * 1000))
                        for broker, value in sorted(values.items()) if value == value]  # NaN: no data
        return samples


def metrics_table(samples: Iterable[BrokerSample]) -> str:
    """One row per catalogue metric, one column per broker (the catalogue's order; '-' where there is no value)."""
    samples = list(samples)
    brokers = sorted({s.broker for s in samples})
    value = {(s.broker, s.metric): s.value for s in samples}
    width = max(len(m.name) for m in CATALOGUE)
    lines = [f"{'metric':<{width}}  {'unit':<10}" + "".join(f"{'broker ' + str(b):>16}" for b in brokers)]
    for m in CATALOGUE:
        cells = "".join(f"{value[(b, m.name)]:>16.4g}" if (b, m.name) in value else f"{'-':>16}" for b in brokers)
        lines.append(f"{m.name:<{width}}  {m.unit:<10}{cells}")
    return "\n".join(lines)
