/*
 * kafkalog interop harness: drives Apache Kafka's own record code (the real kafka-clients jar) so the pytest
 * suite can check that kafkalog is byte-compatible with Kafka's on-disk log format.
 *
 * This is kafkalog's own test code; it only *calls* kafka-clients' public classes (MemoryRecordsBuilder,
 * MemoryRecords, FileRecords, DefaultRecordBatch, ControlRecordType, EndTransactionMarker, Utils).
 * It is compiled at test time by tests/interop/kafka_java.py.
 *
 * Commands (one per JVM call, or many through "batch"):
 *   write <spec.json> <out.log>        build batches with MemoryRecordsBuilder and append them with FileRecords
 *   dump <file.log> [--deep]           JSON Lines description of a segment, read with FileRecords.batches()
 *   validate <file.log>                ensureValid() on every batch
 *   murmur2 <keys.txt>                 Utils.toPositive(Utils.murmur2(key)) for each base64 key line
 *   rlmm-partition <lines.txt>         RemoteLogMetadataTopicPartitioner's partition for each "msb lsb partition n" line
 *   rlmm-encode <values.json>          __remote_log_metadata values from their generic JSON form (one base64 per line)
 *   rlmm-decode <values.txt>           the generic JSON form of each base64 value line, or {"error":...}
 *   bench-append <out.log> <batchBytes> <totalBytes> [--validate]
 *   bench-iterate <file.log>
 *   version                            kafka-clients version and commit id
 *   batch                              read {"args":[...]} lines on stdin, answer {"exit":N,"stdout":"...","stderr":"..."}
 *
 * write spec: {"batches":[batch,...]}; unknown fields are rejected. Batch fields (defaults in brackets):
 *   magic [2], compression none|gzip|snappy|lz4|zstd [none], compressionLevel [codec default], baseOffset [0],
 *   partitionLeaderEpoch [-1], timestampType CreateTime|LogAppendTime|NoTimestampType [CreateTime; v0: NoTimestampType],
 *   logAppendTime (required with LogAppendTime), producerId [-1], producerEpoch [-1], baseSequence [-1],
 *   isTransactional [false; true for control batches], deleteHorizonMs (v2), lastOffset (v2: overrideLastOffset, as the
 *   cleaner does), and either
 *   records: [{offset (absolute, optional: appendWithOffset), timestamp [-1], key b64|null, value b64|null,
 *              headers [{key str, value b64|null}]}]   -- an EMPTY list writes a bare v2 header with recordsCount 0
 *              (DefaultRecordBatch.writeEmptyHeader; then lastOffset, maxTimestamp and isControlBatch apply), or
 *   control: {type COMMIT|ABORT, coordinatorEpoch, timestamp}   -- end-transaction marker via appendEndTxnMarker.
 *
 * Output JSON is produced by a small writer (Json below) that reproduces Python's
 * json.dumps(obj, separators=(",", ":")) byte for byte (ensure_ascii escaping with lower-case hex, DEL escaped),
 * which Jackson's generator does not do (upper-case hex, no escaping of DEL / non-ASCII by default).
 * Jackson (jackson-databind) is used to parse the JSON input.
 *
 * Exit codes: 0 ok, 1 unexpected failure (stack trace on stderr), 2 corrupt data (dump/validate),
 * 3 truncated tail (dump), 64 usage error.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.DefaultRecordBatch;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.utils.ByteBufferOutputStream;
import org.apache.kafka.common.utils.ByteUtils;
import org.apache.kafka.common.utils.Utils;

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileNotFoundException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

public final class KafkaInterop {

    static final int EXIT_OK = 0;
    static final int EXIT_FAILURE = 1;
    static final int EXIT_CORRUPT = 2;
    static final int EXIT_TRUNCATED = 3;
    static final int EXIT_USAGE = 64;

    /** Offset of the baseTimestamp field in a v2 batch (DefaultRecordBatch.BASE_TIMESTAMP_OFFSET is package-private). */
    static final int V2_BASE_TIMESTAMP_OFFSET = 27;

    static final String USAGE = String.join("\n",
            "usage: KafkaInterop <command> [args]",
            "  write <spec.json> <out.log>",
            "  dump <file.log> [--deep]",
            "  validate <file.log>",
            "  murmur2 <keys.txt>",
            "  rlmm-partition <lines.txt>",
            "  rlmm-encode <values.json>",
            "  rlmm-decode <values.txt>",
            "  bench-append <out.log> <batchBytes> <totalBytes> [--validate]",
            "  bench-iterate <file.log>",
            "  version",
            "  batch");

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private KafkaInterop() {
    }

    /** Raised for malformed command lines; reported with exit code 64. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(
                new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, StandardCharsets.UTF_8);
        int code;
        if (args.length == 1 && args[0].equals("batch")) {
            code = batch(out);
        } else {
            code = run(args, out, System.err);
        }
        out.flush();
        System.exit(code);
    }

    /** Runs one command, writing its output to {@code out}; returns the exit code. Never throws. */
    static int run(String[] args, PrintStream out, PrintStream err) {
        try {
            if (args.length == 0) {
                throw new UsageException("missing command");
            }
            String command = args[0];
            switch (command) {
                case "write":
                    expectArgs(args, 3, 3);
                    return write(new File(args[1]), new File(args[2]), out);
                case "dump":
                    expectArgs(args, 2, 3);
                    boolean deep = false;
                    if (args.length == 3) {
                        if (!args[2].equals("--deep")) {
                            throw new UsageException("unknown dump option " + args[2]);
                        }
                        deep = true;
                    }
                    return dump(new File(args[1]), deep, out);
                case "validate":
                    expectArgs(args, 2, 2);
                    return validate(new File(args[1]), out);
                case "murmur2":
                    expectArgs(args, 2, 2);
                    return murmur2(new File(args[1]), out);
                case "rlmm-partition":
                    expectArgs(args, 2, 2);
                    return RemoteLogMetadata.partition(new File(args[1]), out);
                case "rlmm-encode":
                    expectArgs(args, 2, 2);
                    return RemoteLogMetadata.encode(new File(args[1]), out);
                case "rlmm-decode":
                    expectArgs(args, 2, 2);
                    return RemoteLogMetadata.decode(new File(args[1]), out);
                case "bench-append":
                    expectArgs(args, 4, 5);
                    if (args.length == 5 && !args[4].equals("--validate")) {
                        throw new UsageException("unknown bench-append option " + args[4]);
                    }
                    return benchAppend(new File(args[1]), parseInt(args[2]), parseLong(args[3]), args.length == 5, out);
                case "bench-iterate":
                    expectArgs(args, 2, 2);
                    return benchIterate(new File(args[1]), out);
                case "version":
                    expectArgs(args, 1, 1);
                    out.print(new Json().str("version", AppInfoParser.getVersion())
                            .str("commitId", AppInfoParser.getCommitId()).line());
                    return EXIT_OK;
                default:
                    throw new UsageException("unknown command " + command);
            }
        } catch (UsageException e) {
            err.println("error: " + e.getMessage());
            err.println(USAGE);
            return EXIT_USAGE;
        } catch (Exception e) {
            e.printStackTrace(err);
            return EXIT_FAILURE;
        } finally {
            out.flush();
            err.flush();
        }
    }

    private static void expectArgs(String[] args, int min, int max) throws UsageException {
        if (args.length < min || args.length > max) {
            throw new UsageException("wrong number of arguments for " + args[0] + ": " + Arrays.toString(args));
        }
    }

    private static int parseInt(String s) throws UsageException {
        long v = parseLong(s);
        if (v < 1 || v > Integer.MAX_VALUE) {
            throw new UsageException("expected a positive int, got " + s);
        }
        return (int) v;
    }

    private static long parseLong(String s) throws UsageException {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new UsageException("expected an integer, got " + s);
        }
    }

    // ------------------------------------------------------------------------------------------------ batch mode

    /**
     * Serves many commands from one JVM: each stdin line is {"args":["dump","/x.log","--deep"]}; each answer is one
     * stdout line {"exit":N,"stdout":"...","stderr":"..."} flushed immediately. Ends at EOF on stdin.
     */
    static int batch(PrintStream realOut) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
                ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
                PrintStream out = new PrintStream(outBytes, false, StandardCharsets.UTF_8);
                PrintStream err = new PrintStream(errBytes, false, StandardCharsets.UTF_8);
                int code;
                String[] args;
                try {
                    args = parseBatchRequest(line);
                } catch (IllegalArgumentException | IOException e) {
                    args = null;
                    err.println("error: bad batch request: " + e.getMessage());
                }
                if (args == null) {
                    code = EXIT_USAGE;
                } else if (args.length > 0 && args[0].equals("batch")) {
                    err.println("error: nested batch is not allowed");
                    code = EXIT_USAGE;
                } else {
                    code = run(args, out, err);
                }
                out.flush();
                err.flush();
                realOut.print(new Json().num("exit", code)
                        .str("stdout", outBytes.toString(StandardCharsets.UTF_8))
                        .str("stderr", errBytes.toString(StandardCharsets.UTF_8)).line());
                realOut.flush();
            }
            return EXIT_OK;
        } catch (IOException e) {
            e.printStackTrace();
            return EXIT_FAILURE;
        }
    }

    private static String[] parseBatchRequest(String line) throws IOException {
        JsonNode request = MAPPER.readTree(line);
        Spec.checkKeys(request, "batch request", "args");
        JsonNode args = request.get("args");
        if (args == null || !args.isArray()) {
            throw new IllegalArgumentException("'args' must be an array of strings");
        }
        String[] result = new String[args.size()];
        for (int i = 0; i < result.length; i++) {
            if (!args.get(i).isTextual()) {
                throw new IllegalArgumentException("'args' must be an array of strings");
            }
            result[i] = args.get(i).textValue();
        }
        return result;
    }

    // ------------------------------------------------------------------------------------------------ write

    /** Builds every batch of the spec with Kafka's MemoryRecordsBuilder and appends it with FileRecords.append. */
    static int write(File specFile, File outFile, PrintStream out) throws IOException {
        JsonNode root = MAPPER.readTree(specFile);
        Spec.checkKeys(root, "spec", "batches");
        JsonNode batches = root.get("batches");
        if (batches == null || !batches.isArray()) {
            throw new IllegalArgumentException("spec: 'batches' must be an array");
        }
        List<MemoryRecords> built = new ArrayList<>();
        for (int i = 0; i < batches.size(); i++) {
            try {
                built.add(buildBatch(batches.get(i)));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("batch #" + i + ": " + e.getMessage(), e);
            }
        }
        Files.deleteIfExists(outFile.toPath());
        int size;
        try (FileRecords file = FileRecords.open(outFile)) {
            for (MemoryRecords records : built) {
                file.append(records);
            }
            file.flush();
            size = file.sizeInBytes();
        }
        out.print(new Json().num("batches", built.size()).num("bytes", size).line());
        return EXIT_OK;
    }

    private static MemoryRecords buildBatch(JsonNode spec) {
        Spec.checkKeys(spec, "batch", "magic", "compression", "compressionLevel", "baseOffset", "partitionLeaderEpoch",
                "timestampType", "logAppendTime", "producerId", "producerEpoch", "baseSequence", "isTransactional",
                "deleteHorizonMs", "lastOffset", "maxTimestamp", "isControlBatch", "records", "control");
        byte magic = (byte) Spec.intField(spec, "magic", RecordBatch.MAGIC_VALUE_V2);
        if (magic < RecordBatch.MAGIC_VALUE_V0 || magic > RecordBatch.MAGIC_VALUE_V2) {
            throw new IllegalArgumentException("magic must be 0, 1 or 2");
        }
        Compression compression = compression(Spec.stringField(spec, "compression", "none"), spec.get("compressionLevel"));
        String tsName = Spec.stringField(spec, "timestampType",
                magic == RecordBatch.MAGIC_VALUE_V0 ? TimestampType.NO_TIMESTAMP_TYPE.name : TimestampType.CREATE_TIME.name);
        TimestampType timestampType = TimestampType.forName(tsName);
        long baseOffset = Spec.longField(spec, "baseOffset", 0L);
        int partitionLeaderEpoch = Spec.intField(spec, "partitionLeaderEpoch", RecordBatch.NO_PARTITION_LEADER_EPOCH);
        if (timestampType == TimestampType.LOG_APPEND_TIME && !spec.hasNonNull("logAppendTime")) {
            throw new IllegalArgumentException("timestampType LogAppendTime needs 'logAppendTime'");
        }
        long logAppendTime = Spec.longField(spec, "logAppendTime", RecordBatch.NO_TIMESTAMP);
        long producerId = Spec.longField(spec, "producerId", RecordBatch.NO_PRODUCER_ID);
        short producerEpoch = Spec.shortField(spec, "producerEpoch", RecordBatch.NO_PRODUCER_EPOCH);
        int baseSequence = Spec.intField(spec, "baseSequence", RecordBatch.NO_SEQUENCE);
        JsonNode control = spec.get("control");
        boolean isControl = control != null && !control.isNull();
        boolean isTransactional = Spec.boolField(spec, "isTransactional", isControl);
        long deleteHorizonMs = Spec.longField(spec, "deleteHorizonMs", RecordBatch.NO_TIMESTAMP);
        JsonNode records = spec.get("records");
        boolean hasRecords = records != null && !records.isNull();

        if (isControl) {
            if (hasRecords && records.size() > 0) {
                throw new IllegalArgumentException("a control batch takes 'control', not 'records'");
            }
            Spec.forbid(spec, "control batch", "lastOffset", "maxTimestamp", "isControlBatch");
        } else if (!hasRecords || !records.isArray()) {
            throw new IllegalArgumentException("a batch needs a 'records' array or a 'control' object");
        } else if (records.size() == 0) {
            return emptyBatch(spec, magic, compression, timestampType, baseOffset, partitionLeaderEpoch, producerId,
                    producerEpoch, baseSequence, isTransactional, deleteHorizonMs);
        } else {
            Spec.forbid(spec, "batch with records", "maxTimestamp", "isControlBatch");
        }

        ByteBufferOutputStream buffer = new ByteBufferOutputStream(1024);
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(buffer, magic, compression, timestampType, baseOffset,
                logAppendTime, producerId, producerEpoch, baseSequence, isTransactional, isControl, partitionLeaderEpoch,
                Integer.MAX_VALUE, deleteHorizonMs);
        if (isControl) {
            appendControl(builder, control);
        } else {
            for (JsonNode record : records) {
                appendRecord(builder, record);
            }
            if (spec.hasNonNull("lastOffset")) {
                if (magic < RecordBatch.MAGIC_VALUE_V2) {
                    throw new IllegalArgumentException("lastOffset override needs magic 2");
                }
                // What the log cleaner does to keep the producer's last sequence after removing records.
                builder.overrideLastOffset(Spec.longField(spec, "lastOffset", 0L));
            }
        }
        return builder.build();
    }

    /**
     * An empty v2 batch (recordsCount 0), as the log cleaner writes to retain producer state after removing every
     * record of a batch (DefaultRecordBatch.writeEmptyHeader). MemoryRecordsBuilder refuses to build these.
     */
    private static MemoryRecords emptyBatch(JsonNode spec, byte magic, Compression compression, TimestampType timestampType,
                                            long baseOffset, int partitionLeaderEpoch, long producerId, short producerEpoch,
                                            int baseSequence, boolean isTransactional, long deleteHorizonMs) {
        if (magic != RecordBatch.MAGIC_VALUE_V2) {
            throw new IllegalArgumentException("an empty batch needs magic 2");
        }
        if (compression.type() != CompressionType.NONE) {
            throw new IllegalArgumentException("an empty batch is always written uncompressed");
        }
        if (deleteHorizonMs != RecordBatch.NO_TIMESTAMP) {
            throw new IllegalArgumentException("DefaultRecordBatch.writeEmptyHeader cannot set deleteHorizonMs");
        }
        long lastOffset = Spec.longField(spec, "lastOffset", baseOffset);
        long maxTimestamp = Spec.longField(spec, "maxTimestamp", RecordBatch.NO_TIMESTAMP);
        boolean isControlBatch = Spec.boolField(spec, "isControlBatch", false);
        ByteBuffer buffer = ByteBuffer.allocate(DefaultRecordBatch.RECORD_BATCH_OVERHEAD);
        DefaultRecordBatch.writeEmptyHeader(buffer, magic, producerId, producerEpoch, baseSequence, baseOffset, lastOffset,
                partitionLeaderEpoch, timestampType, maxTimestamp, isTransactional, isControlBatch);
        buffer.flip();
        return MemoryRecords.readableRecords(buffer);
    }

    private static void appendControl(MemoryRecordsBuilder builder, JsonNode control) {
        Spec.checkKeys(control, "control", "type", "coordinatorEpoch", "timestamp");
        String typeName = Spec.stringField(control, "type", null);
        ControlRecordType type;
        if ("COMMIT".equals(typeName)) {
            type = ControlRecordType.COMMIT;
        } else if ("ABORT".equals(typeName)) {
            type = ControlRecordType.ABORT;
        } else {
            throw new IllegalArgumentException("control.type must be COMMIT or ABORT, got " + typeName);
        }
        if (!control.hasNonNull("coordinatorEpoch") || !control.hasNonNull("timestamp")) {
            throw new IllegalArgumentException("control needs 'coordinatorEpoch' and 'timestamp'");
        }
        int coordinatorEpoch = Spec.intField(control, "coordinatorEpoch", 0);
        long timestamp = Spec.longField(control, "timestamp", 0L);
        builder.appendEndTxnMarker(timestamp, new EndTransactionMarker(type, coordinatorEpoch));
    }

    private static void appendRecord(MemoryRecordsBuilder builder, JsonNode record) {
        Spec.checkKeys(record, "record", "offset", "timestamp", "key", "value", "headers");
        long timestamp = Spec.longField(record, "timestamp", RecordBatch.NO_TIMESTAMP);
        byte[] key = Spec.base64Field(record, "key");
        byte[] value = Spec.base64Field(record, "value");
        List<Header> headers = new ArrayList<>();
        JsonNode headersNode = record.get("headers");
        if (headersNode != null && !headersNode.isNull()) {
            if (!headersNode.isArray()) {
                throw new IllegalArgumentException("record.headers must be an array");
            }
            for (JsonNode header : headersNode) {
                Spec.checkKeys(header, "header", "key", "value");
                String headerKey = Spec.stringField(header, "key", null);
                if (headerKey == null) {
                    throw new IllegalArgumentException("header.key must be a string");
                }
                headers.add(new RecordHeader(headerKey, Spec.base64Field(header, "value")));
            }
        }
        Header[] headerArray = headers.toArray(Record.EMPTY_HEADERS);
        if (record.hasNonNull("offset")) {
            builder.appendWithOffset(Spec.longField(record, "offset", 0L), timestamp, key, value, headerArray);
        } else {
            builder.append(timestamp, key, value, headerArray);
        }
    }

    private static Compression compression(String name, JsonNode levelNode) {
        CompressionType type = CompressionType.forName(name);
        if (levelNode == null || levelNode.isNull()) {
            return Compression.of(type).build();
        }
        if (!levelNode.isIntegralNumber() || !levelNode.canConvertToInt()) {
            throw new IllegalArgumentException("compressionLevel must be an int");
        }
        int level = levelNode.intValue();
        switch (type) {
            case GZIP:
                return Compression.gzip().level(level).build();
            case LZ4:
                return Compression.lz4().level(level).build();
            case ZSTD:
                return Compression.zstd().level(level).build();
            default:
                throw new IllegalArgumentException("compression " + name + " takes no level");
        }
    }

    // ------------------------------------------------------------------------------------------------ dump

    /** A batch's JSON line and its record count. */
    static final class BatchLine {
        final String json;
        final long recordCount;

        BatchLine(String json, long recordCount) {
            this.json = json;
            this.recordCount = recordCount;
        }
    }

    /**
     * Dumps a segment file as JSON Lines using FileRecords.batches() (FileLogInputStream) for framing.
     *
     * <p>Per batch: isValid() is checked first. A valid batch gets its batch line, then (--deep) its record lines;
     * record lines are buffered and printed only if the whole batch iterates, otherwise the batch line is followed by
     * an invalid_records error. An invalid batch gets its batch line (isValid false) when every field can be read
     * (v2 batches of at least 61 bytes, uncompressed legacy entries) and then a corrupt_batch error. Any error stops
     * the dump. After the loop, bytes left behind by the iterator (it silently stops at a partial trailing batch, or
     * when 17 bytes or fewer remain) are reported as truncated.
     *
     * <p>The summary counts accepted batches only (valid and, with --deep, fully iterated); "records" is the number of
     * records iterated with --deep and the sum of the batches' recordCount otherwise (both agree on good data);
     * validBytes is the end of the last accepted batch.
     */
    static int dump(File file, boolean deep, PrintStream out) throws IOException {
        if (!file.isFile()) {
            throw new FileNotFoundException(file.toString());
        }
        long fileBytes = file.length();
        long acceptedBatches = 0;
        long records = 0;
        long validBytes = 0;
        int exit = EXIT_OK;
        try (FileRecords fileRecords = FileRecords.open(file, false)) {
            Iterator<FileChannelRecordBatch> batches = fileRecords.batches().iterator();
            while (true) {
                FileChannelRecordBatch batch;
                try {
                    if (!batches.hasNext()) {
                        break;
                    }
                    batch = batches.next();
                } catch (KafkaException e) {
                    out.print(errorLine("corrupt_frame", validBytes, e));
                    exit = EXIT_CORRUPT;
                    break;
                }
                int position = batch.position();
                boolean valid;
                try {
                    valid = batch.isValid();
                } catch (RuntimeException e) {
                    out.print(errorLine("corrupt_batch", position, e));
                    exit = EXIT_CORRUPT;
                    break;
                }
                BatchLine line;
                try {
                    line = batchLine(fileRecords, batch, valid);
                } catch (RuntimeException e) {
                    out.print(valid ? errorLine("invalid_records", position, e)
                            : errorLine("corrupt_batch", position, ensureValidMessage(batch)));
                    exit = EXIT_CORRUPT;
                    break;
                }
                out.print(line.json);
                if (!valid) {
                    out.print(errorLine("corrupt_batch", position, ensureValidMessage(batch)));
                    exit = EXIT_CORRUPT;
                    break;
                }
                if (deep) {
                    StringBuilder recordLines = new StringBuilder();
                    long iterated = 0;
                    try {
                        for (Record record : batch) {
                            recordLines.append(recordLine(batch, record));
                            iterated++;
                        }
                    } catch (RuntimeException e) {
                        out.print(errorLine("invalid_records", position, e));
                        exit = EXIT_CORRUPT;
                        break;
                    }
                    out.print(recordLines);
                    records += iterated;
                } else {
                    records += line.recordCount;
                }
                acceptedBatches++;
                validBytes = (long) position + batch.sizeInBytes();
            }
        }
        if (exit == EXIT_OK && validBytes < fileBytes) {
            out.print(errorLine("truncated", validBytes, (fileBytes - validBytes) + " trailing bytes at position "
                    + validBytes + " do not form a complete batch"));
            exit = EXIT_TRUNCATED;
        }
        out.print(new Json().str("type", "summary").num("batches", acceptedBatches).num("records", records)
                .num("validBytes", validBytes).num("fileBytes", fileBytes).line());
        return exit;
    }

    private static BatchLine batchLine(FileRecords fileRecords, FileChannelRecordBatch batch, boolean valid) {
        boolean v2 = batch.magic() >= RecordBatch.MAGIC_VALUE_V2;
        long recordCount;
        Long baseTimestamp = null;
        if (v2) {
            if (batch.sizeInBytes() < DefaultRecordBatch.RECORD_BATCH_OVERHEAD) {
                throw new IllegalStateException("batch is smaller than the v2 header");
            }
            recordCount = batch.countOrNull();
            baseTimestamp = readLong(fileRecords, batch.position() + V2_BASE_TIMESTAMP_OFFSET);
        } else if (valid) {
            // Legacy entries have no count field: a compressed wrapper holds as many records as it decompresses to.
            recordCount = 0;
            for (Record ignored : batch) {
                recordCount++;
            }
        } else if (!batch.isCompressed()) {
            recordCount = 1;
        } else {
            throw new IllegalStateException("corrupt compressed legacy wrapper");
        }
        OptionalLong deleteHorizon = batch.deleteHorizonMs();
        String json = new Json()
                .str("type", "batch")
                .num("position", batch.position())
                .num("baseOffset", batch.baseOffset())
                .num("lastOffset", batch.lastOffset())
                .num("magic", batch.magic())
                .num("crc", batch.checksum())
                .bool("isValid", valid)
                .str("compressionType", batch.compressionType().name)
                .str("timestampType", batch.timestampType().name)
                .numOrNull("baseTimestamp", baseTimestamp)
                .num("maxTimestamp", batch.maxTimestamp())
                .num("producerId", batch.producerId())
                .num("producerEpoch", batch.producerEpoch())
                .num("baseSequence", batch.baseSequence())
                .num("lastSequence", batch.lastSequence())
                .bool("isTransactional", batch.isTransactional())
                .bool("isControlBatch", batch.isControlBatch())
                .num("partitionLeaderEpoch", batch.partitionLeaderEpoch())
                .numOrNull("deleteHorizonMs", deleteHorizon.isPresent() ? deleteHorizon.getAsLong() : null)
                .num("recordCount", recordCount)
                .num("sizeInBytes", batch.sizeInBytes())
                .line();
        return new BatchLine(json, recordCount);
    }

    private static String recordLine(RecordBatch batch, Record record) {
        Json json = new Json()
                .str("type", "record")
                .num("offset", record.offset())
                .num("timestamp", record.timestamp())
                .num("sequence", record.sequence())
                .num("sizeInBytes", record.sizeInBytes())
                .str("key", base64(record.key()))
                .str("value", base64(record.value()))
                .raw("headers", headersJson(record.headers()));
        if (batch.isControlBatch()) {
            ControlRecordType type = ControlRecordType.parse(record.key());
            json.str("controlType", type.name());
            if (type == ControlRecordType.COMMIT || type == ControlRecordType.ABORT) {
                json.num("coordinatorEpoch", EndTransactionMarker.deserialize(record).coordinatorEpoch());
            }
        }
        return json.line();
    }

    private static String headersJson(Header[] headers) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < headers.length; i++) {
            if (i > 0) {
                sb.append(',');
            }
            byte[] value = headers[i].value();
            sb.append(new Json().str("key", headers[i].key())
                    .str("value", value == null ? null : Base64.getEncoder().encodeToString(value)));
        }
        return sb.append(']').toString();
    }

    private static String ensureValidMessage(RecordBatch batch) {
        try {
            batch.ensureValid();
            return "isValid() returned false but ensureValid() passed";
        } catch (RuntimeException e) {
            return message(e);
        }
    }

    private static long readLong(FileRecords fileRecords, long position) {
        ByteBuffer buffer = ByteBuffer.allocate(Long.BYTES);
        try {
            Utils.readFullyOrFail(fileRecords.channel(), buffer, position, "batch base timestamp");
        } catch (IOException e) {
            throw new KafkaException(e);
        }
        return buffer.getLong(0);
    }

    private static String errorLine(String kind, long position, Exception e) {
        return errorLine(kind, position, message(e));
    }

    private static String errorLine(String kind, long position, String message) {
        return new Json().str("type", "error").str("error", kind).num("position", position).str("message", message).line();
    }

    private static String message(Throwable e) {
        String message = e.getMessage();
        return message == null ? e.getClass().getName() : message;
    }

    private static String base64(ByteBuffer buffer) {
        if (buffer == null) {
            return null;
        }
        return Base64.getEncoder().encodeToString(Utils.toArray(buffer));
    }

    // ------------------------------------------------------------------------------------------------ validate

    /** Calls ensureValid() on every batch, as LogSegment recovery does; a partial trailing batch is not an error. */
    static int validate(File file, PrintStream out) throws IOException {
        if (!file.isFile()) {
            throw new FileNotFoundException(file.toString());
        }
        long batches = 0;
        long validBytes = 0;
        try (FileRecords fileRecords = FileRecords.open(file, false)) {
            Iterator<FileChannelRecordBatch> iterator = fileRecords.batches().iterator();
            while (true) {
                long position = validBytes;
                try {
                    if (!iterator.hasNext()) {
                        break;
                    }
                    FileChannelRecordBatch batch = iterator.next();
                    position = batch.position();
                    batch.ensureValid();
                    validBytes = position + batch.sizeInBytes();
                    batches++;
                } catch (KafkaException e) {
                    out.print(new Json().bool("valid", false).num("position", position).str("message", message(e))
                            .num("batches", batches).line());
                    return EXIT_CORRUPT;
                }
            }
        }
        out.print(new Json().bool("valid", true).num("batches", batches).num("validBytes", validBytes)
                .num("fileBytes", file.length()).line());
        return EXIT_OK;
    }

    // ------------------------------------------------------------------------------------------------ murmur2

    /** Each input line is a base64 key (an empty line is the empty key). Prints toPositive(murmur2(key)) per key. */
    static int murmur2(File keysFile, PrintStream out) throws IOException {
        StringBuilder sb = new StringBuilder();
        for (String line : Files.readAllLines(keysFile.toPath(), StandardCharsets.US_ASCII)) {
            byte[] key = Base64.getDecoder().decode(line.trim());
            sb.append(Utils.toPositive(Utils.murmur2(key))).append('\n');
        }
        out.print(sb);
        return EXIT_OK;
    }

    // ------------------------------------------------------------------------------------------ remote log metadata

    /**
     * The values of Kafka's __remote_log_metadata topic, with kafka-clients' own protocol types. The generated
     * RemoteLogSegmentMetadata*Record classes are in Kafka's storage module, which no reachable package ships, so
     * the four version-0 schemas of storage/src/main/resources/message/*.json are declared here with the types the
     * generator maps them to (string: COMPACT_STRING, bytes: COMPACT_NULLABLE_BYTES, []T: CompactArrayOf, and a
     * tagged-field section after every struct). Values travel as a generic JSON form: a struct is an array of
     * its field values in schema order, its tagged fields last as {"tag": base64}; a uuid is Kafka's string;
     * bytes are base64 or null. The partitioner follows RemoteLogMetadataTopicPartitioner (also in storage).
     */
    static final class RemoteLogMetadata {
        private static final Schema TOPIC_ID_PARTITION = new Schema(
                new Field("Name", Type.COMPACT_STRING), new Field("Id", Type.UUID),
                new Field("Partition", Type.INT32), Field.TaggedFieldsSection.of());
        private static final Schema SEGMENT_ID = new Schema(
                new Field("TopicIdPartition", TOPIC_ID_PARTITION), new Field("Id", Type.UUID),
                Field.TaggedFieldsSection.of());
        private static final Schema EPOCH = new Schema(
                new Field("LeaderEpoch", Type.INT32), new Field("Offset", Type.INT64), Field.TaggedFieldsSection.of());
        private static final Schema[] SCHEMAS = {
            new Schema(new Field("RemoteLogSegmentId", SEGMENT_ID), new Field("StartOffset", Type.INT64),
                    new Field("EndOffset", Type.INT64), new Field("BrokerId", Type.INT32),
                    new Field("MaxTimestampMs", Type.INT64), new Field("EventTimestampMs", Type.INT64),
                    new Field("SegmentLeaderEpochs", new CompactArrayOf(EPOCH)),
                    new Field("SegmentSizeInBytes", Type.INT32),
                    new Field("CustomMetadata", Type.COMPACT_NULLABLE_BYTES),
                    new Field("RemoteLogSegmentState", Type.INT8), Field.TaggedFieldsSection.of()),
            new Schema(new Field("RemoteLogSegmentId", SEGMENT_ID), new Field("BrokerId", Type.INT32),
                    new Field("EventTimestampMs", Type.INT64),
                    new Field("CustomMetadata", Type.COMPACT_NULLABLE_BYTES),
                    new Field("RemoteLogSegmentState", Type.INT8), Field.TaggedFieldsSection.of()),
            new Schema(new Field("TopicIdPartition", TOPIC_ID_PARTITION), new Field("BrokerId", Type.INT32),
                    new Field("EventTimestampMs", Type.INT64), new Field("RemotePartitionDeleteState", Type.INT8),
                    Field.TaggedFieldsSection.of()),
            new Schema(new Field("SegmentId", Type.UUID), new Field("StartOffset", Type.INT64),
                    new Field("EndOffset", Type.INT64), new Field("BrokerId", Type.INT32),
                    new Field("MaxTimestampMs", Type.INT64), new Field("EventTimestampMs", Type.INT64),
                    new Field("SegmentLeaderEpochs", new CompactArrayOf(EPOCH)),
                    new Field("SegmentSizeInBytes", Type.INT32),
                    new Field("CustomMetadata", Type.COMPACT_NULLABLE_BYTES),
                    new Field("RemoteLogSegmentState", Type.INT8), Field.TaggedFieldsSection.of()),
        };

        private RemoteLogMetadata() {
        }

        static int partition(File lines, PrintStream out) throws IOException {
            StringBuilder sb = new StringBuilder();
            for (String line : Files.readAllLines(lines.toPath(), StandardCharsets.US_ASCII)) {
                String[] f = line.trim().split(" ");
                Uuid topicId = new Uuid(Long.parseLong(f[0]), Long.parseLong(f[1]));
                int hash = Objects.hash(topicId.getLeastSignificantBits(), topicId.getMostSignificantBits(),
                        Integer.parseInt(f[2]));
                byte[] bytes = {(byte) (hash >> 24), (byte) (hash >> 16), (byte) (hash >> 8), (byte) hash};
                sb.append(Utils.toPositive(Utils.murmur2(bytes)) % Integer.parseInt(f[3])).append('\n');
            }
            out.print(sb);
            return EXIT_OK;
        }

        /** Input: a JSON array of {"apiKey", "version", "value"}; output: one base64 value per line. */
        static int encode(File values, PrintStream out) throws IOException {
            StringBuilder sb = new StringBuilder();
            for (JsonNode node : MAPPER.readTree(values)) {
                int apiKey = node.get("apiKey").asInt();
                Schema schema = SCHEMAS[apiKey];
                Struct struct = toStruct(schema, node.get("value"));
                ByteBuffer buf = ByteBuffer.allocate(10 + schema.sizeOf(struct));
                ByteUtils.writeUnsignedVarint(apiKey, buf);
                ByteUtils.writeUnsignedVarint(node.get("version").asInt(), buf);
                schema.write(buf, struct);
                buf.flip();
                byte[] raw = new byte[buf.remaining()];
                buf.get(raw);
                sb.append(Base64.getEncoder().encodeToString(raw)).append('\n');
            }
            out.print(sb);
            return EXIT_OK;
        }

        /** Input: base64 values, one per line; output: one JSON line each, the value or {"error": message}. */
        static int decode(File values, PrintStream out) throws IOException {
            StringBuilder sb = new StringBuilder();
            for (String line : Files.readAllLines(values.toPath(), StandardCharsets.US_ASCII)) {
                ByteBuffer buf = ByteBuffer.wrap(Base64.getDecoder().decode(line.trim()));
                try {
                    int apiKey = ByteUtils.readUnsignedVarint(buf);
                    int version = ByteUtils.readUnsignedVarint(buf);
                    if (apiKey < 0 || apiKey >= SCHEMAS.length || version != 0) {
                        throw new IllegalArgumentException("unsupported apiKey " + apiKey + " version " + version);
                    }
                    Object value = toJson(SCHEMAS[apiKey], SCHEMAS[apiKey].read(buf));
                    sb.append(MAPPER.writeValueAsString(Map.of("apiKey", apiKey, "remaining", buf.remaining(),
                            "value", value)));
                } catch (RuntimeException e) {
                    sb.append(MAPPER.writeValueAsString(Map.of("error", String.valueOf(e))));
                }
                sb.append('\n');
            }
            out.print(sb);
            return EXIT_OK;
        }

        private static Struct toStruct(Schema schema, JsonNode node) {
            Struct struct = new Struct(schema);
            BoundField[] fields = schema.fields();
            for (int i = 0; i < fields.length; i++) {
                Type type = fields[i].def.type;
                JsonNode v = node.get(i);
                Object value;
                if (type instanceof TaggedFields) {
                    value = new TreeMap<Integer, Object>();
                } else if (type instanceof Schema) {
                    value = toStruct((Schema) type, v);
                } else if (type instanceof CompactArrayOf) {
                    Schema element = (Schema) type.arrayElementType().get();
                    Object[] items = new Object[v.size()];
                    for (int j = 0; j < items.length; j++) {
                        items[j] = toStruct(element, v.get(j));
                    }
                    value = items;
                } else if (type == Type.UUID) {
                    value = Uuid.fromString(v.asText());
                } else if (type == Type.COMPACT_STRING) {
                    value = v.asText();
                } else if (type == Type.COMPACT_NULLABLE_BYTES) {
                    value = v.isNull() ? null : ByteBuffer.wrap(Base64.getDecoder().decode(v.asText()));
                } else if (type == Type.INT8) {
                    value = (byte) v.asInt();
                } else if (type == Type.INT32) {
                    value = v.asInt();
                } else {
                    value = v.asLong();
                }
                struct.set(fields[i], value);
            }
            return struct;
        }

        private static Object toJson(Schema schema, Struct struct) {
            List<Object> out = new ArrayList<>();
            for (BoundField field : schema.fields()) {
                Type type = field.def.type;
                Object v = struct.get(field);
                if (type instanceof TaggedFields) {
                    Map<String, String> tags = new TreeMap<>();
                    for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                        tags.put(String.valueOf(e.getKey()),
                                Base64.getEncoder().encodeToString(((RawTaggedField) e.getValue()).data()));
                    }
                    out.add(tags);
                } else if (type instanceof Schema) {
                    out.add(toJson((Schema) type, (Struct) v));
                } else if (type instanceof CompactArrayOf) {
                    Schema element = (Schema) type.arrayElementType().get();
                    List<Object> items = new ArrayList<>();
                    for (Object item : (Object[]) v) {
                        items.add(toJson(element, (Struct) item));
                    }
                    out.add(items);
                } else if (type == Type.UUID) {
                    out.add(v.toString());
                } else if (type == Type.COMPACT_NULLABLE_BYTES) {
                    out.add(v == null ? null : Base64.getEncoder().encodeToString(Utils.toArray((ByteBuffer) v)));
                } else {
                    out.add(v);
                }
            }
            return out;
        }
    }

    // ------------------------------------------------------------------------------------------------ benchmarks

    /**
     * Builds one uncompressed v2 batch of about batchBytes (100-byte values, no keys) and appends it with
     * FileRecords.append until totalBytes are written. "seconds" times the append loop, "secondsWithFlush" adds the
     * final flush (fsync).
     */
    /**
     * Times FileRecords.append of ~batchBytes batches until totalBytes. With validate, each append first runs this
     * harness's own loop, modelled on what Kafka's leader does to an uncompressed v2 batch (LogValidator's
     * assignOffsetsNonCompressed; LogValidator itself is in Kafka's storage module, not in kafka-clients, so it is
     * not what runs here), with kafka-clients' own classes: ensureValid (CRC), a walk over every record
     * (DefaultRecord.readFrom checks each record's framing) for the max timestamp, then the offsets, the partition
     * leader epoch and the max timestamp are set in place. Each append then gets its own copy of the batch, made
     * before the timed loop, as a batch received from the network would be (and as kafkalog's benchmark does).
     */
    static int benchAppend(File outFile, int batchBytes, long totalBytes, boolean validate, PrintStream out)
            throws IOException {
        Random random = new Random(42);
        byte[] value = new byte[100];
        ByteBufferOutputStream buffer = new ByteBufferOutputStream(batchBytes + 1024);
        MemoryRecordsBuilder builder = new MemoryRecordsBuilder(buffer, RecordBatch.MAGIC_VALUE_V2, Compression.NONE,
                TimestampType.CREATE_TIME, 0L, RecordBatch.NO_TIMESTAMP, RecordBatch.NO_PRODUCER_ID,
                RecordBatch.NO_PRODUCER_EPOCH, RecordBatch.NO_SEQUENCE, false, false,
                RecordBatch.NO_PARTITION_LEADER_EPOCH, batchBytes);
        long timestamp = 1_700_000_000_000L;
        int recordsPerBatch = 0;
        do {
            random.nextBytes(value);
            builder.append(timestamp + recordsPerBatch, null, value);
            recordsPerBatch++;
        } while (builder.hasRoomFor(timestamp, null, value, Record.EMPTY_HEADERS));
        MemoryRecords records = builder.build();

        Files.deleteIfExists(outFile.toPath());
        long written = 0;
        long appends = 0;
        double seconds;
        double secondsWithFlush;
        List<MemoryRecords> copies = new ArrayList<>();
        if (validate) {
            for (long bytes = 0; bytes < totalBytes; bytes += records.sizeInBytes()) {
                ByteBuffer copy = ByteBuffer.allocate(records.sizeInBytes());
                copy.put(records.buffer().duplicate());
                copy.flip();
                copies.add(MemoryRecords.readableRecords(copy));
            }
        }
        try (FileRecords file = FileRecords.open(outFile)) {
            long start = System.nanoTime();
            long nextOffset = 0;
            while (written < totalBytes) {
                MemoryRecords batchRecords = records;
                if (validate) {
                    batchRecords = copies.get((int) appends);
                    for (MutableRecordBatch batch : batchRecords.batches()) {
                        batch.ensureValid();
                        long maxTimestamp = RecordBatch.NO_TIMESTAMP;
                        long count = 0;
                        for (Record record : batch) {
                            if (record.timestamp() > maxTimestamp) {
                                maxTimestamp = record.timestamp();
                            }
                            count++;
                        }
                        nextOffset += count;
                        batch.setLastOffset(nextOffset - 1);
                        batch.setPartitionLeaderEpoch(0);
                        batch.setMaxTimestamp(TimestampType.CREATE_TIME, maxTimestamp);
                    }
                }
                written += file.append(batchRecords);
                appends++;
            }
            long appended = System.nanoTime();
            file.flush();
            long flushed = System.nanoTime();
            seconds = (appended - start) / 1e9;
            secondsWithFlush = (flushed - start) / 1e9;
        }
        out.print(new Json().dbl("seconds", seconds).dbl("secondsWithFlush", secondsWithFlush).num("bytes", written)
                .num("batches", appends).num("batchBytes", records.sizeInBytes())
                .num("recordsPerBatch", recordsPerBatch).line());
        return EXIT_OK;
    }

    /** Times a deep iteration of every record of a file, copying each key and value out of the batch. */
    static int benchIterate(File file, PrintStream out) throws IOException {
        if (!file.isFile()) {
            throw new FileNotFoundException(file.toString());
        }
        long records = 0;
        long payloadBytes = 0;
        long checksum = 0;
        double seconds;
        try (FileRecords fileRecords = FileRecords.open(file, false)) {
            long start = System.nanoTime();
            for (FileChannelRecordBatch batch : fileRecords.batches()) {
                for (Record record : batch) {
                    records++;
                    if (record.hasKey()) {
                        byte[] key = Utils.toArray(record.key());
                        payloadBytes += key.length;
                        checksum += key.length == 0 ? 0 : key[0];
                    }
                    if (record.hasValue()) {
                        byte[] value = Utils.toArray(record.value());
                        payloadBytes += value.length;
                        checksum += value.length == 0 ? 0 : value[value.length - 1];
                    }
                }
            }
            seconds = (System.nanoTime() - start) / 1e9;
        }
        out.print(new Json().dbl("seconds", seconds).num("records", records).num("bytes", file.length())
                .num("payloadBytes", payloadBytes).num("checksum", checksum).line());
        return EXIT_OK;
    }

    // ------------------------------------------------------------------------------------------------ JSON helpers

    /** Typed, strict accessors for the JSON input (unknown fields are rejected to catch typos in test specs). */
    static final class Spec {
        private Spec() {
        }

        static void checkKeys(JsonNode node, String what, String... allowed) {
            if (node == null || !node.isObject()) {
                throw new IllegalArgumentException(what + " must be a JSON object");
            }
            Set<String> known = new HashSet<>(Arrays.asList(allowed));
            Iterator<String> names = node.fieldNames();
            while (names.hasNext()) {
                String name = names.next();
                if (!known.contains(name)) {
                    throw new IllegalArgumentException(what + ": unknown field '" + name + "' (allowed: "
                            + String.join(", ", allowed) + ")");
                }
            }
        }

        static void forbid(JsonNode node, String what, String... fields) {
            for (String field : fields) {
                if (node.hasNonNull(field)) {
                    throw new IllegalArgumentException("'" + field + "' is not allowed for a " + what);
                }
            }
        }

        static long longField(JsonNode node, String name, long defaultValue) {
            JsonNode value = node.get(name);
            if (value == null || value.isNull()) {
                return defaultValue;
            }
            if (!value.isIntegralNumber() || !value.canConvertToLong()) {
                throw new IllegalArgumentException("'" + name + "' must be a 64-bit integer, got " + value);
            }
            return value.longValue();
        }

        static int intField(JsonNode node, String name, int defaultValue) {
            long value = longField(node, name, defaultValue);
            if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("'" + name + "' must be a 32-bit integer, got " + value);
            }
            return (int) value;
        }

        static short shortField(JsonNode node, String name, short defaultValue) {
            long value = longField(node, name, defaultValue);
            if (value < Short.MIN_VALUE || value > Short.MAX_VALUE) {
                throw new IllegalArgumentException("'" + name + "' must be a 16-bit integer, got " + value);
            }
            return (short) value;
        }

        static boolean boolField(JsonNode node, String name, boolean defaultValue) {
            JsonNode value = node.get(name);
            if (value == null || value.isNull()) {
                return defaultValue;
            }
            if (!value.isBoolean()) {
                throw new IllegalArgumentException("'" + name + "' must be a boolean, got " + value);
            }
            return value.booleanValue();
        }

        static String stringField(JsonNode node, String name, String defaultValue) {
            JsonNode value = node.get(name);
            if (value == null || value.isNull()) {
                return defaultValue;
            }
            if (!value.isTextual()) {
                throw new IllegalArgumentException("'" + name + "' must be a string, got " + value);
            }
            return value.textValue();
        }

        /** A base64 string (standard alphabet, padded) or null/absent for a null byte array. */
        static byte[] base64Field(JsonNode node, String name) {
            String text = stringField(node, name, null);
            return text == null ? null : Base64.getDecoder().decode(text);
        }
    }

    /**
     * Builds one JSON object with keys in insertion order, formatted exactly like Python's
     * {@code json.dumps(obj, separators=(",", ":"))}: no spaces; strings escaped as with ensure_ascii=True, i.e.
     * \" \\ \n \r \t \b \f, and every other char outside 0x20..0x7e as a lower-case \\uXXXX UTF-16 escape.
     */
    static final class Json {
        private static final char[] HEX = "0123456789abcdef".toCharArray();
        private final StringBuilder sb = new StringBuilder(160).append('{');
        private boolean first = true;

        private StringBuilder key(String key) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            quote(sb, key);
            return sb.append(':');
        }

        Json num(String key, long value) {
            key(key).append(value);
            return this;
        }

        Json numOrNull(String key, Long value) {
            key(key).append(value == null ? "null" : value.toString());
            return this;
        }

        /** A float the way Python's json.loads can read it (bench output only; not byte-compared). */
        Json dbl(String key, double value) {
            key(key).append(Double.isFinite(value) ? Double.toString(value) : "null");
            return this;
        }

        Json bool(String key, boolean value) {
            key(key).append(value);
            return this;
        }

        Json str(String key, String value) {
            StringBuilder b = key(key);
            if (value == null) {
                b.append("null");
            } else {
                quote(b, value);
            }
            return this;
        }

        /** A value that is already JSON text. */
        Json raw(String key, String json) {
            key(key).append(json);
            return this;
        }

        @Override
        public String toString() {
            return sb.toString() + "}";
        }

        /** The object followed by a newline. */
        String line() {
            return sb.toString() + "}\n";
        }

        static void quote(StringBuilder out, String s) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"':
                        out.append("\\\"");
                        break;
                    case '\\':
                        out.append("\\\\");
                        break;
                    case '\n':
                        out.append("\\n");
                        break;
                    case '\r':
                        out.append("\\r");
                        break;
                    case '\t':
                        out.append("\\t");
                        break;
                    case '\b':
                        out.append("\\b");
                        break;
                    case '\f':
                        out.append("\\f");
                        break;
                    default:
                        if (c >= 0x20 && c <= 0x7e) {
                            out.append(c);
                        } else {
                            out.append("\\u").append(HEX[(c >> 12) & 0xf]).append(HEX[(c >> 8) & 0xf])
                                    .append(HEX[(c >> 4) & 0xf]).append(HEX[c & 0xf]);
                        }
                }
            }
            out.append('"');
        }
    }
}
