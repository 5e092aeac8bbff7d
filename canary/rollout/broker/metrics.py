"""Where a broker rollout reads each broker's own metrics: the spec's Prometheus, else the deployer's view (the
metrics agents of the brokers we start). Checked in preflight, so a broker whose metrics cannot be read is a named
problem before any change, not a silent gap in the window."""

from __future__ import annotations

import os

from canary.broker_metrics import BrokerMetricsError, BrokerMetricsSource, ExporterSource, PrometheusSource
from canary.rollout.broker.rollout import Rollout
from canary.rollout.core import RolloutError

# An Authorization header for the spec's Prometheus ("Bearer …", "Basic …"): from the environment only.
PROMETHEUS_AUTH_ENV = "KAFKA_CANARY_PROMETHEUS_AUTHORIZATION"


def broker_metrics_source(run: Rollout) -> BrokerMetricsSource | None:
    """The source of the brokers' metrics for this rollout; None when the spec turns them off."""
    section = run.spec.broker_metrics
    if not section.enabled:
        return None
    if section.prometheus is not None:
        p = section.prometheus
        auth = os.environ.get(PROMETHEUS_AUTH_ENV)
        return PrometheusSource(p.url, p.brokers, p.broker_label, p.window,
                                headers={"Authorization": auth} if auth else None)
    if section.exporters is not None:
        return ExporterSource(section.exporters)
    return run.deployer.broker_metrics()


def check_broker_metrics(run: Rollout, broker_ids: list[int]) -> str:
    """Raises RolloutError unless every broker's metrics can be read; says where they come from."""
    source = broker_metrics_source(run)
    if source is None:
        if run.spec.broker_metrics.enabled:
            deployer = run.spec.cluster.deployer
            how = (" (its broker containers need the label io.kafka-canary.metrics-port: the port of a JMX "
                   "exporter agent on the host's network; docs/deployers.md)" if deployer == "docker" else "")
            raise RolloutError("broker_metrics: the brokers' own metrics cannot be read through the "
                               f"{deployer} deployer{how}; give broker_metrics.exporters (each broker's JMX "
                               f"exporter URL), broker_metrics.prometheus (a Prometheus that scrapes them), or set "
                               f"broker_metrics.enabled: false to judge the probe alone")
        return "off"
    if isinstance(source, PrometheusSource):
        unmapped = sorted(set(broker_ids) - set(source.brokers))
        if unmapped:
            raise RolloutError(f"broker_metrics.prometheus.brokers: brokers {unmapped} have no label value; map "
                               f"every broker of the cluster ({sorted(broker_ids)})")
    if isinstance(source, ExporterSource):
        without = sorted(set(broker_ids) - set(source.endpoints))
        if without and run.spec.broker_metrics.exporters is not None:
            raise RolloutError(f"broker_metrics.exporters: brokers {without} have no agent URL; map every broker of "
                               f"the cluster ({sorted(broker_ids)})")
        if without:
            raise RolloutError(f"broker_metrics: brokers {without} have no metrics agent (started before it "
                               f"existed); restart them (kafka-canary cluster restart-broker ID)")
    try:
        source.check()
    except BrokerMetricsError as exc:
        raise RolloutError(f"broker_metrics: {exc}") from None
    return "prometheus" if isinstance(source, PrometheusSource) else "deployer"
