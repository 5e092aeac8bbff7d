package kafkacanary.lanes;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;

/**
 * The lane rules of canary/lanes.py, for JVM clients: a broker is canary when its rack is the canary marker or ends
 * in ":" + marker; a partition is in the lane of its leader; a client is canary when its client.id or
 * group.instance.id has the client marker as a token (tokens split at - . _ :), or when kafka.canary.lane says so.
 */
public final class Lanes {
    public static final String CANARY = "canary";
    public static final String BASELINE = "baseline";
    /** An explicit lane for a client ("canary" or "baseline"), over the one its ids carry. */
    public static final String LANE_CONFIG = "kafka.canary.lane";
    static final String TOKEN_SEPARATORS = "[-._:]";

    private Lanes() {}

    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    public static String brokerMarker() {
        return env("KAFKA_CANARY_MARKER", "canary-broker");
    }

    public static String clientMarker() {
        return env("KAFKA_CANARY_CLIENT_MARKER", "canary");
    }

    public static String brokerLane(String rack) {
        if (rack == null || rack.isBlank()) {
            return BASELINE;
        }
        String r = rack.strip();
        String mark = brokerMarker();
        return r.equals(mark) || r.endsWith(":" + mark) ? CANARY : BASELINE;
    }

    public static String clientLane(String clientId) {
        if (clientId == null || clientId.isEmpty()) {
            return BASELINE;
        }
        List<String> tokens = Arrays.asList(clientId.split(TOKEN_SEPARATORS, -1));
        List<String> mark = Arrays.asList(clientMarker().split(TOKEN_SEPARATORS, -1));
        for (int i = 0; i + mark.size() <= tokens.size(); i++) {
            if (tokens.subList(i, i + mark.size()).equals(mark)) {
                return CANARY;
            }
        }
        return BASELINE;
    }

    /** A client's lane from its configuration; a kafka.canary.lane that is neither lane is refused. */
    public static String configLane(Map<String, ?> configs) {
        Object explicit = configs.get(LANE_CONFIG);
        if (explicit != null) {
            String lane = explicit.toString().strip();
            if (!lane.equals(CANARY) && !lane.equals(BASELINE)) {
                throw new IllegalArgumentException(LANE_CONFIG + " is '" + lane + "'; set canary or baseline, or "
                        + "leave it out to take the lane from client.id or group.instance.id");
            }
            return lane;
        }
        for (String key : new String[] {"client.id", "group.instance.id"}) {
            Object value = configs.get(key);
            if (value != null && clientLane(value.toString()).equals(CANARY)) {
                return CANARY;
            }
        }
        return BASELINE;
    }

    /** The partition's lane by its leader, or null when it has none (offline, in an election). */
    public static String partitionLane(Node leader) {
        return leader == null || leader.isEmpty() ? null : brokerLane(leader.rack());
    }

    /** The partitions of `topic` in `lane`, sorted. */
    public static List<Integer> partitions(Cluster cluster, String topic, String lane) {
        List<Integer> found = new ArrayList<>();
        for (PartitionInfo p : cluster.partitionsForTopic(topic)) {
            if (lane.equals(partitionLane(p.leader()))) {
                found.add(p.partition());
            }
        }
        found.sort(null);
        return found;
    }
}
