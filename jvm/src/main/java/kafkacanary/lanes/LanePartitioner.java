package kafkacanary.lanes;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.PartitionInfo;

/**
 * A producer that keeps to its lane (docs/clients.md, "Producing: the partition rules"), as LaneProducer does:
 * the candidates are the lane's partitions, sorted; with none, every partition that has a leader (availability
 * first, the KIP's fallback); a keyed record goes to candidates[crc32(key) % n], librdkafka's and LaneProducer's
 * hash, so a Java and a Python producer put a key on the same partition; an unkeyed one round robin.
 *
 * partitioner.class=kafkacanary.lanes.LanePartitioner, and the lane from client.id (or kafka.canary.lane).
 */
public class LanePartitioner implements Partitioner {
    private String lane = Lanes.BASELINE;
    private final Map<String, AtomicInteger> next = new ConcurrentHashMap<>();
    private final Map<String, Boolean> fallingBack = new ConcurrentHashMap<>();

    @Override
    public void configure(Map<String, ?> configs) {
        lane = Lanes.configLane(configs);
    }

    public String lane() {
        return lane;
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes,
                         Cluster cluster) {
        List<Integer> candidates = Lanes.partitions(cluster, topic, lane);
        boolean fallback = candidates.isEmpty();
        if (fallback) {
            candidates = new ArrayList<>();
            for (PartitionInfo p : cluster.availablePartitionsForTopic(topic)) {
                candidates.add(p.partition());
            }
            if (candidates.isEmpty()) {
                for (PartitionInfo p : cluster.partitionsForTopic(topic)) {
                    candidates.add(p.partition());
                }
            }
            candidates.sort(null);
        }
        noteFallback(topic, fallback);
        if (keyBytes != null) {
            CRC32 crc = new CRC32();
            crc.update(keyBytes);
            return candidates.get((int) (crc.getValue() % candidates.size()));
        }
        int n = next.computeIfAbsent(topic, t -> new AtomicInteger()).getAndIncrement();
        return candidates.get(Math.floorMod(n, candidates.size()));
    }

    // One line when a fallback starts and one when it ends, never one per record.
    private void noteFallback(String topic, boolean fallback) {
        Boolean before = fallingBack.put(topic, fallback);
        if (before == null ? fallback : before != fallback) {
            System.err.println("kafka-canary: the " + lane + " producer " + (fallback
                    ? "has no partition of its lane in " + topic + "; falling back to every partition with a leader"
                    : "has partitions of its lane in " + topic + " again"));
        }
    }

    @Override
    public void close() {}
}
