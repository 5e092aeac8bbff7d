"""Each broker's own metrics, sampled as the gate sees them: what a change that cuts capacity moves (request
handler and network idle, request times per request type, request and error rates, bytes in and out, log
flushes, ISR changes, CPU and GC) — `CATALOGUE` names them once. Two sources behind one interface
(`BrokerMetricsSource`): `ExporterSource` reads the JMX exporter agent of each broker we started
(canary.cluster.metrics_agent); `PrometheusSource` asks the user's Prometheus through its HTTP query API."""

from canary.broker_metrics.catalogue import (
    CATALOGUE,
    LOAD_METRICS,
    PROCESS_START,
    UNITS,
    USER_CATCH_UP,
    BrokerMetric,
    LoadMetric,
)
from canary.broker_metrics.sources import (
    BrokerMetricsError,
    BrokerMetricsSource,
    BrokerSample,
    ExporterSource,
    PrometheusSource,
    metrics_table,
)

__all__ = ["CATALOGUE", "LOAD_METRICS", "PROCESS_START", "UNITS", "BrokerMetric", "BrokerMetricsError",
           "BrokerMetricsSource", "BrokerSample", "ExporterSource", "LoadMetric", "PrometheusSource", "USER_CATCH_UP",
           "metrics_table"]
