"""An adversarial client against a running ``kafkalog serve``: a seeded, structured fuzzer of every API and
version the server advertises, plus byte-level mutations of valid frames (issue #19, Proof).

Requests are generated from Kafka's JSON schemas as kafka-python compiles them (every field the version has,
nested structs and arrays included) with hostile values: extreme integers, nulls, empty and huge strings,
unicode, duplicated and long arrays, unknown and internal topics, record batches that are valid, corrupt,
compressed, idempotent or transactional. About one request in five is a valid frame mutated byte by byte
(bit flips, truncation, junk, extreme lengths). While it runs it asserts:

* every structured request is answered with a response that decodes at its version (its correlation id),
  and a mutated frame is answered or closes only its own connection; the server process never exits;
* the server's RSS stays under its ceiling (baseline + ``RSS_HEADROOM_MIB``; one gzip bomb expanding past
  the 256 MiB decompression bound is sent mid-run) and its open descriptors under theirs (``FD_HEADROOM``
  plus 4 per partition directory: the fuzzer creates topics);
* a well-behaved client on its own connection keeps producing and fetching back what it produced;
* the server logs no handler error (a traceback); SIGTERM stops it with exit 0, and the data directory then
  opens cleanly (clean-shutdown marker, no partition failing to load) with nothing written beside it.

Seeded and bounded: ``KAFKALOG_FUZZ_SEED`` (random by default, printed in every failure),
``KAFKALOG_FUZZ_REQUESTS`` (3000) and ``KAFKALOG_FUZZ_SECONDS`` (40) stop it, whichever comes first; raise
them for a longer hunt. Partition, topic, group and resource arrays may be huge
(thousands of entries) and partition counts reach 2**31-1: the server's partition limits (``max.partitions``,
``max.partitions.per.request``, Fetch's fan-out bounds) answer them.
"""

from __future__ import annotations

import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest

from kafkalog.manager import LogManager
from kafkalog.records import Compression, MemoryRecords, SimpleRecord
from kafkalog.server.protocol import message_classes

from .helpers import RawClient
from .test_produce_fetch import fetch, offsets, produce

SEED = int(os.environ.get("KAFKALOG_FUZZ_SEED", random.SystemRandom().randrange(2**32)))
REQUESTS = int(os.environ.get("KAFKALOG_FUZZ_REQUESTS", "3000"))
SECONDS = float(os.environ.get("KAFKALOG_FUZZ_SECONDS", "40"))
#: The server may grow by this much over its RSS after start-up (a bomb holds the 256 MiB bound once).
RSS_HEADROOM_MIB = 400
#: ... and open this many more descriptors besides 4 per partition (the fuzzer's sockets, the I/O threads').
FD_HEADROOM = 100
#: A request unanswered for this long fails the run (every wait the server may take is configured short).
ANSWER_TIMEOUT_S = 20.0

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_TOPICS = ["t", "fz-a", "fz-b", "unknown-topic", "__consumer_offsets", "__transaction_state", "",
           ".", "..", "a" * 249, "a" * 250, "тема", "t/../x", "fz\x00", "fz-é", "FZ.c_d"]  # fmt: skip
_GROUPS = ["g", "g2", "", "é✓", "x" * 300, "__consumer_offsets"]
_TXN_IDS = [None, "tx", "tx2", "", "é"]
_CONFIG_NAMES = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes", "unknown.config",
                 "compression.type", "min.insync.replicas", "retention.bytes", "message.timestamp.type",
                 "segment.index.bytes", "delete.retention.ms", ""]  # fmt: skip
_CONFIG_VALUES = [None, "1", "-1", "0", "compact", "delete", "compact,delete", "x", "", "gzip", "zstd",
                  "9223372036854775807", "99999999999999999999", "1048576", "LogAppendTime", "é"]  # fmt: skip
_STRINGS = ["", "x", "é✓", "\x00", "a" * 1000, "range", "roundrobin", "consumer", "-1", "%s%n"]
#: Fields whose values make the server wait (long polls, joins, transaction timeouts): a long wait is
#: legitimate, but the fuzzer's time budget is not, so they stay short.
_WAITS = {"max_wait_ms", "rebalance_timeout_ms", "timeout_ms", "transaction_timeout_ms"}
#: APIs whose answer may wait for such a field (Fetch, JoinGroup, SyncGroup): not mutated byte by byte.
_WAITING_APIS = {ApiKey.Fetch, ApiKey.JoinGroup, ApiKey.SyncGroup}
#: APIs whose arrays list partitions, topics, groups or resources: a hostile array is long.
_PARTITION_APIS = {ApiKey.Fetch, ApiKey.Produce, ApiKey.ListOffsets, ApiKey.CreateTopics,
                   ApiKey.CreatePartitions, ApiKey.DeleteRecords, ApiKey.OffsetCommit,
                   ApiKey.TxnOffsetCommit, ApiKey.OffsetFetch, ApiKey.AddPartitionsToTxn, ApiKey.Metadata,
                   ApiKey.DescribeConfigs, ApiKey.IncrementalAlterConfigs, ApiKey.DescribeGroups,
                   ApiKey.DeleteGroups, ApiKey.DeleteTopics, ApiKey.LeaveGroup}  # fmt: skip


def _fields(f: Any) -> Iterable[Any]:
    fs = f.fields
    return fs.values() if isinstance(fs, dict) else (fs or ())


@dataclass
class Generator:
    """Builds hostile but encodable requests of one API key and version from its schema."""

    rng: random.Random
    api_key: int = 0
    version: int = 0
    path: list[str] = field(default_factory=list)
    huge_used: bool = False

    def request(self, api_key: int, version: int) -> Any:
        self.api_key, self.version, self.huge_used = api_key, version, False
        cls = message_classes()[api_key][0]
        kwargs = {f.name: self.value(f) for f in _fields(cls._struct) if f.for_version_q(version)}
        return cls[version](**kwargs)

    # --- values by field ---------------------------------------------------------------------------------
    def value(self, f: Any) -> Any:
        rng = self.rng
        if f.nullable_for_version_q(self.version) and rng.random() < 0.06:
            return None
        self.path.append(f.name)
        try:
            if f.is_struct_array():
                items = [self.struct(f) for _ in range(self.count(f))]
                if items and rng.random() < 0.1:
                    items.append(items[0])  # a duplicate
                return items
            if f.is_struct():
                return self.struct(f)
            if f.is_array():
                kind = f.array_of.type_str
                values = [self.simple(kind, f.name) for _ in range(self.count(f))]
                if values and rng.random() < 0.1:
                    values.append(values[0])
                return values
            return self.simple(f.type_str, f.name)
        finally:
            self.path.pop()

    def struct(self, f: Any) -> Any:
        return f(**{g.name: self.value(g) for g in _fields(f) if g.for_version_q(self.version)})

    def count(self, f: Any) -> int:
        rng = self.rng
        roll = rng.random()
        if self.api_key in _PARTITION_APIS and roll < 0.03:
            # a huge partition list: one array of a request is enough to be hostile (the product of
            # nested huge arrays would not encode in the fuzzer's budget)
            if not self.huge_used:
                self.huge_used = True
                return rng.choice([1000, 5000, 20000]) if not f.is_struct_array() else rng.choice([300, 2000])
            return 1
        if roll < 0.2:
            return 0
        if roll < 0.6:
            return 1
        if roll < 0.93:
            return rng.randint(2, 3)
        return rng.randint(20, 60) if f.is_struct_array() else rng.randint(50, 400)

    def simple(self, kind: str, name: str) -> Any:
        rng = self.rng
        if kind in _INT_RANGES:
            return self.integer(kind, name)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "float64":
            return rng.choice([0.0, -1.0, 1e308, math.inf, -math.inf, math.nan, rng.random()])
        if kind == "uuid":
            return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), uuid.UUID(int=1)])
        if kind == "string":
            return self.string(name)
        if kind == "records":
            return records(rng)
        if kind == "bytes":
            return rng.choice(
                [b"", rng.randbytes(rng.randrange(1, 64)), b"\x00\x01\x00\x00\x00\x01\x00\x01t"]
            )
        raise AssertionError(f"unhandled schema type {kind} ({name})")

    def integer(self, kind: str, name: str) -> int:
        rng = self.rng
        lo, hi = _INT_RANGES[kind]
        if name in ("num_partitions", "count", "replication_factor") and self.api_key in (
            ApiKey.CreateTopics,
            ApiKey.CreatePartitions,
        ):
            return rng.choice([-1, 0, 1, 2, 3, 100, 5000, hi, lo])
        if name in _WAITS:
            return rng.choice([-1, 0, 1, 20, 100, lo])
        if name in ("session_timeout_ms",):
            return rng.choice([-1, 0, 10, 500, 2000, hi, lo])
        if name in ("partition_index", "index", "partition", "partitions", "partition_indexes"):
            return rng.choice([0, 0, 1, 1, 2, -1, 3, hi, lo])
        if name in ("acks",):
            return rng.choice([-1, 1, 1, 0, 2, lo])
        if name in ("max_bytes", "partition_max_bytes"):
            return rng.choice([0, 1, 1 << 20, hi, -1])
        return rng.choice([0, 1, -1, lo, hi, lo + 1, hi - 1, rng.randint(lo, hi), rng.randint(0, 5)])

    def string(self, name: str) -> str:
        rng = self.rng
        parent = self.path[-2] if len(self.path) > 1 else ""
        if "config" in parent or name in ("configuration_keys",):
            return rng.choice(_CONFIG_VALUES if name == "value" else _CONFIG_NAMES) or ""
        if name in ("name", "topic", "topic_name", "resource_name") or "topic" in parent:
            return rng.choice(_TOPICS)
        if "group" in name:
            return rng.choice(_GROUPS)
        if name == "transactional_id" or (name == "key" and self.api_key == ApiKey.FindCoordinator):
            return rng.choice([t for t in _TXN_IDS if t is not None] + _GROUPS)
        if rng.random() < 0.03:
            return "z" * rng.choice([4096, 30000])
        return rng.choice(_STRINGS)


def records(rng: random.Random) -> bytes | None:
    """A record batch field: valid (any codec, idempotent, transactional), corrupt, junk or null."""
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.12:
        return rng.randbytes(rng.randrange(0, 80))
    codec = rng.choice(list(Compression))
    recs = [SimpleRecord(rng.randbytes(rng.randrange(0, 40)), key=rng.choice([None, b"k", b""]))]
    recs *= rng.choice([1, 1, 2, 10])
    pid = rng.choice([-1, -1, 0, 1, 7, 2**63 - 1])
    extra: dict[str, Any] = {}
    if pid >= 0:
        extra = {"producer_id": pid, "producer_epoch": rng.choice([0, 1, 2**15 - 1]), "base_sequence": 0}
        extra["is_transactional"] = rng.random() < 0.3
    batch = bytearray(MemoryRecords.build(recs, compression=codec, **extra).buffer)
    if rng.random() < 0.3:  # a change the CRC covers, with the CRC made right again: deeper checks run
        pos = rng.randrange(21, len(batch))
        batch[pos] ^= 1 << rng.randrange(8)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    elif rng.random() < 0.1:
        batch[rng.randrange(len(batch))] ^= 0xFF
    if rng.random() < 0.05:
        batch = batch + batch  # two batches
    return bytes(batch)


def gzip_bomb() -> bytes:
    """One v2 batch whose gzip records expand past the 256 MiB decompression bound (~300 KiB on the wire)."""
    batch = bytearray(MemoryRecords.build([SimpleRecord(b"x")], compression=Compression.GZIP).buffer[:61])
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = bytes(1 << 20)
    payload = b"".join(co.compress(piece) for _ in range(300)) + co.flush()
    batch += payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def mutate(rng: random.Random, frame: bytes) -> bytes:
    """A valid request frame changed byte by byte."""
    out = bytearray(frame)
    roll = rng.random()
    if roll < 0.4:
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif roll < 0.55:
        del out[rng.randrange(len(out)) :]
    elif roll < 0.7:
        out += rng.randbytes(rng.randrange(1, 64))
    elif roll < 0.9 and len(out) >= 4:
        pos = rng.randrange(len(out) - 3)
        out[pos : pos + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00"])
    else:
        a = rng.randrange(len(out))
        out[a:a] = out[a : a + rng.randrange(1, 32)]
    return bytes(out)


# --- the server under test ----------------------------------------------------------------------------------
class Server:
    """``kafkalog serve`` in a process of its own, its stderr in a file."""

    def __init__(self, data_dir: Path, stderr: Path) -> None:
        self.stderr_path = stderr
        self.data_dir = data_dir
        self._stderr = stderr.open("w")
        settings = {
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "10",
            "group.max.session.timeout.ms": "2000",
            "transaction.max.timeout.ms": "2000",
            "coordinator.tick.ms": "20",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.num.partitions": "2",
            "num.io.threads": "2",
        }
        args = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalog.cli", "serve", str(data_dir), "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "listening on" in line, (line, stderr.read_text())
        self.port = int(line.strip().rsplit(":", 1)[1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def partitions(self) -> int:
        """Partition directories in the data directory (``-delete`` ones hold no descriptors)."""
        return sum(1 for p in self.data_dir.iterdir() if p.is_dir() and not p.name.endswith("-delete"))

    def fd_summary(self) -> str:
        """What the open descriptors point at, grouped (for a failure message)."""
        seen: dict[str, int] = {}
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{self.proc.pid}/fd/{fd}")
            except OSError:
                continue
            kind = Path(target).parent.name if target.startswith("/") else target.split(":")[0]
            seen[kind] = seen.get(kind, 0) + 1
        return ", ".join(f"{k}: {n}" for k, n in sorted(seen.items(), key=lambda kv: -kv[1])[:12])

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        if not self._stderr.closed:
            self._stderr.close()


class Connection:
    """One fuzzing connection: frames out, responses (or the server's close) in."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S)

    def send(self, frame: bytes) -> None:
        try:
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server: the read says so

    def recv(self) -> bytes | None:
        """The next response frame, or None when the server closed the connection."""
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read(size)

    def _read(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Stats:
    structured: int = 0
    mutated: int = 0
    answered: int = 0
    closed: int = 0
    unencodable: int = 0
    by_api: dict[str, int] = field(default_factory=dict)


def _encode(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


def _advertised(port: int) -> list[tuple[int, int, int]]:
    with RawClient(port) as client:
        response = client.call(
            ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1"), 3
        )
    assert response.error_code == 0
    return [(int(k.api_key), int(k.min_version), int(k.max_version)) for k in response.api_keys]


class Probe:
    """A well-behaved client: produce one record to ``probe`` and fetch everything back, each time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.produced = 0

    def check(self, where: str) -> None:
        with RawClient(self.port, timeout=ANSWER_TIMEOUT_S) as client:
            batch = MemoryRecords.build([SimpleRecord(b"probe-%d" % self.produced)]).to_bytes()
            result = produce(client, "probe", batch)
            assert result.error_code == 0 and result.base_offset == self.produced, (where, result)  # type: ignore[attr-defined]
            self.produced += 1
            got = offsets(fetch(client, "probe", 0).records)  # type: ignore[attr-defined]
            assert got == list(range(self.produced)), (where, got)


def _fuzz(server: Server, seed: int, stats: Stats, dump: Path) -> None:
    rng = random.Random(seed)
    gen = Generator(rng)
    apis = _advertised(server.port)
    responses = message_classes()
    probe = Probe(server.port)
    probe.check("start")
    rss0, fd0 = server.rss_mib(), server.fds()
    conn = Connection(server.port)
    deadline = time.monotonic() + SECONDS
    bomb_at = REQUESTS // 2
    correlation = 0
    history: list[str] = []
    try:
        for i in range(REQUESTS):
            if time.monotonic() > deadline and i > bomb_at:
                break
            key, lo, hi = rng.choice(apis)
            version = rng.randint(lo, hi)
            correlation = (correlation + 1) & 0x7FFFFFFF
            try:
                request = gen.request(key, version)
                frame = _encode(request, correlation, rng.choice(["fuzz", None, "", "é" * 50]))
            except (ValueError, TypeError, struct.error, OverflowError, UnicodeError):
                stats.unencodable += 1
                continue
            name = type(request).__name__
            if i == bomb_at:  # one decompression bomb per run
                key, version, name = ApiKey.Produce, 9, "gzip bomb"
                produce_cls = responses[ApiKey.Produce][0]
                part = produce_cls.TopicProduceData.PartitionProduceData(index=0, records=gzip_bomb())
                request = produce_cls[9](
                    transactional_id=None, acks=1, timeout_ms=1000,
                    topic_data=[produce_cls.TopicProduceData(name="t", partition_data=[part])],
                )  # fmt: skip
                frame = _encode(request, correlation, "fuzz")
            stats.by_api[name] = stats.by_api.get(name, 0) + 1
            mutated = i != bomb_at and rng.random() < 0.2
            if mutated:
                frame = mutate(rng, frame)
                if len(frame) >= 2 and struct.unpack_from(">h", frame)[0] in _WAITING_APIS:
                    continue  # it may legitimately wait as long as its (now random) fields say
                stats.mutated += 1
            else:
                stats.structured += 1
            conn.send(frame)
            # an acks=0 produce (or what a mutation made of a frame) may get no response: an ApiVersions
            # behind it shows the connection still serves, in order
            acks0 = key == ApiKey.Produce and not mutated and int(request.acks) == 0
            sync = None
            if mutated or acks0:
                correlation = sync = (correlation + 1) & 0x7FFFFFFF
                if len(frame) >= 8 and struct.unpack_from(">i", frame, 4)[0] == sync:
                    correlation = sync = sync + 1  # a mutation made the frame's own id the sync's
                conn.send(_encode(ApiVersionsRequest[0](), sync, "fuzz"))
            where = f"seed={seed} request {i}: {name} v{version} (mutated={mutated}, acks=0: {acks0})"
            history.append(f"{where} correlation {correlation} sync {sync} frame {frame[:24].hex()}")
            where += "; the last requests:\n" + "\n".join(history[-6:])
            try:
                answer = conn.recv()
                got = struct.unpack_from(">i", answer)[0] if answer is not None else None
                if answer is not None and got != sync:
                    stats.answered += 1
                    if mutated:
                        want = struct.unpack_from(">i", frame, 4)[0] if len(frame) >= 8 else got
                        assert got == want, f"{where}: correlation {got} != {want}"
                    else:
                        assert got == correlation, f"{where}: correlation {got} != {correlation}"
                        # well-formed at its version (kafka-python reads any ApiVersions error in the v0
                        # layout; Kafka answers INVALID_REQUEST in the request's layout, as the server does)
                        if key != ApiKey.ApiVersions or answer[4:6] == b"\x00\x00":
                            responses[key][1].decode(answer, version=version, header=True)
                    if sync is not None:
                        answer = conn.recv()
                        got = struct.unpack_from(">i", answer)[0] if answer is not None else None
            except TimeoutError:
                (dump / "unanswered.frame").write_bytes(frame)
                raise AssertionError(f"{where}: unanswered; frame in {dump}") from None
            if answer is None:
                stats.closed += 1
                assert mutated or acks0, f"{where}: a valid request closed the connection"
                conn.close()
                conn = Connection(server.port)
            else:
                assert got == correlation, f"{where}: correlation {got} != {correlation}"
            if i % 150 == 0 or i == bomb_at:
                assert server.alive(), f"seed={seed} request {i}: the server exited"
                rss, fds = server.rss_mib(), server.fds()
                assert rss < rss0 + RSS_HEADROOM_MIB, (
                    f"seed={seed} request {i}: RSS {rss:.0f} MiB from {rss0:.0f}"
                )
                # each partition may hold its .log and two indexes (opened lazily) of its active segment
                # and of the segment it rolled from; topics are created by the fuzzer (any name a mutation
                # makes; max.partitions bounds how many)
                fds -= 4 * server.partitions()
                assert fds < fd0 + FD_HEADROOM, (
                    f"seed={seed} request {i}: {fds} descriptors from {fd0} ({server.fd_summary()})"
                )
                probe.check(f"seed={seed} request {i}")
    finally:
        conn.close()
    assert server.alive(), f"seed={seed}: the server exited"
    probe.check(f"seed={seed} end")


@pytest.mark.slow
def test_adversarial_fuzz_of_every_api(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with LogManager.open(data_dir, background=False) as manager:
        manager.create_topic("t", 2)
        manager.create_topic("probe", 1)
    before = sorted(p.name for p in tmp_path.iterdir())
    server = Server(data_dir, tmp_path / "serve.stderr")
    stats = Stats()
    try:
        _fuzz(server, SEED, stats, tmp_path)
        code = server.stop()
    except AssertionError as exc:  # with what the server logged (its last errors say why)
        server.kill()
        errors = [
            line for line in server.stderr_path.read_text(errors="replace").splitlines() if "error" in line
        ]
        raise AssertionError(f"{exc}\nthe server's last errors:\n" + "\n".join(errors[-12:])) from None
    finally:
        server.kill()
    log = server.stderr_path.read_text(errors="replace")
    print(f"seed={SEED} {stats}")
    assert code == 0, f"seed={SEED}: serve exited {code}\n{log[-4000:]}"
    assert "Traceback" not in log, f"seed={SEED}: the server logged a handler error\n{log[-6000:]}"
    assert stats.structured > 100 and stats.answered > stats.structured // 2, f"seed={SEED} {stats}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [*before, "serve.stderr"]  # nothing beside the dir
    assert (data_dir / ".kafka_cleanshutdown").exists(), f"seed={SEED}: not marked clean"
    with LogManager.open(data_dir, background=False) as manager:
        assert manager.load_failures == [] and manager.ignored_dirs == [], f"seed={SEED}"
        assert manager.get_log("probe", 0).log_end_offset > 2
