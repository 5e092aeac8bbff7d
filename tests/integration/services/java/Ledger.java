import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import kafkacanary.lanes.RebalanceLog;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * ledger in Java: the subscribed consumer of ledger.py as a JVM team writes it, with a plain KafkaConsumer in its
 * group. It takes group.protocol (and the assignor for it) from the migration canary's contract, the consumer
 * interceptor of kafka-canary-lanes observes what it processes (with the lag LagMetrics keeps), and RebalanceLog, the one line of kafka-canary in its
 * code, logs its rebalances. It books every payment (adds the amount to its account, a millisecond) and logs what it
 * booked. SIGTERM: finish the batch at hand, commit, leave the group, exit.
 */
public class Ledger {
    private static final Pattern FIELD = Pattern.compile("\"(account|amount)\"\\s*:\\s*\"?([^\",}]*)");

    public static void main(String[] args) throws IOException {
        String name = System.getenv("KAFKA_CANARY_INSTANCE_ID");
        String protocol = System.getenv("KAFKA_CANARY_GROUP_PROTOCOL");
        String assignor = System.getenv("KAFKA_CANARY_GROUP_ASSIGNOR");
        Properties c = new Properties();
        c.put("bootstrap.servers", System.getenv("KAFKA_CANARY_BOOTSTRAP"));
        c.put("group.id", System.getenv("KAFKA_CANARY_GROUP"));
        c.put("client.id", name);
        c.put("group.protocol", protocol);
        if (assignor != null && !assignor.isEmpty()) {
            c.put(protocol.equals("classic") ? "partition.assignment.strategy" : "group.remote.assignor", assignor);
        }
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("interceptor.classes", "kafkacanary.lanes.LaneConsumerInterceptor");
        c.put("metric.reporters", "kafkacanary.lanes.LagMetrics");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
        RebalanceLog rebalances = RebalanceLog.fromEnvironment();
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        System.out.println("ledger " + System.getenv("KAFKA_CANARY_VERSION") + " as " + name + " on " + protocol
                + " (java)");
        System.out.flush();
        Map<String, Long> accounts = new HashMap<>();
        try (PrintWriter booked = new PrintWriter(new FileWriter(System.getenv("KAFKA_CANARY_RECORDS"), true), false)) {
            consumer.subscribe(List.of(System.getenv("KAFKA_CANARY_TOPIC")), rebalances);
            while (true) {
                for (ConsumerRecord<String, String> msg : consumer.poll(Duration.ofMillis(200))) {
                    String account = "";
                    long amount = 0;
                    Matcher m = FIELD.matcher(msg.value());
                    while (m.find()) {
                        if (m.group(1).equals("account")) {
                            account = m.group(2);
                        } else {
                            amount = Long.parseLong(m.group(2).trim());
                        }
                    }
                    accounts.merge(account, amount, Long::sum);
                    sleep(1);
                    booked.write("{\"partition\":" + msg.partition() + ",\"offset\":" + msg.offset() + "}\n");
                    booked.flush();
                }
                try {
                    consumer.commitSync();
                } catch (CommitFailedException e) {
                    // the group moved on (a rebalance, a stale member epoch): the partitions' next owner books what
                    // this batch booked again from the last commit, at least once
                    System.out.println("commit failed, going on: " + e.getMessage());
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: the batch at hand is booked and committed
        } finally {
            rebalances.closing();
            consumer.close();
            closed.countDown();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
