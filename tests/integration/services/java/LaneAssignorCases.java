import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import kafkacanary.lanes.LaneAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * LaneAssignor's rules on crafted placements, with no broker (its fresh read of the leaders fails at once, so the
 * metadata given decides): `java LaneAssignorCases CASE` prints the assignment, member -> partitions, as JSON.
 * Broker 3 is the canary broker; partitions 2 and 5 of `orders` are led by it; "-" as a leader: none.
 */
public class LaneAssignorCases {
    static final Node B1 = new Node(1, "b1", 9092, "a");
    static final Node B2 = new Node(2, "b2", 9092, "b");
    static final Node CANARY = new Node(3, "b3", 9092, "c:canary-broker");

    public static void main(String[] args) {
        Map<String, Subscription> members = new TreeMap<>();
        Node[] leaders = {B1, B2, CANARY, B1, B2, CANARY};
        switch (args[0]) {
            case "lanes" -> {
                members.put("m-b", member("baseline", "svc-1", List.of()));
                members.put("m-a", member("baseline", "svc-0", List.of()));
                members.put("m-c", member("canary", "svc-0-canary", List.of()));
            }
            case "no-canary-member" -> members.put("m-a", member("baseline", "svc-0", List.of()));
            case "no-baseline-member" -> members.put("m-c", member("canary", "svc-0-canary", List.of()));
            case "leaderless" -> {
                leaders[3] = null;
                leaders[4] = null;
                members.put("m-a", member("baseline", "svc-0", List.of()));
                members.put("m-c", member("canary", "svc-0-canary", List.of(new TopicPartition("orders", 3))));
            }
            default -> throw new IllegalArgumentException(args[0]);
        }
        List<PartitionInfo> partitions = new ArrayList<>();
        for (int p = 0; p < leaders.length; p++) {
            partitions.add(new PartitionInfo("orders", p, leaders[p], new Node[] {B1, B2, CANARY},
                    new Node[] {B1, B2, CANARY}));
        }
        Cluster cluster = new Cluster("c", List.of(B1, B2, CANARY), partitions, Set.of(), Set.of());
        LaneAssignor assignor = new LaneAssignor();
        assignor.configure(Map.of("client.id", "svc-0"));
        Map<String, List<Integer>> shown = new TreeMap<>();
        assignor.assign(cluster, new GroupSubscription(members)).groupAssignment().forEach((id, a) -> shown.put(
                members.get(id).groupInstanceId().orElse(id),
                a.partitions().stream().map(TopicPartition::partition).sorted().toList()));
        StringBuilder out = new StringBuilder("{");
        shown.forEach((k, v) -> out.append(out.length() > 1 ? ", " : "").append('"').append(k).append("\": ")
                .append(v));
        System.out.println(out.append('}'));
    }

    static Subscription member(String lane, String instance, List<TopicPartition> owned) {
        Subscription s = new Subscription(List.of("orders"), ByteBuffer.wrap(lane.getBytes(StandardCharsets.UTF_8)),
                owned);
        s.setGroupInstanceId(Optional.of(instance));
        return s;
    }
}
