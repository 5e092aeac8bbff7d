package kafkacanary.lanes;

import java.io.FileWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.common.TopicPartition;

/**
 * The rebalance callbacks of a subscribed consumer, for the KIP-848 migration canary (docs/migration-canary.md): one
 * JSON line per callback that carries partitions, and one when the service begins to close, in the file the canary
 * gives ($KAFKA_CANARY_REBALANCES), as canary.clients.member.GroupMember writes them. A listener is the one thing a
 * client setting cannot add, so this is one line of the service's code:
 *
 *     RebalanceLog log = RebalanceLog.fromEnvironment();
 *     consumer.subscribe(topics, log);
 *     ...
 *     log.closing();  consumer.close();
 *
 * Without $KAFKA_CANARY_REBALANCES (outside a migration canary) it writes nothing.
 */
public final class RebalanceLog implements ConsumerRebalanceListener {
    private final String path;
    private final String instance;
    private final String lane;

    public RebalanceLog(String path, String clientId) {
        this.path = path;
        this.instance = clientId + "#" + ProcessHandle.current().pid();
        this.lane = Lanes.clientLane(clientId);
    }

    /** The file and the instance id from the migration canary's contract. */
    public static RebalanceLog fromEnvironment() {
        String id = System.getenv("KAFKA_CANARY_INSTANCE_ID");
        return new RebalanceLog(System.getenv("KAFKA_CANARY_REBALANCES"), id == null ? "" : id);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        record("assigned", partitions);
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        record("revoked", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        record("lost", partitions);
    }

    /** Before the consumer closes: its own revocation is not a disruption. */
    public void closing() {
        record("closing", List.of());
    }

    private synchronized void record(String kind, Collection<TopicPartition> partitions) {
        if (path == null || path.isEmpty() || (partitions.isEmpty() && !kind.equals("closing"))) {
            return;
        }
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            numbers.add(tp.partition());
        }
        Collections.sort(numbers);
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("at_ms", Observations.nowMs());
        line.put("instance", instance);
        line.put("lane", lane);
        line.put("kind", kind);
        String json = Observations.json(line);
        // the partitions as a JSON array: Observations.json writes only strings, numbers and null
        json = json.substring(0, json.length() - 1) + ",\"partitions\":" + numbers.toString().replace(" ", "") + "}";
        try (FileWriter out = new FileWriter(path, true)) {
            out.write(json + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("kafka-canary: cannot write the rebalance log " + path, e);
        }
    }
}
