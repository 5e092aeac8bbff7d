package kafkacanary.lanes;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A produced observation per acknowledged (or failed) record, as LaneProducer writes them (docs/clients.md,
 * "Observations and metrics"): send_ts the record's timestamp, which the producer sets when send() is called unless
 * the service sets it (leave it to the producer: produce latency is measured from it), ack_ts when the
 * acknowledgement or the error arrived, the instance's lane. Each record sent also counts as an output of the
 * record its thread is processing (Outputs).
 *
 * interceptor.classes=kafkacanary.lanes.LaneProducerInterceptor; the run id from $KAFKA_CANARY_RUN_ID.
 */
public class LaneProducerInterceptor<K, V> implements ProducerInterceptor<K, V> {
    private Observations writer;
    private String lane;
    private String source;
    private final long epoch = System.currentTimeMillis();
    private final AtomicLong sent = new AtomicLong();
    private final Map<TopicPartition, AtomicLong> seq = new ConcurrentHashMap<>();

    @Override
    public void configure(Map<String, ?> configs) {
        lane = Lanes.configLane(configs);
        Object id = configs.get("client.id");
        source = id == null ? "" : id.toString();
        writer = Observations.acquire(configs);
    }

    @Override
    public ProducerRecord<K, V> onSend(ProducerRecord<K, V> record) {
        Outputs.produced();
        return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        double ackTs = Observations.nowMs();
        if (metadata == null) {
            return;
        }
        TopicPartition tp = new TopicPartition(metadata.topic(), Math.max(metadata.partition(), 0));
        Map<String, Object> o = writer.observation(source, lane, metadata.topic(), tp.partition());
        o.put("producer_id", source);
        o.put("message_id", epoch + ":" + sent.getAndIncrement());
        o.put("seq", seq.computeIfAbsent(tp, t -> new AtomicLong()).getAndIncrement());
        o.put("send_ts", metadata.hasTimestamp() ? (double) metadata.timestamp() : ackTs);
        o.put("ack_ts", ackTs);
        o.put("receive_ts", null);
        o.put("outcome", exception == null ? "delivered" : "produce_error");
        o.put("error", exception == null ? null : exception.getClass().getSimpleName() + ": " + exception.getMessage());
        writer.emit(Observations.json(o));
    }

    @Override
    public void close() {
        writer.release();
    }
}
