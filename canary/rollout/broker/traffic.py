"""The canary's share of the cluster's client traffic, from the brokers' own metrics.

A restarted broker leads nothing until leadership moves back to it, and a broker that serves fewer clients looks
healthier for doing less: its request times, idle shares and CPU cannot show a capacity cut. So the gate judges
capacity only when the canary carried its share, measured the same way for real traffic, load and probe alike:
client bytes in and out and produce requests per second (Kafka's BrokerTopicMetrics count client traffic only, not
replication), each canary broker against the median baseline broker. Bytes follow the partitions a broker leads
(each record lands on its partition's leader), so when the brokers lead different numbers of the user topics'
partitions (8 partitions over 3 brokers: 3, 3 and 2) a canary's bytes are compared per partition it leads. Produce
requests follow leadership only in part: a producer sends one request per broker per send for all the partitions it
leads there, so a busy producer's requests do not grow with the partitions, while a light one (its batches of
different partitions ready at different times) sends about one per partition. So a canary broker's requests are fair
anywhere between the two: within the tolerance of the baseline broker's, unweighed, or of its share weighed by the
partitions it leads (`fair_requests` in the result when the two differ).

- **fair**: every measure the baseline brokers serve is within `traffic.tolerance` of theirs;
- **representative**: the baseline brokers take at least `traffic.min_bytes_per_s` of client bytes in each, so the
  brokers' capacity metrics measure brokers at work, not idle ones.

The lead step waits for a fair share after its elections (wait_for_fair_share); the window measures the share over
its own readings (window_traffic), which the verdict records and the rollout's rule after the judge reads
(canary.rollout.broker.overrule: capacity not judged)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from confluent_kafka import KafkaException

from canary.broker_metrics import BrokerMetricsError, BrokerMetricsSource
from canary.errors import CanaryError
from canary.kafka.admin import is_user_topic
from canary.observations import BrokerReading, read_file_counted
from canary.rollout.broker.metrics import broker_metrics_source
from canary.rollout.broker.rollout import Rollout
from canary.rollout.broker.spec import TrafficSection

MEASURES: tuple[str, ...] = ("bytes_in_per_s", "bytes_out_per_s", "produce_requests_per_s")
# Below this a baseline broker serves none of that traffic to speak of (the probe alone sends a few requests a
# second), and a share of it says nothing.
_MIN_REQUESTS_PER_S = 5.0

PerBroker = Mapping[int, Mapping[str, float]]


def _floor(measure: str, settings: TrafficSection) -> float:
    return _MIN_REQUESTS_PER_S if measure.endswith("requests_per_s") else max(settings.min_bytes_per_s, 1.0)


def _rate(value: float, unit: str) -> str:
    if unit == "bytes":
        for scale, name in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
            if value >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B/s"
    return f"{value:.1f}/s"


def share(per_broker: PerBroker, canaries: Collection[int], settings: TrafficSection,
          reference: Collection[int] = (), led: Mapping[int, int] | None = None) -> dict:
    """The canary brokers' share of client traffic from each broker's mean of MEASURES, against the median of the
    `reference` brokers (the control brokers in the window: they take the same probe traffic), else of every
    non-canary broker; `led`: how many user-topic partitions each broker leads, which a canary broker's byte shares
    are weighed by (its share for the partitions it leads; its produce requests' fair range spans the weighed and
    the unweighed share, see the module's docstring). Returns (JSON-able): the canary brokers' values, the
    median reference broker's, each canary broker's share per measure served, whether the traffic is representative
    and the share fair, and a one-sentence reason."""
    canary = {b: v for b, v in per_broker.items() if b in canaries}
    refs = [b for b in per_broker if b not in canaries and (not reference or b in reference)]
    baseline = [per_broker[b] for b in refs]
    weights = _leadership_weights(led or {}, canary, refs)
    result: dict = {"canary": {str(b): {m: round(v.get(m, 0.0), 1) for m in MEASURES}
                               for b, v in sorted(canary.items())},
                    "baseline": {}, "share": {}, "representative": False, "fair": False}
    if not canary or not baseline:
        lacking = "canary" if not canary else "baseline"
        return result | {"reason": f"no {lacking} broker's traffic could be read from its metrics"}
    base = {m: statistics.median(v.get(m, 0.0) for v in baseline) for m in MEASURES}
    result["baseline"] = {m: round(v, 1) for m, v in base.items()}
    served = [m for m in MEASURES if base[m] >= _floor(m, settings)]
    result["share"] = {str(b): {m: round(v.get(m, 0.0) / base[m] / (weights.get(b, 1.0) if m in _BYTES else 1.0), 3)
                                for m in served} for b, v in sorted(canary.items())}
    if weights:
        result["leads"] = {str(b): round(w, 3) for b, w in sorted(weights.items())}
    bytes_in = base["bytes_in_per_s"]
    if bytes_in < settings.min_bytes_per_s:
        return result | {"reason": f"the baseline brokers take {_rate(bytes_in, 'bytes')} of client bytes in each, "
                                   f"below the {_rate(settings.min_bytes_per_s, 'bytes')} representative traffic "
                                   f"needs (traffic.min_bytes_per_s): the brokers' capacity metrics measured idle "
                                   f"brokers; add load, or roll while the cluster carries its real traffic"}
    low, high = 1 - settings.tolerance, 1 + settings.tolerance
    ranges = {b: _fair_requests(weights.get(int(b), 1.0), low, high) for b in result["share"]}
    if "produce_requests_per_s" in served and weights:
        result["fair_requests"] = {b: [round(lo, 3), round(hi, 3)] for b, (lo, hi) in ranges.items()}
    off = []
    for b, shares in result["share"].items():
        for m, s in shares.items():
            lo, hi = (low, high) if m in _BYTES else ranges[b]
            if not lo <= s <= hi:
                off.append(f"broker {b} {m.removesuffix('_per_s').replace('_', ' ')} {s:.2f}× a baseline broker's"
                           + ("" if (lo, hi) == (low, high) else f" (fair for what it leads: {lo:.2f}–{hi:.2f}×)"))
    if off:
        return result | {"representative": True,
                         "reason": f"the canary does not carry its share of client traffic ({'; '.join(off[:4])}; "
                                   f"fair is {low:.2f}–{high:.2f}×, traffic.tolerance)"}
    spread = [s for shares in result["share"].values() for s in shares.values()]
    return result | {"representative": True, "fair": True,
                     "reason": f"the canary carries {min(spread):.2f}–{max(spread):.2f}× a baseline broker's client "
                               f"traffic ({_rate(bytes_in, 'bytes')} in, "
                               f"{_rate(base['produce_requests_per_s'], 'requests')} produce requests per baseline "
                               f"broker)"}


_BYTES = ("bytes_in_per_s", "bytes_out_per_s")


def _fair_requests(weight: float, low: float, high: float) -> tuple[float, float]:
    """The fair range of a canary broker's produce-request share: from the unweighed share's bounds to those of the
    share weighed by the partitions it leads, whichever way its weight goes."""
    return low * min(1.0, weight), high * max(1.0, weight)


def _leadership_weights(led: Mapping[int, int], canary: Collection[int], refs: Collection[int]) -> dict[int, float]:
    """Each canary broker's count of led partitions against the median reference broker's (none when unknown)."""
    counts = [led[b] for b in refs if led.get(b)]
    if not counts:
        return {}
    median = statistics.median(counts)
    return {b: led[b] / median for b in canary if led.get(b) and led[b] != median}


def user_leaders(run: Rollout) -> dict[int, int]:
    """How many partitions of the user topics (canary.kafka.admin.is_user_topic: not the internal ones, nor the
    probe's) each broker leads now; {} when the cluster does not answer (the shares are then not weighed)."""
    counts: dict[int, int] = {}
    try:
        views = run.partitions()
    except (KafkaException, CanaryError, TimeoutError):
        return {}
    for p in views:
        if is_user_topic(p.topic) and p.leader >= 0:
            counts[p.leader] = counts.get(p.leader, 0) + 1
    return counts


def means(readings: Iterable[BrokerReading], metrics: Collection[str] = MEASURES) -> dict[int, dict[str, float]]:
    """Each broker's mean of each of `metrics` over `readings`."""
    values: dict[int, dict[str, list[float]]] = {}
    for r in readings:
        if r.metric in metrics:
            values.setdefault(r.broker, {}).setdefault(r.metric, []).append(r.value)
    return {b: {m: statistics.fmean(v) for m, v in by.items()} for b, by in values.items()}


def window_traffic(run: Rollout, observations: Path, load_rate: float) -> dict:
    """The share over the window's broker readings (the load's traffic included), with what else ran: the load and
    the probe. Without broker metrics nothing could be measured."""
    ran = {"load_records_per_s_per_partition": load_rate, "probe_messages_per_s_per_partition": run.spec.probe.rate}
    if not run.spec.broker_metrics.enabled:
        return ran | {"representative": False, "fair": False,
                      "reason": "broker metrics are off (broker_metrics.enabled: false), so the canary's share of "
                                "traffic could not be measured"}
    # With a control broker the window's probe sends only to the canary's and the control's partitions
    # (probes.window_leaders): judged against the untouched brokers, the canary would carry the probe's requests alone.
    controls = run.state.record.control_brokers or ()
    return ran | share(file_means(observations), run.canary_ids(), run.spec.traffic, reference=controls,
                       led=user_leaders(run))


def file_means(observations: Path, metrics: Collection[str] = MEASURES) -> dict[int, dict[str, float]]:
    """Each broker's mean of `metrics` over the broker readings of an observations file."""
    records, _ = read_file_counted(observations)
    return means((r for r in records if isinstance(r, BrokerReading)), metrics)


def rates(source: BrokerMetricsSource, metrics: Collection[str]) -> dict[int, dict[str, float]]:
    """One sample of `metrics` per broker (an exporter's rates: since its previous sample)."""
    per_broker: dict[int, dict[str, float]] = {}
    for s in source.sample():
        if s.metric in metrics:
            per_broker.setdefault(s.broker, {})[s.metric] = s.value
    return per_broker


def measure_now(run: Rollout, metrics: Collection[str]) -> dict[int, dict[str, float]]:
    """Each broker's `metrics` over one broker_metrics.interval from now ({} when they cannot be read): for a
    preflight whose probe was too short for two readings."""
    source = broker_metrics_source(run)
    if source is None:
        return {}
    try:
        source.sample()
        time.sleep(run.spec.broker_metrics.interval)
        return rates(source, metrics)
    except BrokerMetricsError:
        return {}


def wait_for_fair_share(run: Rollout) -> dict:
    """After the lead step's elections: reads the brokers' client traffic every broker_metrics.interval until the
    canary's share is fair, the cluster turns out to carry no representative traffic (nothing to wait for; the
    window's load, if any, starts with the window), or traffic.wait passes. Returns the last share measured (or why
    none was); the window is judged on its own readings whatever this found."""
    source = broker_metrics_source(run)
    if source is None:
        return {"fair": False, "representative": False, "reason": "broker metrics are off"}
    interval = run.spec.broker_metrics.interval
    deadline = time.monotonic() + run.spec.traffic.wait
    measured: dict = {"fair": False, "representative": False, "reason": "no reading yet"}
    led = user_leaders(run)  # as the lead step's elections left them
    try:
        source.sample()  # an exporter's rates need a first reading
        while True:
            time.sleep(interval)
            measured = share(rates(source, MEASURES), run.canary_ids(), run.spec.traffic, led=led)
            run.say("traffic share: %s", measured["reason"])
            if measured["fair"] or not measured["representative"] or time.monotonic() + interval > deadline:
                return measured
    except BrokerMetricsError as exc:  # judged from the window's readings all the same
        return measured | {"reason": f"the brokers' metrics could not be read: {exc}"}
