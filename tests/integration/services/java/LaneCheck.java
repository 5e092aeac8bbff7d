import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The lane test's plain Java clients, lane-aware by configuration alone (kafka-canary-lanes):
 *   produce BOOTSTRAP TOPIC CLIENT_ID COUNT            COUNT records, every other one keyed; prints the partitions used
 *   consume BOOTSTRAP TOPIC GROUP CLIENT_ID EXPECT STOP reads, staying in the group, until the file STOP exists (at
 *                                                      most two minutes); prints "assigned" when it first has
 *                                                      partitions, "reached" when EXPECT records have
 *                                                      come, then its assignment at that moment and the records read
 *                                                      per partition
 * One JSON line on stdout at the end.
 */
public class LaneCheck {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) {
            produce(args[1], args[2], args[3], Integer.parseInt(args[4]));
        } else {
            consume(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]), java.nio.file.Path.of(args[6]));
        }
    }

    static void produce(String bootstrap, String topic, String clientId, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("acks", "all");
        p.put("partitioner.class", "kafkacanary.lanes.LanePartitioner");
        p.put("interceptor.classes", "kafkacanary.lanes.LaneProducerInterceptor");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        Map<Integer, Integer> used = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                String key = i % 2 == 0 ? "key-" + (i % 50) : null;
                int partition = producer.send(new ProducerRecord<>(topic, key, clientId + ":" + i)).get().partition();
                used.merge(partition, 1, Integer::sum);
            }
        }
        System.out.println("{\"partitions\": " + json(used) + "}");
    }

    static void consume(String bootstrap, String topic, String group, String clientId, int expect,
                        java.nio.file.Path stop) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("client.id", clientId);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("partition.assignment.strategy", "kafkacanary.lanes.LaneAssignor");
        c.put("interceptor.classes", "kafkacanary.lanes.LaneConsumerInterceptor");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        Map<Integer, Integer> read = new TreeMap<>();
        TreeSet<Integer> assigned = new TreeSet<>();
        long deadline = System.currentTimeMillis() + 120_000L;
        int total = 0;
        boolean reached = false;
        boolean announced = false;  // "assigned" once: a rebalance empties the assignment before it fills it again
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            while (!java.nio.file.Files.exists(stop) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    read.merge(r.partition(), 1, Integer::sum);
                    total++;
                }
                consumer.commitSync();
                if (!reached) {  // the assignment as it stood when the last expected record came
                    if (!announced && !consumer.assignment().isEmpty()) {
                        announced = true;
                        System.out.println("assigned");
                        System.out.flush();
                    }
                    assigned.clear();
                    for (TopicPartition tp : consumer.assignment()) {
                        assigned.add(tp.partition());
                    }
                    reached = total >= expect;
                    if (reached) {
                        System.out.println("reached");
                        System.out.flush();
                    }
                }
            }
        }
        System.out.println("{\"assigned\": " + assigned + ", \"read\": " + json(read) + "}");
    }

    static String json(Map<Integer, Integer> counts) {
        StringBuilder out = new StringBuilder("{");
        counts.forEach((k, v) -> out.append(out.length() > 1 ? ", " : "").append('"').append(k).append("\": ")
                .append(v));
        return out.append('}').toString();
    }
}
