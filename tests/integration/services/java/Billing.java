import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * billing in Java: the consume-transform-produce service of billing.py as a JVM team writes it, with plain
 * KafkaConsumer and KafkaProducer. It joins its lane by configuration alone: kafka-canary-lanes on the classpath,
 * the lane assignor and the consumer interceptor on the consumer, the lane partitioner and the producer interceptor
 * on the producer; client.id is the instance id the rollout gives it. It bills every order (a millisecond), writes
 * one payment per order to <topic>-payments and logs what it billed. Version "2.0-drops" writes no payment for one
 * order in a hundred. SIGTERM: finish the batch at hand, commit, close, exit.
 */
public class Billing {
    private static final Pattern FIELD = Pattern.compile("\"(id|n)\"\\s*:\\s*\"?([^\",}]*)");

    public static void main(String[] args) throws IOException {
        String name = System.getenv("KAFKA_CANARY_INSTANCE_ID");
        String version = System.getenv("KAFKA_CANARY_VERSION");
        String topic = System.getenv("KAFKA_CANARY_TOPIC");
        String bootstrap = System.getenv("KAFKA_CANARY_BOOTSTRAP");

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", System.getenv("KAFKA_CANARY_GROUP"));
        c.put("client.id", name);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("session.timeout.ms", "10000");
        c.put("metadata.max.age.ms", "10000");
        c.put("partition.assignment.strategy", "kafkacanary.lanes.LaneAssignor");
        c.put("interceptor.classes", "kafkacanary.lanes.LaneConsumerInterceptor");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", name);
        p.put("acks", "all");
        p.put("metadata.max.age.ms", "10000");
        p.put("partitioner.class", "kafkacanary.lanes.LanePartitioner");
        p.put("interceptor.classes", "kafkacanary.lanes.LaneProducerInterceptor");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
        KafkaProducer<String, String> payments = new KafkaProducer<>(p);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        System.out.println("billing " + version + " as " + name + " in the " + System.getenv("KAFKA_CANARY_LANE")
                + " lane (java)");
        System.out.flush();
        try (PrintWriter billed = new PrintWriter(new FileWriter(System.getenv("KAFKA_CANARY_RECORDS"), true), false)) {
            consumer.subscribe(List.of(topic));
            while (true) {
                for (ConsumerRecord<String, String> msg : consumer.poll(Duration.ofMillis(500))) {
                    String id = null;
                    long n = 0;
                    Matcher m = FIELD.matcher(msg.value());
                    while (m.find()) {
                        if (m.group(1).equals("id")) {
                            id = m.group(2);
                        } else {
                            n = Long.parseLong(m.group(2).trim());
                        }
                    }
                    sleep(1);
                    if (!("2.0-drops".equals(version) && n % 100 == 0)) {
                        payments.send(new ProducerRecord<>(topic + "-payments", id, "{\"order\":\"" + id + "\"}"));
                    }
                    billed.write("{\"partition\":" + msg.partition() + ",\"offset\":" + msg.offset()
                            + ",\"id\":\"" + id + "\"}\n");  // one write per line: readers see whole lines
                    billed.flush();
                }
                payments.flush();
                consumer.commitSync();
            }
        } catch (WakeupException e) {
            // SIGTERM: the batch at hand is billed and committed
        } finally {
            consumer.close();
            payments.close();
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
