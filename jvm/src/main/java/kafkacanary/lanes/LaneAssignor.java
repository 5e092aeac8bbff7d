package kafkacanary.lanes;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * A consumer group (classic protocol) whose members keep to their lanes, as LaneConsumers do: each member says its
 * lane in its subscription; the group leader gives the canary members the partitions led by canary brokers and
 * the baseline members the rest, round robin over the members sorted by group.instance.id (else member id).
 *
 * - Leaders are read fresh (an Admin describe of the subscribed topics) when the assignment is made: the leader's
 *   cached metadata can be minutes old, and a lane opened a second ago must count. If that read fails, the cached
 *   metadata decides.
 * - Canary partitions with no canary member subscribed go to the baseline members (no canary consumer yet, or
 *   none left after a rollback): nothing goes unread. Baseline partitions never go to a canary member, even with no
 *   baseline member left: the version under test touches only its lane (they wait for a baseline member).
 * - A partition without a leader stays with the member that owned it, else goes to the baseline.
 * - Lanes are decided at each rebalance: a leadership change between rebalances (a broker restarted mid-rollout)
 *   is followed at the next one. LaneConsumer follows it at once; say so to the rollout (docs/clients.md).
 *
 * partition.assignment.strategy=kafkacanary.lanes.LaneAssignor, and the lane from client.id or group.instance.id.
 */
public class LaneAssignor implements ConsumerPartitionAssignor, Configurable, AutoCloseable {
    public static final String NAME = "kafka-canary-lanes";
    private String lane = Lanes.BASELINE;
    private final Map<String, Object> adminConfig = new HashMap<>();
    private Admin admin;

    @Override
    public void configure(Map<String, ?> configs) {
        lane = Lanes.configLane(configs);
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (AdminClientConfig.configNames().contains(e.getKey())) {
                adminConfig.put(e.getKey(), e.getValue());
            }
        }
        adminConfig.put(AdminClientConfig.CLIENT_ID_CONFIG, configs.get("client.id") + "-lanes");
    }

    public String lane() {
        return lane;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public ByteBuffer subscriptionUserData(Set<String> topics) {
        return ByteBuffer.wrap(lane.getBytes(StandardCharsets.UTF_8));
    }

    static String laneOf(Subscription s) {
        if (s.userData() == null) {
            return Lanes.BASELINE;
        }
        ByteBuffer data = s.userData().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        return Lanes.CANARY.equals(new String(bytes, StandardCharsets.UTF_8)) ? Lanes.CANARY : Lanes.BASELINE;
    }

    @Override
    public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
        Map<String, Subscription> members = groupSubscription.groupSubscription();
        Set<String> topics = new TreeSet<>();
        members.values().forEach(s -> topics.addAll(s.topics()));
        Map<TopicPartition, Node> leaders = leaders(metadata, topics);
        Map<TopicPartition, String> owners = new HashMap<>();
        members.forEach((id, s) -> s.ownedPartitions().forEach(tp -> owners.put(tp, id)));
        Map<String, List<TopicPartition>> assigned = new HashMap<>();
        members.keySet().forEach(id -> assigned.put(id, new ArrayList<>()));
        for (String topic : topics) {
            Map<String, List<TopicPartition>> byLane = Map.of(Lanes.CANARY, new ArrayList<>(), Lanes.BASELINE,
                    new ArrayList<>());
            for (TopicPartition tp : sorted(leaders, topic)) {
                String partitionLane = Lanes.partitionLane(leaders.get(tp));
                String owner = owners.get(tp);
                if (partitionLane == null && owner != null && members.get(owner).topics().contains(topic)) {
                    assigned.get(owner).add(tp);
                } else {
                    byLane.get(partitionLane == null ? Lanes.BASELINE : partitionLane).add(tp);
                }
            }
            for (String partitionLane : List.of(Lanes.CANARY, Lanes.BASELINE)) {
                List<String> takers = subscribers(members, topic, partitionLane);
                if (takers.isEmpty() && partitionLane.equals(Lanes.CANARY)) {  // the baseline reads them meanwhile
                    takers = subscribers(members, topic, Lanes.BASELINE);
                }
                List<TopicPartition> partitions = byLane.get(partitionLane);
                for (int i = 0; i < partitions.size() && !takers.isEmpty(); i++) {
                    assigned.get(takers.get(i % takers.size())).add(partitions.get(i));
                }
            }
        }
        Map<String, Assignment> result = new HashMap<>();
        assigned.forEach((id, tps) -> result.put(id, new Assignment(tps)));
        return new GroupAssignment(result);
    }

    private static List<TopicPartition> sorted(Map<TopicPartition, Node> leaders, String topic) {
        List<TopicPartition> found = new ArrayList<>();
        for (TopicPartition tp : leaders.keySet()) {
            if (tp.topic().equals(topic)) {
                found.add(tp);
            }
        }
        found.sort(Comparator.comparingInt(TopicPartition::partition));
        return found;
    }

    private static List<String> subscribers(Map<String, Subscription> members, String topic, String lane) {
        List<String> found = new ArrayList<>();
        members.forEach((id, s) -> {
            if (s.topics().contains(topic) && laneOf(s).equals(lane)) {
                found.add(id);
            }
        });
        Comparator<String> byInstance = Comparator.comparing(id -> members.get(id).groupInstanceId().orElse(id));
        found.sort(byInstance.thenComparing(Comparator.naturalOrder()));
        return found;
    }

    /** Every partition of `topics` with its leader (null: none), fresh from the cluster where it answers. */
    Map<TopicPartition, Node> leaders(Cluster metadata, Set<String> topics) {
        Map<TopicPartition, Node> found = new HashMap<>();
        try {
            if (admin == null) {
                admin = Admin.create(adminConfig);
            }
            Map<String, TopicDescription> described = admin.describeTopics(topics).allTopicNames()
                    .get(10, TimeUnit.SECONDS);
            for (TopicDescription d : described.values()) {
                for (TopicPartitionInfo p : d.partitions()) {
                    found.put(new TopicPartition(d.name(), p.partition()), p.leader());
                }
            }
            return found;
        } catch (Exception e) {
            System.err.println("kafka-canary: reading the leaders of " + topics + " failed (" + e
                    + "); assigning lanes from the consumer's cached metadata");
            found.clear();
        }
        for (String topic : topics) {
            for (PartitionInfo p : metadata.partitionsForTopic(topic)) {
                found.put(new TopicPartition(topic, p.partition()), p.leader());
            }
        }
        return found;
    }

    @Override
    public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {}

    @Override
    public void close() {
        if (admin != null) {
            admin.close();
        }
    }
}
