/*
 * kafkalog server test client: drives Apache Kafka's own Java clients (the real kafka-clients jar) against a
 * running `kafkalog serve`, so the pytest suite checks the server with an unmodified client.
 *
 * This is kafkalog's own test code; it only *calls* kafka-clients' public API (Admin, KafkaProducer,
 * KafkaConsumer). It is compiled at test time by tests/server/java_clients.py.
 *
 * Commands (output: one JSON object per line on stdout):
 *   create <bootstrap> <topic> <partitions>            Admin.createTopics            -> {"created":topic}
 *   produce <bootstrap> <topic> <codecs> <count>       per codec of the comma-separated list, one KafkaProducer
 *                                                      (idempotent, acks=all) sends <count> records with keys
 *                                                      and headers -> {"codec","partition","offset"} per record
 *   consume <bootstrap> <topic> <expected>             KafkaConsumer, no group: assign(all partitions),
 *                                                      seekToBeginning, poll until <expected> records (60 s max)
 *                                                      -> {"partition","offset","key","value","headers":[[k,v]]}
 *   offsets <bootstrap> <topic>                        Admin.listOffsets earliest / latest / max timestamp
 *                                                      -> {"partition","earliest","latest","maxTimestampOffset"}
 *   delete-records <bootstrap> <topic> <partition> <offset>   Admin.deleteRecords -> {"lowWatermark":n}
 *   delete <bootstrap> <topic>                         Admin.deleteTopics -> {"deleted":topic}
 *   group-consume <bootstrap> <topic> <group> <expected> <isolation>
 *                                                      KafkaConsumer in <group> (classic protocol, subscribe),
 *                                                      isolation.level <isolation>; polls until <expected>
 *                                                      records (or 3 s without a new one once assigned),
 *                                                      commitSync -> one record line per record (as consume)
 *                                                      and {"committed":{partition:offset}} (committed())
 *   txn-produce <bootstrap> <topic> <transactionalId> <count>
 *                                                      transactional KafkaProducer: initTransactions; one
 *                                                      transaction of <count> values "c<i>" committed, one of
 *                                                      "a<i>" aborted -> {"committed":n,"aborted":n}
 *   txn-copy <bootstrap> <source> <target> <group> <transactionalId> <expected>
 *                                                      consume-transform-produce: a read_committed consumer in
 *                                                      <group> reads <expected> records of <source>, a
 *                                                      transactional producer writes them to <target> and
 *                                                      sendOffsetsToTransaction, commit -> {"copied":n}
 * Keys and values are UTF-8 text here: key "k<i>", value "<compression>-<i>", header "h" = "x<i>".
 */

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

public final class ServerClients {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ServerClients() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: ServerClients <command> <bootstrap> <topic> ...");
            System.exit(64);
        }
        String bootstrap = args[1];
        String topic = args[2];
        switch (args[0]) {
            case "create": create(bootstrap, topic, Integer.parseInt(args[3])); break;
            case "produce": produce(bootstrap, topic, args[3], Integer.parseInt(args[4])); break;
            case "consume": consume(bootstrap, topic, Integer.parseInt(args[3])); break;
            case "offsets": offsets(bootstrap, topic); break;
            case "delete-records":
                deleteRecords(bootstrap, topic, Integer.parseInt(args[3]), Long.parseLong(args[4])); break;
            case "delete": delete(bootstrap, topic); break;
            case "group-consume":
                groupConsume(bootstrap, topic, args[3], Integer.parseInt(args[4]), args[5]); break;
            case "txn-produce": txnProduce(bootstrap, topic, args[3], Integer.parseInt(args[4])); break;
            case "txn-copy":
                txnCopy(bootstrap, topic, args[3], args[4], args[5], Integer.parseInt(args[6])); break;
            default:
                System.err.println("unknown command " + args[0]);
                System.exit(64);
        }
        System.out.flush();
    }

    private static void emit(Map<String, Object> obj) throws Exception {
        System.out.println(JSON.writeValueAsString(obj));
    }

    private static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return Admin.create(p);
    }

    private static void create(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1))).all().get();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("created", topic);
            emit(out);
        }
    }

    private static void delete(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.deleteTopics(Collections.singleton(topic)).all().get();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("deleted", topic);
            emit(out);
        }
    }

    private static void produce(String bootstrap, String topic, String codecs, int count) throws Exception {
        for (String codec : codecs.split(",")) {
            produceOne(bootstrap, topic, codec, count);
        }
    }

    private static void produceOne(String bootstrap, String topic, String compression, int count) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                List<Header> headers = new ArrayList<>();
                headers.add(new RecordHeader("h", ("x" + i).getBytes(StandardCharsets.UTF_8)));
                sent.add(producer.send(new ProducerRecord<>(topic, null, null,
                    ("k" + i).getBytes(StandardCharsets.UTF_8),
                    (compression + "-" + i).getBytes(StandardCharsets.UTF_8), headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get();
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("codec", compression);
                out.put("partition", md.partition());
                out.put("offset", md.offset());
                emit(out);
            }
        }
    }

    private static void consume(String bootstrap, String topic, int expected) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("partition", r.partition());
                    out.put("offset", r.offset());
                    out.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
                    out.put("value", r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
                    List<List<String>> headers = new ArrayList<>();
                    for (Header h : r.headers()) {
                        List<String> pair = new ArrayList<>();
                        pair.add(h.key());
                        pair.add(h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
                        headers.add(pair);
                    }
                    out.put("headers", headers);
                    emit(out);
                    seen++;
                }
            }
        }
    }

    private static void offsets(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            int partitions = admin.describeTopics(Collections.singleton(topic)).allTopicNames().get()
                .get(topic).partitions().size();
            Map<String, OffsetSpec> kinds = new LinkedHashMap<>();
            kinds.put("earliest", OffsetSpec.earliest());
            kinds.put("latest", OffsetSpec.latest());
            kinds.put("maxTimestampOffset", OffsetSpec.maxTimestamp());
            Map<Integer, Map<String, Object>> rows = new LinkedHashMap<>();
            for (Map.Entry<String, OffsetSpec> kind : kinds.entrySet()) {
                Map<TopicPartition, OffsetSpec> request = new HashMap<>();
                for (int i = 0; i < partitions; i++) {
                    request.put(new TopicPartition(topic, i), kind.getValue());
                }
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result =
                    admin.listOffsets(request).all().get();
                for (int i = 0; i < partitions; i++) {
                    rows.computeIfAbsent(i, k -> {
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("partition", k);
                        return row;
                    }).put(kind.getKey(), result.get(new TopicPartition(topic, i)).offset());
                }
            }
            for (Map<String, Object> row : rows.values()) {
                emit(row);
            }
        }
    }

    private static void deleteRecords(String bootstrap, String topic, int partition, long offset) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            long low = admin.deleteRecords(Collections.singletonMap(tp, RecordsToDelete.beforeOffset(offset)))
                .lowWatermarks().get(tp).get().lowWatermark();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("lowWatermark", low);
            emit(out);
        }
    }

    private static Map<String, Object> recordJson(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("partition", r.partition());
        out.put("offset", r.offset());
        out.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
        out.put("value", r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
        return out;
    }

    private static KafkaConsumer<byte[], byte[]> groupConsumer(String bootstrap, String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    private static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> consumer, int expected) {
        List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        long quietUntil = Long.MAX_VALUE;
        while (seen.size() < expected && System.currentTimeMillis() < deadline
               && System.currentTimeMillis() < quietUntil) {
            ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(200));
            for (ConsumerRecord<byte[], byte[]> r : got) {
                seen.add(r);
            }
            // once partitions are assigned, stop after 3 s without a new record
            if (!got.isEmpty() || (quietUntil == Long.MAX_VALUE && !consumer.assignment().isEmpty())) {
                quietUntil = System.currentTimeMillis() + 3_000;
            }
        }
        return seen;
    }

    private static void groupConsume(String bootstrap, String topic, String group, int expected, String isolation)
            throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = groupConsumer(bootstrap, group, isolation)) {
            consumer.subscribe(Collections.singleton(topic));
            for (ConsumerRecord<byte[], byte[]> r : pollUntil(consumer, expected)) {
                emit(recordJson(r));
            }
            consumer.commitSync();
            Map<String, Object> committed = new LinkedHashMap<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(consumer.assignment());
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                committed.put(String.valueOf(e.getKey().partition()), e.getValue() == null ? null : e.getValue().offset());
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("committed", committed);
            emit(out);
        }
    }

    private static KafkaProducer<byte[], byte[]> txnProducer(String bootstrap, String transactionalId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private static void txnProduce(String bootstrap, String topic, String transactionalId, int count) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = txnProducer(bootstrap, transactionalId)) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, ("c" + i).getBytes(StandardCharsets.UTF_8)));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, ("a" + i).getBytes(StandardCharsets.UTF_8)));
            }
            producer.flush();
            producer.abortTransaction();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("committed", count);
            out.put("aborted", count);
            emit(out);
        }
    }

    private static void txnCopy(String bootstrap, String source, String target, String group, String transactionalId,
                                int expected) throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = groupConsumer(bootstrap, group, "read_committed");
             KafkaProducer<byte[], byte[]> producer = txnProducer(bootstrap, transactionalId)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singleton(source));
            List<ConsumerRecord<byte[], byte[]>> records = pollUntil(consumer, expected);
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                producer.send(new ProducerRecord<>(target, r.key(), r.value()));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("copied", records.size());
            emit(out);
        }
    }
}
