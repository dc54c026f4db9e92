// The Java client (kafka-clients 4.x) and Kafka's own tools driven by the groupstream tests.
//
// Why: Apache Kafka's Java client is the reference implementation of the protocols our broker serves (the
// AsyncKafkaConsumer of KIP-848, the classic group protocol, idempotent produce), so the tests run it against
// our broker and read what it reports. Compiled with javac at test time (tests/java/java_harness.py).
//
// Commands are JSON objects, one per line on stdin, or one per program argument (then stdin carries only the
// "close" and "commit" lines of a consume command). Every output line on stdout is one JSON event with "ev"
// and "t" (System.nanoTime in seconds: CLOCK_MONOTONIC on Linux, the clock of Python's time.monotonic, so
// events of different processes compare). Each command ends with {"ev":"done","cmd":...,"id":...} or
// {"ev":"failed","cmd":...,"id":...,"error":...,"message":...}.
//
//   produce   bootstrap topic count codec [tag acks idempotent props]: the records of support.compat.make_records,
//             an "ack" per record (i, partition, offset, key, value) or an "ack_error", then "produced"
//   read      bootstrap topic count [timeout_s]: every partition from offset 0 in assign mode, a "record"
//             (partition, offset, key, value) each, until count records, then one more poll
//   consume   a group member until "close" on stdin, SIGTERM (closes cleanly) or kill -9: bootstrap group
//             topics|pattern [regex: client|broker] protocol strategy instance_id session_timeout_ms
//             heartbeat_ms max_poll_interval_ms max_records batch_delay_s commit(batch|manual) name props;
//             the events of tests/compat/groups/group_member.py (owned, recs, committing, commit, error,
//             closed) plus assigned/revoked/lost with the partitions each callback was given
//   admin     bootstrap op ...: one Admin call per command (an Admin client per bootstrap is kept), its result
//             as {"ev":"admin","op":...,"result":...} (errors by exception class, per item where Kafka has one)
//   tool      main args [stdin timeout_s]: a Kafka tool's main class run in this JVM with System.out/err
//             captured and its exit call caught: {"ev":"tool","code":...,"out":...,"err":...}
//   exit      end the program
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DeleteConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.DeleteConsumerGroupsResult;
import org.apache.kafka.clients.admin.DeleteRecordsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.Exit;

public final class GroupstreamHarness {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final BlockingQueue<String> INPUT = new LinkedBlockingQueue<>();
    private static final String EOF = "\u0000eof";
    private static final Map<String, Admin> ADMINS = new HashMap<>();
    // SIGTERM: the consume loop sees this, closes its consumer (leaving the group) and counts the latch down
    private static final AtomicBoolean STOPPING = new AtomicBoolean();
    private static final CountDownLatch CLOSED = new CountDownLatch(1);
    private static volatile KafkaConsumer<byte[], byte[]> active;

    public static void main(String[] args) throws Exception {
        Thread reader = new Thread(GroupstreamHarness::readStdin, "stdin");
        reader.setDaemon(true);
        reader.start();
        Runtime.getRuntime().addShutdownHook(new Thread(GroupstreamHarness::onShutdown, "sigterm"));
        // Commands given as arguments are the whole program (stdin then only carries "close" and "commit").
        List<String> commands = new ArrayList<>(List.of(args));
        boolean fromArgs = !commands.isEmpty();
        while (!fromArgs || !commands.isEmpty()) {
            String line = fromArgs ? commands.remove(0) : INPUT.take();
            if (line.equals(EOF)) break;
            if (line.isBlank()) continue;
            JsonNode cmd = JSON.readTree(line);
            String name = cmd.path("cmd").asText();
            if (name.equals("exit")) break;
            try {
                switch (name) {
                    case "produce" -> produce(cmd);
                    case "consume" -> consume(cmd);
                    case "read" -> read(cmd);
                    case "admin" -> admin(cmd);
                    case "tool" -> tool(cmd);
                    default -> throw new IllegalArgumentException("unknown command " + name);
                }
                emit("done", obj().put("cmd", name).put("id", cmd.path("id").asText()));
            } catch (Exception e) {
                Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                emit("failed", obj().put("cmd", name).put("id", cmd.path("id").asText())
                        .put("error", cause.getClass().getSimpleName()).put("message", String.valueOf(cause.getMessage())));
            }
            if (STOPPING.get()) break;
        }
        for (Admin a : ADMINS.values()) a.close(Duration.ofSeconds(5));
        OUT.flush();
        System.exit(0);  // the stdin reader may still block on a pipe the test keeps open
    }

    private static void readStdin() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null; ) INPUT.add(line.strip());
        } catch (Exception e) {
            // an unreadable stdin ends the input like EOF does
        }
        INPUT.add(EOF);
    }

    private static void onShutdown() {
        STOPPING.set(true);
        KafkaConsumer<byte[], byte[]> c = active;
        if (c == null) return;
        c.wakeup();
        try {
            CLOSED.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // -- output ------------------------------------------------------------------------------------------

    static ObjectNode obj() {
        return JSON.createObjectNode();
    }

    static double now() {
        return System.nanoTime() / 1e9;
    }

    static void emit(String ev, ObjectNode fields) {
        ObjectNode line = obj().put("ev", ev);
        if (!fields.has("t")) line.put("t", now());
        line.setAll(fields);
        String text = line.toString();
        synchronized (OUT) {
            OUT.println(text);
            OUT.flush();
        }
    }

    static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static Properties props(JsonNode cmd) {
        Properties p = new Properties();
        p.put("bootstrap.servers", cmd.path("bootstrap").asText());
        cmd.path("props").properties().forEach(e -> p.put(e.getKey(), e.getValue().asText()));
        return p;
    }

    static final Comparator<TopicPartition> BY_TOPIC_PARTITION =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    static ArrayNode parts(Collection<TopicPartition> tps) {
        ArrayNode out = JSON.createArrayNode();
        tps.stream().sorted(BY_TOPIC_PARTITION).forEach(tp -> out.add(JSON.createArrayNode().add(tp.topic()).add(tp.partition())));
        return out;
    }

    static TopicPartition tp(JsonNode row) {
        return new TopicPartition(row.get(0).asText(), row.get(1).asInt());
    }

    // -- produce -----------------------------------------------------------------------------------------

    /** The records of support.compat.make_records(tag, n): keys cycle over 97, values are unique. */
    static void produce(JsonNode cmd) throws Exception {
        Properties p = props(cmd);
        p.put("acks", cmd.path("acks").asText("all"));
        p.put("enable.idempotence", String.valueOf(cmd.path("idempotent").asBoolean(true)));
        p.put("compression.type", cmd.path("codec").asText("none"));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        String topic = cmd.path("topic").asText();
        String tag = cmd.path("tag").asText(cmd.path("codec").asText("none"));
        int count = cmd.path("count").asInt();
        AtomicInteger errors = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                final int index = i;
                String key = String.format("key-%03d", i % 97);
                String value = String.format("%s|%07d|%s", tag, i, "x".repeat(i % 41));
                producer.send(new ProducerRecord<>(topic, key.getBytes(StandardCharsets.UTF_8),
                        value.getBytes(StandardCharsets.UTF_8)), (md, err) -> {
                    if (err != null) {
                        errors.incrementAndGet();
                        emit("ack_error", obj().put("i", index).put("error", err.getClass().getSimpleName())
                                .put("message", err.getMessage()));
                    } else {
                        emit("ack", obj().put("i", index).put("partition", md.partition()).put("offset", md.offset())
                                .put("key", key).put("value", value));
                    }
                });
            }
            producer.flush();
        }
        emit("produced", obj().put("count", count).put("errors", errors.get()));
    }

    // -- read a topic (assign mode) ----------------------------------------------------------------------

    /** Every partition of a topic from offset 0 until ``count`` records or ``timeout_s``: a "record" each. */
    static void read(JsonNode cmd) {
        Properties p = props(cmd);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        String topic = cmd.path("topic").asText();
        int count = cmd.path("count").asInt();
        int read = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = consumer.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                    .map(pi -> new TopicPartition(topic, pi.partition())).toList();
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(cmd.path("timeout_s").asLong(60));
            while (read < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    emit("record", obj().put("partition", r.partition()).put("offset", r.offset())
                            .put("key", text(r.key())).put("value", text(r.value())));
                    read++;
                }
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {  // must add nothing
                emit("record", obj().put("partition", r.partition()).put("offset", r.offset())
                        .put("key", text(r.key())).put("value", text(r.value())));
                read++;
            }
        }
        emit("read", obj().put("count", read));
    }

    // -- consume as a group member -----------------------------------------------------------------------

    static void consume(JsonNode cfg) throws Exception {
        Properties p = props(cfg);
        p.put("group.id", cfg.path("group").asText());
        p.put("client.id", cfg.path("name").asText("member"));
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("max.poll.records", cfg.path("max_records").asText("50"));
        p.put("max.poll.interval.ms", cfg.path("max_poll_interval_ms").asText("60000"));
        p.put("metadata.max.age.ms", "2000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (cfg.path("protocol").asText("classic").equals("consumer")) {
            p.put("group.protocol", "consumer");  // KIP-848: the broker assigns and sets the session times
            p.put("group.remote.assignor", cfg.path("strategy").asText("uniform"));
        } else {
            p.put("group.protocol", "classic");
            String strategy = switch (cfg.path("strategy").asText("range")) {
                case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
                case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
                case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                default -> throw new IllegalArgumentException("strategy " + cfg.path("strategy"));
            };
            p.put("partition.assignment.strategy", strategy);
            p.put("session.timeout.ms", cfg.path("session_timeout_ms").asText("6000"));
            p.put("heartbeat.interval.ms", cfg.path("heartbeat_ms").asText("500"));
        }
        if (cfg.hasNonNull("instance_id")) p.put("group.instance.id", cfg.get("instance_id").asText());
        cfg.path("props").properties().forEach(e -> p.put(e.getKey(), e.getValue().asText()));

        Set<TopicPartition> owned = new HashSet<>();
        Map<TopicPartition, Long> pending = new HashMap<>();
        long delayMs = Math.round(cfg.path("batch_delay_s").asDouble(0) * 1000);
        boolean commitBatches = cfg.path("commit").asText("batch").equals("batch");
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        active = consumer;
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            void changed(String why, Collection<TopicPartition> tps, boolean add) {
                emit(why, obj().set("parts", parts(tps)));
                if (add) owned.addAll(tps); else owned.removeAll(tps);
                pending.keySet().retainAll(owned);  // not ours any more: its next owner resumes from the last commit
                emit("owned", (ObjectNode) obj().put("why", why.equals("assigned") ? "assign" : why.equals("lost") ? "lost" : "revoke")
                        .set("parts", parts(owned)));
            }
            @Override public void onPartitionsRevoked(Collection<TopicPartition> tps) { changed("revoked", tps, false); }
            @Override public void onPartitionsAssigned(Collection<TopicPartition> tps) { changed("assigned", tps, true); }
            @Override public void onPartitionsLost(Collection<TopicPartition> tps) { changed("lost", tps, false); }
        };
        if (cfg.hasNonNull("pattern")) {
            String regex = cfg.get("pattern").asText();
            if (cfg.path("regex").asText("client").equals("broker")) consumer.subscribe(new SubscriptionPattern(regex), listener);
            else consumer.subscribe(Pattern.compile(regex), listener);
        } else {
            List<String> topics = new ArrayList<>();
            cfg.path("topics").forEach(t -> topics.add(t.asText()));
            consumer.subscribe(topics, listener);
        }
        boolean fatal = false;
        try {
            while (!STOPPING.get()) {
                String control = INPUT.poll();
                if (control != null && (control.equals("close") || control.equals(EOF) || control.contains("\"close\""))) break;
                if (control != null && control.equals("commit")) commit(consumer, pending);
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (FencedInstanceIdException e) {
                    emit("error", obj().put("err", "FENCED_INSTANCE_ID").put("msg", e.getMessage()).put("fatal", true));
                    fatal = true;
                    break;
                }
                if (records.isEmpty()) continue;
                ArrayNode recs = JSON.createArrayNode();
                ArrayNode values = JSON.createArrayNode();
                boolean withValues = cfg.path("values").asBoolean(false);
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    recs.add(JSON.createArrayNode().add(r.topic()).add(r.partition()).add(r.offset()));
                    if (withValues) values.add(JSON.createArrayNode().add(text(r.key())).add(text(r.value())));
                    pending.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                }
                ObjectNode ev = (ObjectNode) obj().set("recs", recs);
                emit("recs", withValues ? (ObjectNode) ev.set("values", values) : ev);
                if (delayMs > 0) Thread.sleep(delayMs);  // simulated processing time, so rebalances happen mid-stream
                if (commitBatches && !commit(consumer, pending)) {
                    fatal = true;
                    break;
                }
            }
        } catch (WakeupException e) {
            // SIGTERM woke the poll: close below
        } finally {
            if (fatal) emit("fatal", obj().put("err", "FENCED_INSTANCE_ID"));
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(20)));
            active = null;
            emit("closed", obj());
            CLOSED.countDown();
        }
    }

    /** Commit what was processed and not committed yet; false after a fatal error (a fenced static member). */
    static boolean commit(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> pending) {
        if (pending.isEmpty()) return true;
        Map<TopicPartition, Long> offsets = new HashMap<>(pending);
        Map<TopicPartition, OffsetAndMetadata> request = new HashMap<>();
        ArrayNode rows = JSON.createArrayNode();
        offsets.keySet().stream().sorted(BY_TOPIC_PARTITION).forEach(tp -> {
            rows.add(JSON.createArrayNode().add(tp.topic()).add(tp.partition()).add(offsets.get(tp)));
            request.put(tp, new OffsetAndMetadata(offsets.get(tp)));
        });
        double sent = now();
        emit("committing", (ObjectNode) obj().put("t", sent).set("offsets", rows));
        try {
            consumer.commitSync(request, Duration.ofSeconds(30));
        } catch (WakeupException e) {
            throw e;
        } catch (RuntimeException e) {
            emit("commit", (ObjectNode) obj().put("sent", sent).put("ok", false).put("err", e.getClass().getSimpleName())
                    .set("offsets", rows));
            if (e instanceof FencedInstanceIdException) {
                emit("error", obj().put("err", "FENCED_INSTANCE_ID").put("msg", e.getMessage()).put("fatal", true));
                return false;
            }
            return true;
        }
        emit("commit", (ObjectNode) obj().put("sent", sent).put("ok", true).putNull("err").set("offsets", rows));
        offsets.forEach((tp, o) -> pending.remove(tp, o));
        return true;
    }

    // -- Admin -------------------------------------------------------------------------------------------

    static void admin(JsonNode cmd) throws Exception {
        Admin admin = ADMINS.computeIfAbsent(cmd.path("bootstrap").asText(), bs -> Admin.create(props(cmd)));
        String op = cmd.path("op").asText();
        String group = cmd.path("group").asText();
        String topic = cmd.path("topic").asText();
        ObjectNode result = obj();
        switch (op) {
            case "create_topic" -> {
                Map<String, String> configs = new HashMap<>();
                cmd.path("configs").properties().forEach(e -> configs.put(e.getKey(), e.getValue().asText()));
                admin.createTopics(List.of(new NewTopic(topic, cmd.path("partitions").asInt(), (short) cmd.path("replication").asInt(1))
                        .configs(configs))).all().get();
            }
            case "list_groups" -> {
                for (GroupListing g : admin.listGroups().all().get()) {
                    result.set(g.groupId(), obj().put("type", g.type().map(Object::toString).orElse(null))
                            .put("protocol", g.protocol()).put("state", g.groupState().map(Object::toString).orElse(null)));
                }
            }
            case "describe_groups" -> {
                List<String> groups = new ArrayList<>();
                cmd.path("groups").forEach(g -> groups.add(g.asText()));
                Map<String, KafkaFuture<ConsumerGroupDescription>> described = admin.describeConsumerGroups(groups).describedGroups();
                for (String g : groups) {
                    try {
                        result.set(g, describe(described.get(g).get()));
                    } catch (ExecutionException e) {
                        result.set(g, error(e));
                    }
                }
            }
            case "list_offsets" -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                ArrayNode rows = JSON.createArrayNode();
                offsets.forEach((tp, om) -> rows.add(JSON.createArrayNode().add(tp.topic()).add(tp.partition())
                        .add(om == null ? null : om.offset()).add(om == null ? null : om.metadata())));
                result.set("offsets", rows);
            }
            case "alter_offsets" -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                cmd.path("offsets").forEach(r -> offsets.put(tp(r), new OffsetAndMetadata(r.get(2).asLong())));
                AlterConsumerGroupOffsetsResult r = admin.alterConsumerGroupOffsets(group, offsets);
                for (TopicPartition tp : offsets.keySet()) result.set(tp.toString(), outcome(r.partitionResult(tp)));
            }
            case "delete_offsets" -> {
                Set<TopicPartition> tps = new HashSet<>();
                cmd.path("partitions").forEach(r -> tps.add(tp(r)));
                DeleteConsumerGroupOffsetsResult r = admin.deleteConsumerGroupOffsets(group, tps);
                for (TopicPartition tp : tps) result.set(tp.toString(), outcome(r.partitionResult(tp)));
                result.set("all", outcome(r.all()));
            }
            case "delete_groups" -> {
                List<String> groups = new ArrayList<>();
                cmd.path("groups").forEach(g -> groups.add(g.asText()));
                DeleteConsumerGroupsResult r = admin.deleteConsumerGroups(groups);
                r.deletedGroups().forEach((g, f) -> result.set(g, outcome(f)));
            }
            case "create_partitions" -> result.set(topic, outcome(
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(cmd.path("total").asInt()))).all()));
            case "delete_records" -> {
                Map<TopicPartition, RecordsToDelete> request = new HashMap<>();
                cmd.path("before").properties().forEach(e -> request.put(
                        new TopicPartition(topic, Integer.parseInt(e.getKey())), RecordsToDelete.beforeOffset(e.getValue().asLong())));
                DeleteRecordsResult r = admin.deleteRecords(request);
                r.lowWatermarks().forEach((tp, f) -> {
                    try {
                        result.put(String.valueOf(tp.partition()), f.get().lowWatermark());
                    } catch (Exception e) {
                        result.set(String.valueOf(tp.partition()), error(e));
                    }
                });
            }
            case "list_topic_offsets" -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                for (String spec : List.of("earliest", "latest")) {
                    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
                    d.partitions().forEach(pi -> request.put(new TopicPartition(topic, pi.partition()),
                            spec.equals("earliest") ? OffsetSpec.earliest() : OffsetSpec.latest()));
                    ListOffsetsResult r = admin.listOffsets(request);
                    ObjectNode byPartition = obj();
                    for (TopicPartition tp : request.keySet()) byPartition.put(String.valueOf(tp.partition()), r.partitionResult(tp).get().offset());
                    result.set(spec, byPartition);
                }
            }
            case "describe_topic" -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                result.put("partitions", d.partitions().size()).put("internal", d.isInternal());
            }
            case "incremental_alter_configs" -> {
                List<AlterConfigOp> ops = new ArrayList<>();
                cmd.path("ops").forEach(r -> ops.add(new AlterConfigOp(new ConfigEntry(r.get(1).asText(), r.get(2).asText(null)),
                        AlterConfigOp.OpType.valueOf(r.get(0).asText()))));
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                result.set(topic, outcome(admin.incrementalAlterConfigs(Map.of(res, ops)).all()));
            }
            case "describe_configs" -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
                Set<String> keys = new HashSet<>();
                cmd.path("keys").forEach(k -> keys.add(k.asText()));
                for (ConfigEntry e : config.entries()) {
                    if (keys.isEmpty() || keys.contains(e.name())) {
                        result.set(e.name(), obj().put("value", e.value()).put("source", e.source().toString()));
                    }
                }
            }
            default -> throw new IllegalArgumentException("unknown admin op " + op);
        }
        emit("admin", (ObjectNode) obj().put("op", op).set("result", result));
    }

    static ObjectNode describe(ConsumerGroupDescription d) {
        ObjectNode g = obj().put("state", d.groupState().toString()).put("type", d.type().toString())
                .put("simple", d.isSimpleConsumerGroup()).put("assignor", d.partitionAssignor())
                .put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        d.groupEpoch().ifPresent(e -> g.put("group_epoch", e));
        d.targetAssignmentEpoch().ifPresent(e -> g.put("target_assignment_epoch", e));
        ArrayNode members = g.putArray("members");
        for (MemberDescription m : d.members()) {
            ObjectNode mm = members.addObject().put("member_id", m.consumerId()).put("instance_id", m.groupInstanceId().orElse(null))
                    .put("client_id", m.clientId()).put("host", m.host());
            mm.set("assignment", parts(m.assignment().topicPartitions()));
            m.targetAssignment().ifPresent(a -> mm.set("target_assignment", parts(a.topicPartitions())));
            m.memberEpoch().ifPresent(e -> mm.put("member_epoch", e));
            m.upgraded().ifPresent(u -> mm.put("upgraded", u));
        }
        return g;
    }

    static ObjectNode outcome(KafkaFuture<?> f) {
        try {
            f.get();
            return obj().putNull("error");
        } catch (Exception e) {
            return error(e);
        }
    }

    static ObjectNode error(Exception e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return obj().put("error", cause.getClass().getSimpleName()).put("message", cause.getMessage());
    }

    // -- Kafka's tools, in this JVM ----------------------------------------------------------------------

    /**
     * A tool's main class with its output captured. Kafka's tools end through Exit, and some call it inside a
     * catch-all, so the exit cannot unwind: the tool runs on its own thread, its exit is recorded and that
     * thread parked for good (a daemon, one per run); the shutdown hooks it registered run then, as at exit.
     */
    static void tool(JsonNode cmd) throws Exception {
        List<String> args = new ArrayList<>();
        cmd.path("args").forEach(a -> args.add(a.asText()));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        InputStream savedIn = System.in;
        CompletableFuture<Integer> exited = new CompletableFuture<>();
        Exit.Procedure onExit = (status, message) -> {
            exited.complete(status);
            while (true) LockSupport.park();
        };
        Exit.setExitProcedure(onExit);
        Exit.setHaltProcedure(onExit);
        // What a tool registers to run at JVM exit (ConsoleProducer closes its producer so) runs at its exit.
        List<Thread> hooks = new ArrayList<>();
        Exit.setShutdownHookAdder((name, hook) -> hooks.add(new Thread(hook, name)));
        int code;
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(cmd.path("stdin").asText("").getBytes(StandardCharsets.UTF_8)));
            Method main = Class.forName(cmd.path("main").asText()).getMethod("main", String[].class);
            Thread runner = new Thread(() -> {
                try {
                    main.invoke(null, (Object) args.toArray(new String[0]));
                    exited.complete(0);
                } catch (InvocationTargetException e) {
                    e.getCause().printStackTrace(System.err);
                    exited.complete(-1);
                } catch (ReflectiveOperationException e) {
                    e.printStackTrace(System.err);
                    exited.complete(-1);
                }
            }, "tool");
            runner.setDaemon(true);
            runner.start();
            try {
                code = exited.get(cmd.path("timeout_s").asLong(100), TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                code = -2;  // still running: where every thread is, for the report
                Thread.getAllStackTraces().forEach((t, frames) -> {
                    System.err.println("\"" + t.getName() + "\" " + t.getState());
                    for (StackTraceElement f : frames) System.err.println("    at " + f);
                });
            }
        } finally {
            for (Thread hook : hooks) hook.start();
            for (Thread hook : hooks) hook.join(30_000);
            System.out.flush();
            System.err.flush();
            System.setOut(savedOut);
            System.setErr(savedErr);
            System.setIn(savedIn);
            Exit.resetExitProcedure();
            Exit.resetHaltProcedure();
            Exit.resetShutdownHookAdder();
        }
        emit("tool", obj().put("main", cmd.path("main").asText()).put("code", code)
                .put("out", out.toString(StandardCharsets.UTF_8)).put("err", err.toString(StandardCharsets.UTF_8)));
    }
}
