// The Java client's side of bench/java_clients.py: one timed produce or consume run, its result as one JSON line.
//
//   java -cp <this>:<kafka jars> ClientBench produce|consume <bootstrap> <topic> <partitions> <records>
//       <value size> [key=value ...]
//
// produce: values of <value size> bytes keyed by 1,024 keys (key-0000 .. key-1023, in turn) as bench/clients.py, fire and forget with a callback that counts acknowledgements;
//   one record is produced and acknowledged before the clock starts (connected, metadata, producer id); timed
//   from the first send() to the end of flush(); every record must be acknowledged.
// consume: assign mode over every partition from offset 0; timed from the first poll() until <records> have
//   been read, every value touched (its length summed); the sum must be <records> x <value size>.
// The key=value pairs are client properties on top of bootstrap.servers and the byte-array (de)serializers, except
// bench.warmup.topic=T (produce: the same run into topic T first, untimed, so the JIT has compiled the client's hot
// paths) and bench.warmup=true (consume: the whole topic read once first, untimed, then again from offset 0).

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ClientBench {
    private ClientBench() {}

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        long records = Long.parseLong(args[4]);
        int size = Integer.parseInt(args[5]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String warmTopic = (String) props.remove("bench.warmup.topic");
        boolean warmRead = Boolean.parseBoolean((String) props.remove("bench.warmup"));
        double seconds;
        if (mode.equals("produce")) {
            if (warmTopic != null) {
                produce(props, warmTopic, records, size);
            }
            seconds = produce(props, topic, records, size);
        } else {
            if (warmRead) {
                consume(props, topic, partitions, records, size);
            }
            seconds = consume(props, topic, partitions, records, size);
        }
        System.out.println("{\"seconds\": " + seconds + "}");
    }

    static double produce(Properties props, String topic, long records, int size) throws Exception {
        byte[] value = new byte[size];
        new java.util.Random(42).nextBytes(value);
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            byte[][] keys = new byte[1024][];
            for (int k = 0; k < keys.length; k++) {
                keys[k] = String.format("key-%04d", k).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
            }
            producer.send(new ProducerRecord<>(topic, keys[0], "warm-up".getBytes())).get();
            long start = System.nanoTime();
            for (long i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, keys[(int) (i & 1023)], value), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.compareAndSet(null, e);
                    }
                });
            }
            producer.flush();
            double seconds = (System.nanoTime() - start) / 1e9;
            if (failed.get() != null || acked.get() != records) {
                throw new IllegalStateException(acked.get() + " of " + records + " acknowledged", failed.get());
            }
            return seconds;
        }
    }

    static double consume(Properties props, String topic, int partitions, long records, int size) {
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long got = 0;
            long touched = 0;
            long start = System.nanoTime();
            long deadline = start + 600_000_000_000L;
            while (got < records) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(5000));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    touched += r.value().length;
                    got++;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("stalled at " + got + " of " + records);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            if (got != records || touched != records * size) {
                throw new IllegalStateException(got + " records, " + touched + " value bytes");
            }
            return seconds;
        }
    }
}
