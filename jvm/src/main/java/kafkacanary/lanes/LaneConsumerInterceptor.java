package kafkacanary.lanes;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A processed observation per record, as LaneConsumer writes them, seen from outside the service's code: a batch is
 * received when poll() returns it and processed by the time the service last produced (or committed) before its
 * next poll. So, per record of a batch: receive_ts when the batch came, processing_ms the batch's processing time
 * over its records, outputs the records the polling thread produced meanwhile, spread over the batch's records
 * (with fewer outputs than records, the remainder shows as records without output: a 1-to-1 service that drops a
 * record in a hundred shows a hundredth). A batch with neither output nor commit has no processing time. A
 * processing error the service catches is invisible here: LaneConsumer.processing() sees it.
 *
 * interceptor.classes=kafkacanary.lanes.LaneConsumerInterceptor; the run id from $KAFKA_CANARY_RUN_ID. With
 * metric.reporters=kafkacanary.lanes.LagMetrics too, each observation carries its partition's lag (else null).
 */
public class LaneConsumerInterceptor<K, V> implements ConsumerInterceptor<K, V> {
    private record Received(String topic, int partition, long offset, long timestamp) {}

    private Observations writer;
    private String lane;
    private String source;
    private String clientId;
    private List<Received> batch = List.of();
    private double receivedMs;
    private Thread poller;
    private boolean produces;  // outputs are counted once the service has produced anything at all

    @Override
    public void configure(Map<String, ?> configs) {
        lane = Lanes.configLane(configs);
        Object id = configs.get("group.instance.id");
        if (id == null) {
            id = configs.get("client.id");
        }
        source = id == null ? "" : id.toString();
        Object client = configs.get("client.id");
        clientId = client == null ? "" : client.toString();
        writer = Observations.acquire(configs);
    }

    @Override
    public ConsumerRecords<K, V> onConsume(ConsumerRecords<K, V> records) {
        double now = Observations.nowMs();
        poller = Thread.currentThread();
        finish(Outputs.take());
        List<Received> next = new ArrayList<>(records.count());
        for (ConsumerRecord<K, V> r : records) {
            next.add(new Received(r.topic(), r.partition(), r.offset(), r.timestamp()));
        }
        batch = next;
        receivedMs = now;
        return records;
    }

    @Override
    public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
        if (Thread.currentThread() == poller) {
            Outputs.active();
        }
    }

    private void finish(Outputs.Count done) {
        int n = batch.size();
        produces |= done.records > 0;
        if (n == 0) {
            return;
        }
        Double processingMs = done.lastMs > receivedMs ? (done.lastMs - receivedMs) / n : null;
        for (int i = 0; i < n; i++) {
            Received r = batch.get(i);
            long outputs = done.records / n + (i < done.records % n ? 1 : 0);
            Map<String, Object> o = writer.observation(source, lane, r.topic(), r.partition());
            o.put("producer_id", "");
            o.put("message_id", r.topic() + "-" + r.partition() + "@" + r.offset());
            o.put("seq", r.offset());
            o.put("send_ts", (double) r.timestamp());
            o.put("ack_ts", null);
            o.put("receive_ts", receivedMs);
            o.put("outcome", "delivered");
            o.put("error", null);
            o.put("processing_ms", processingMs == null ? null : Math.round(processingMs * 1000) / 1000.0);
            o.put("lag", LagMetrics.lag(clientId, r.topic(), r.partition()));
            o.put("outputs", produces ? outputs : null);
            writer.emit(Observations.json(o));
        }
        batch = List.of();
    }

    @Override
    public void close() {
        if (Thread.currentThread() == poller) {
            finish(Outputs.take());
        }
        writer.release();
    }
}
