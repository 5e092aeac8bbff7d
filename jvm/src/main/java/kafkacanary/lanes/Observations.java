package kafkacanary.lanes;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Writes client observations (canary/observations.py, schema 1: one JSON object per record) to the observations
 * topic of the client's own cluster, with its connection and security settings, keyed by the run id, as the Python
 * lane clients' ObservationSink does. One writer per cluster and run id in a JVM, shared by its interceptors.
 * Never blocks the client and never throws into it: a failed write is counted.
 */
public final class Observations implements AutoCloseable {
    public static final String TOPIC = "__kafka_canary_observations";
    /** The run id observations carry, over $KAFKA_CANARY_RUN_ID. */
    public static final String RUN_ID_CONFIG = "kafka.canary.run.id";
    static final long RETENTION_MS = 7L * 24 * 3600 * 1000;
    private static final Map<String, Observations> SHARED = new HashMap<>();

    final String runId;
    private final KafkaProducer<byte[], byte[]> producer;
    private final String key;
    private int users;
    final AtomicLong failed = new AtomicLong();

    private Observations(String runId, Map<String, Object> connection) {
        this.runId = runId;
        this.key = connection.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG) + "|" + runId;
        ensureTopic(connection);
        Properties props = new Properties();
        props.putAll(connection);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, 500);  // the analysis reads a run long after: few requests
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "kafka-canary-observations");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producer = new KafkaProducer<>(props);
    }

    /** The shared writer for a client's configuration; release() it when the client closes. */
    static synchronized Observations acquire(Map<String, ?> configs) {
        Object configured = configs.get(RUN_ID_CONFIG);
        String runId = configured != null ? configured.toString() : Lanes.env("KAFKA_CANARY_RUN_ID", "");
        if (runId.isEmpty()) {
            throw new IllegalArgumentException("observations need a run id: set " + RUN_ID_CONFIG
                    + " or $KAFKA_CANARY_RUN_ID (a client rollout sets it for every instance)");
        }
        Map<String, Object> connection = connection(configs);
        String key = connection.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG) + "|" + runId;
        Observations writer = SHARED.computeIfAbsent(key, k -> new Observations(runId, connection));
        writer.users++;
        return writer;
    }

    /** The settings that reach the client's cluster as the client does: bootstrap, security, DNS. */
    static Map<String, Object> connection(Map<String, ?> configs) {
        Map<String, Object> found = new HashMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            String k = e.getKey();
            if (k.equals("bootstrap.servers") || k.equals("security.protocol") || k.startsWith("ssl.")
                    || k.startsWith("sasl.") || k.equals("client.dns.lookup")) {
                found.put(k, e.getValue() instanceof java.util.List<?> list
                        ? String.join(",", list.stream().map(Object::toString).toList()) : e.getValue());
            }
        }
        return found;
    }

    private static void ensureTopic(Map<String, Object> connection) {
        try (Admin admin = Admin.create(connection)) {
            int brokers = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size();
            short rf = (short) Math.min(brokers, 3);
            NewTopic topic = new NewTopic(TOPIC, Math.max(3, brokers), rf).configs(Map.of(
                    "min.insync.replicas", String.valueOf(Math.max(1, rf - 1)),
                    "retention.ms", String.valueOf(RETENTION_MS)));
            admin.createTopics(java.util.List.of(topic)).all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                System.err.println("kafka-canary: creating " + TOPIC + " failed: " + e.getCause());
            }
        } catch (Exception e) {
            System.err.println("kafka-canary: creating " + TOPIC + " failed: " + e);
        }
    }

    void emit(String json) {
        try {
            producer.send(new ProducerRecord<>(TOPIC, runId.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                    json.getBytes(java.nio.charset.StandardCharsets.UTF_8)), (m, e) -> {
                        if (e != null) {
                            failed.incrementAndGet();
                        }
                    });
        } catch (RuntimeException e) {
            failed.incrementAndGet();
        }
    }

    synchronized void release() {
        synchronized (Observations.class) {
            if (--users == 0) {
                SHARED.remove(key);
                close();
            }
        }
    }

    @Override
    public void close() {
        producer.close(java.time.Duration.ofSeconds(10));
        if (failed.get() > 0) {
            System.err.println("kafka-canary: " + failed.get() + " observations could not be written");
        }
    }

    /** Milliseconds since the epoch with the microseconds, as the Python observers write them. */
    static double nowMs() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1000.0 + now.getNano() / 1_000_000.0;
    }

    /** The fields every client observation of this writer starts with (canary/observations.py's order). */
    Map<String, Object> observation(String source, String lane, String topic, int partition) {
        Map<String, Object> o = new java.util.LinkedHashMap<>();
        o.put("run_id", runId);
        o.put("kind", "client");
        o.put("source", source);
        o.put("topic", topic);
        o.put("partition", partition);
        o.put("leader", null);
        o.put("lane", lane);
        o.put("schema", 1);
        return o;
    }

    /** One observation as the JSON object canary/observations.py reads; values are String, Number or null. */
    static String json(Map<String, Object> fields) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            quote(out, e.getKey()).append(':');
            Object v = e.getValue();
            if (v == null) {
                out.append("null");
            } else if (v instanceof Number) {
                out.append(v);
            } else {
                quote(out, v.toString());
            }
        }
        return out.append('}').toString();
    }

    private static StringBuilder quote(StringBuilder out, String s) {
        out.append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"');
    }
}
