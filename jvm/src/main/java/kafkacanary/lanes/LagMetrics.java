package kafkacanary.lanes;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;

/**
 * The consumer's own per-partition lag (`records-lag` of consumer-fetch-manager-metrics: records between the fetch
 * position and the high watermark), kept for LaneConsumerInterceptor, which cannot reach the consumer: with
 * `metric.reporters=kafkacanary.lanes.LagMetrics` beside the interceptor, every processed observation carries its
 * partition's lag as LaneConsumer's do. Without it the observations' lag is null.
 */
public final class LagMetrics implements MetricsReporter {
    private static final Map<String, KafkaMetric> LAG = new ConcurrentHashMap<>();

    private static String key(String clientId, String topic, int partition) {
        return clientId + "\u0000" + topic + "\u0000" + partition;
    }

    /** The partition's lag as the consumer `clientId` last fetched it, or null when unknown. */
    static Long lag(String clientId, String topic, int partition) {
        KafkaMetric metric = LAG.get(key(clientId, topic, partition));
        Object value = metric == null ? null : metric.metricValue();
        if (!(value instanceof Double d) || d.isNaN() || d < 0) {
            return null;
        }
        return Math.round(d);
    }

    private static String keyOf(KafkaMetric metric) {
        Map<String, String> tags = metric.metricName().tags();
        if (!metric.metricName().name().equals("records-lag") || !tags.containsKey("partition")) {
            return null;
        }
        return key(tags.get("client-id"), tags.get("topic"), Integer.parseInt(tags.get("partition")));
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
        metrics.forEach(this::metricChange);
    }

    @Override
    public void metricChange(KafkaMetric metric) {
        String key = keyOf(metric);
        if (key != null) {
            LAG.put(key, metric);
        }
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
        String key = keyOf(metric);
        if (key != null) {
            LAG.remove(key, metric);
        }
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}
