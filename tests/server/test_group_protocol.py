"""The group coordinator at the protocol level (raw requests): the classic state machine and its errors,
offsets (multi-group OffsetFetch), FindCoordinator, ApiVersions; and the ``__consumer_offsets`` record
formats against golden bytes laid out from Kafka's schemas."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.api_key import ApiKey

from kafkalog.server import KafkaServer
from kafkalog.server.groups.records import (
    GroupKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalog.server.internal_topics import CONSUMER_OFFSETS, java_string_hash, partition_for
from kafkalog.server.protocol import message_classes

from .helpers import RawClient


def req(api_key: ApiKey, /, **fields: object) -> object:
    return message_classes()[int(api_key)][0](**fields)


def sub(api_key: ApiKey, path: str, /, **fields: object) -> object:
    """A nested struct of a request (``path``: dotted class names under the request class)."""
    cls = message_classes()[int(api_key)][0]
    for name in path.split("."):
        cls = getattr(cls, name)
    return cls(**fields)


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


# --- record formats ------------------------------------------------------------------------------------------
def test_java_string_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs maps MIN_VALUE to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # surrogate pair: two UTF-16 units
    assert partition_for("hello", 50) == 99162322 % 50


def test_offset_commit_records_golden_bytes() -> None:
    key = encode_offset_commit_key("grp", "tpc", 7)
    assert key == struct.pack(">h", 1) + _s("grp") + _s("tpc") + struct.pack(">i", 7)
    value = encode_offset_commit_value(OffsetAndMetadata(42, 5, "meta", 1_700_000_000_000))
    assert value == struct.pack(">hqi", 3, 42, 5) + _s("meta") + struct.pack(">q", 1_700_000_000_000)
    expiring = encode_offset_commit_value(OffsetAndMetadata(42, 5, "", 1000, 2000))
    assert expiring == struct.pack(">hq", 1, 42) + _s("") + struct.pack(">qq", 1000, 2000)
    assert decode_key(key) == OffsetKey("grp", "tpc", 7)
    assert decode_offset_commit_value(value) == OffsetAndMetadata(42, 5, "meta", 1_700_000_000_000)
    assert decode_offset_commit_value(expiring).expire_timestamp == 2000
    # v4 (flexible): compact string, tagged fields
    v4 = struct.pack(">hqi", 4, 9, 2) + bytes([3]) + b"ab" + struct.pack(">q", 77) + bytes([0])
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(9, 2, "ab", 77)
    # v0: no leader epoch
    v0 = struct.pack(">hq", 0, 9) + _s("") + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(9, -1, "", 77)


def test_group_metadata_records_golden_bytes() -> None:
    assert encode_group_metadata_key("grp") == struct.pack(">h", 2) + _s("grp")
    assert decode_key(encode_group_metadata_key("grp")) == GroupKey("grp")
    member = MemberMetadataValue("m1", None, "cid", "/127.0.0.1", 300000, 10000, b"\x00sub", b"\x00asg")
    value = GroupMetadataValue("consumer", 3, "range", "m1", 123, (member,))
    expected = (
        struct.pack(">h", 3)
        + _s("consumer")
        + struct.pack(">i", 3)
        + _s("range")
        + _s("m1")
        + struct.pack(">qi", 123, 1)
        + _s("m1")
        + struct.pack(">h", -1)  # null group instance id
        + _s("cid")
        + _s("/127.0.0.1")
        + struct.pack(">ii", 300000, 10000)
        + struct.pack(">i", 4)
        + b"\x00sub"
        + struct.pack(">i", 4)
        + b"\x00asg"
    )
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value
    empty = GroupMetadataValue("consumer", 4, None, None, 5, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty
    assert decode_key(struct.pack(">h", 11) + _s("x")) is None  # a newer coordinator's record type


# --- protocol ------------------------------------------------------------------------------------------------
@pytest.fixture
def fast_server(data_dir: Path) -> Iterator[KafkaServer]:
    with KafkaServer(
        data_dir,
        port=0,
        group_initial_rebalance_delay_ms=0,
        offsets_topic_num_partitions=3,
        coordinator_tick_ms=20,
        group_min_session_timeout_ms=100,
    ) as server:
        yield server


def _join(client: RawClient, group: str, member_id: str = "", version: int = 5, **extra: object) -> object:
    fields: dict[str, object] = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 5000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [sub(ApiKey.JoinGroup, "JoinGroupRequestProtocol", name="range", metadata=b"m")],
    }
    fields.update(extra)
    return client.call(req(ApiKey.JoinGroup, **fields), version)


def test_api_versions_advertise_group_apis_and_no_kip848(fast_server: KafkaServer) -> None:
    with RawClient(fast_server.port) as c:
        resp = c.call(req(ApiKey.ApiVersions, client_software_name="t", client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[ApiKey.JoinGroup] == (0, 9)
    assert ranges[ApiKey.OffsetCommit] == (2, 9)
    assert ranges[ApiKey.OffsetFetch] == (1, 9)
    assert ranges[ApiKey.FindCoordinator] == (0, 6)
    assert 68 not in ranges  # ConsumerGroupHeartbeat: clients fall back to the classic protocol


def test_find_coordinator_single_and_batched(fast_server: KafkaServer) -> None:
    with RawClient(fast_server.port) as c:
        one = c.call(req(ApiKey.FindCoordinator, key="g", key_type=0), 2)
        assert (one.error_code, one.node_id, one.port) == (0, 0, fast_server.port)
        many = c.call(req(ApiKey.FindCoordinator, key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(x.key, x.error_code, x.node_id) for x in many.coordinators] == [("a", 0, 0), ("b", 0, 0)]
        bad = c.call(req(ApiKey.FindCoordinator, key_type=2, coordinator_keys=["s"]), 6)
        assert bad.coordinators[0].error_code == 42  # INVALID_REQUEST
    assert fast_server.manager is not None
    assert fast_server.manager.num_partitions(CONSUMER_OFFSETS) == 3


def test_join_sync_heartbeat_leave_state_machine(fast_server: KafkaServer) -> None:
    with RawClient(fast_server.port) as a, RawClient(fast_server.port) as b, RawClient(fast_server.port) as x:
        first = _join(a, "g")
        assert first.error_code == 79  # MEMBER_ID_REQUIRED
        m1 = first.member_id
        assert m1.startswith("raw-test-")
        bad = _join(x, "g", session_timeout_ms=1)
        assert bad.error_code == 26  # INVALID_SESSION_TIMEOUT
        assert _join(x, "g", "nobody").error_code == 25  # UNKNOWN_MEMBER_ID
        joined = _join(a, "g", m1)
        assert (joined.error_code, joined.generation_id, joined.leader, joined.protocol_name) == (
            0,
            1,
            m1,
            "range",
        )
        assert [m.member_id for m in joined.members] == [m1]
        sync = a.call(
            req(
                ApiKey.SyncGroup,
                group_id="g",
                generation_id=1,
                member_id=m1,
                group_instance_id=None,
                assignments=[
                    sub(ApiKey.SyncGroup, "SyncGroupRequestAssignment", member_id=m1, assignment=b"A1")
                ],
            ),
            3,
        )
        assert (sync.error_code, sync.assignment) == (0, b"A1")
        hb = a.call(req(ApiKey.Heartbeat, group_id="g", generation_id=1, member_id=m1), 3)
        assert hb.error_code == 0
        hb = a.call(req(ApiKey.Heartbeat, group_id="g", generation_id=0, member_id=m1), 3)
        assert hb.error_code == 22  # ILLEGAL_GENERATION
        inconsistent = _join(b, "g", protocol_type="other")
        assert inconsistent.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        # a second member (v3: no member-id round trip) joins: the leader learns of the rebalance by heartbeat
        b.send(
            req(
                ApiKey.JoinGroup,
                group_id="g",
                session_timeout_ms=10000,
                rebalance_timeout_ms=5000,
                member_id="",
                protocol_type="consumer",
                protocols=[sub(ApiKey.JoinGroup, "JoinGroupRequestProtocol", name="range", metadata=b"b")],
            ),
            3,
        )
        time.sleep(0.1)
        hb = a.call(req(ApiKey.Heartbeat, group_id="g", generation_id=1, member_id=m1), 3)
        assert hb.error_code == 27  # REBALANCE_IN_PROGRESS
        described = x.call(req(ApiKey.DescribeGroups, groups=["g", "nope"]), 5)
        assert described.groups[0].group_state == "PreparingRebalance"
        assert described.groups[1].group_state == "Dead"
        rejoin = _join(a, "g", m1)
        assert (rejoin.error_code, rejoin.generation_id, len(rejoin.members)) == (0, 2, 2)
        frame = b.recv_frame()
        assert frame is not None
        joined_b = message_classes()[int(ApiKey.JoinGroup)][1].decode(frame, version=3, header=True)
        m2 = joined_b.member_id
        assert (joined_b.error_code, joined_b.generation_id, joined_b.leader, joined_b.members) == (
            0,
            2,
            m1,
            [],
        )
        # the follower syncs first and waits for the leader's assignment
        b.send(req(ApiKey.SyncGroup, group_id="g", generation_id=2, member_id=m2, assignments=[]), 3)
        time.sleep(0.05)
        hb = a.call(req(ApiKey.Heartbeat, group_id="g", generation_id=2, member_id=m1), 3)
        assert hb.error_code == 0  # CompletingRebalance: heartbeats are fine
        done = a.call(
            req(
                ApiKey.SyncGroup,
                group_id="g",
                generation_id=2,
                member_id=m1,
                assignments=[
                    sub(ApiKey.SyncGroup, "SyncGroupRequestAssignment", member_id=m1, assignment=b"A"),
                    sub(ApiKey.SyncGroup, "SyncGroupRequestAssignment", member_id=m2, assignment=b"B"),
                ],
            ),
            3,
        )
        assert (done.error_code, done.assignment) == (0, b"A")
        frame = b.recv_frame()
        assert frame is not None
        synced_b = message_classes()[int(ApiKey.SyncGroup)][1].decode(frame, version=3, header=True)
        assert (synced_b.error_code, synced_b.assignment) == (0, b"B")
        listed = x.call(req(ApiKey.ListGroups, states_filter=["stable"], types_filter=[]), 5)
        assert [(g.group_id, g.group_state, g.protocol_type) for g in listed.groups] == [
            ("g", "Stable", "consumer")
        ]
        described = x.call(req(ApiKey.DescribeGroups, groups=["g", "nope"]), 6)
        assert described.groups[0].protocol_data == "range"
        assert sorted(m.member_assignment for m in described.groups[0].members) == [b"A", b"B"]
        assert described.groups[1].error_code == 69  # GROUP_ID_NOT_FOUND at v6
        left = b.call(
            req(
                ApiKey.LeaveGroup,
                group_id="g",
                members=[sub(ApiKey.LeaveGroup, "MemberIdentity", member_id=m) for m in (m2, "ghost")],
            ),
            4,
        )
        assert [m.error_code for m in left.members] == [0, 25]
        hb = a.call(req(ApiKey.Heartbeat, group_id="g", generation_id=2, member_id=m1), 3)
        assert hb.error_code == 27
        deleted = x.call(req(ApiKey.DeleteGroups, groups_names=["g"]), 2)
        assert deleted.results[0].error_code == 68  # NON_EMPTY_GROUP


def test_session_expiry_empties_the_group(fast_server: KafkaServer) -> None:
    with RawClient(fast_server.port) as a:
        joined = _join(a, "exp", version=3, session_timeout_ms=300)
        assert joined.error_code == 0
        a.call(
            req(
                ApiKey.SyncGroup, group_id="exp", generation_id=1, member_id=joined.member_id, assignments=[]
            ),
            3,
        )
        time.sleep(0.8)
        hb = a.call(req(ApiKey.Heartbeat, group_id="exp", generation_id=1, member_id=joined.member_id), 3)
        assert hb.error_code == 25  # the session expired: UNKNOWN_MEMBER_ID
        described = a.call(req(ApiKey.DescribeGroups, groups=["exp"]), 3)
        assert described.groups[0].group_state == "Empty"


def test_static_member_replacement_fences_the_old_id(fast_server: KafkaServer) -> None:
    with RawClient(fast_server.port) as a:
        first = _join(a, "st", group_instance_id="i-1")
        assert first.error_code == 0  # static members get no MEMBER_ID_REQUIRED round trip
        old = first.member_id
        a.call(req(ApiKey.SyncGroup, group_id="st", generation_id=1, member_id=old, group_instance_id="i-1",
                   assignments=[sub(ApiKey.SyncGroup, "SyncGroupRequestAssignment", member_id=old, assignment=b"X")]), 3)  # fmt: skip
        again = _join(a, "st", group_instance_id="i-1")
        assert again.error_code == 0 and again.member_id != old
        hb = a.call(
            req(ApiKey.Heartbeat, group_id="st", generation_id=1, member_id=old, group_instance_id="i-1"), 3
        )
        assert hb.error_code == 82  # FENCED_INSTANCE_ID


def commit_topic(partition: int, offset: int, metadata: str, epoch: int = -1) -> object:
    part = sub(
        ApiKey.OffsetCommit,
        "OffsetCommitRequestTopic.OffsetCommitRequestPartition",
        partition_index=partition,
        committed_offset=offset,
        committed_leader_epoch=epoch,
        committed_metadata=metadata,
    )
    return sub(ApiKey.OffsetCommit, "OffsetCommitRequestTopic", name="t", partitions=[part])


def test_offset_commit_and_multi_group_fetch(fast_server: KafkaServer, data_dir: Path) -> None:
    with RawClient(fast_server.port) as c:
        topics = [commit_topic(0, 5, "m", 1)]
        commit = c.call(
            req(
                ApiKey.OffsetCommit,
                group_id="simple",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=topics,
            ),
            8,
        )
        assert commit.topics[0].partitions[0].error_code == 0
        member_commit = c.call(
            req(
                ApiKey.OffsetCommit,
                group_id="nogroup",
                generation_id_or_member_epoch=3,
                member_id="x",
                topics=topics,
            ),
            8,
        )
        assert member_commit.topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION
        big = [commit_topic(1, 1, "x" * 5000)]
        too_big = c.call(
            req(ApiKey.OffsetCommit, group_id="simple", generation_id_or_member_epoch=-1, topics=big), 8
        )
        assert too_big.topics[0].partitions[0].error_code == 12  # OFFSET_METADATA_TOO_LARGE
        fetched = c.call(
            req(
                ApiKey.OffsetFetch,
                groups=[
                    sub(ApiKey.OffsetFetch, "OffsetFetchRequestGroup", group_id="simple", topics=None),
                    sub(
                        ApiKey.OffsetFetch,
                        "OffsetFetchRequestGroup",
                        group_id="other",
                        topics=[
                            sub(
                                ApiKey.OffsetFetch,
                                "OffsetFetchRequestGroup.OffsetFetchRequestTopics",
                                name="t",
                                partition_indexes=[0],
                            )
                        ],
                    ),
                ],
                require_stable=True,
            ),
            8,
        )
        simple, other = fetched.groups
        p = simple.topics[0].partitions[0]
        assert (simple.topics[0].name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata) == (
            "t", 0, 5, 1, "m",
        )  # fmt: skip
        assert other.topics[0].partitions[0].committed_offset == -1
        old = c.call(
            req(
                ApiKey.OffsetFetch,
                group_id="simple",
                topics=[
                    sub(ApiKey.OffsetFetch, "OffsetFetchRequestTopic", name="t", partition_indexes=[0, 1])
                ],
            ),
            1,
        )
        assert [x.committed_offset for x in old.topics[0].partitions] == [5, -1]
        deleted = c.call(req(ApiKey.DeleteGroups, groups_names=["simple", "unknown"]), 2)
        assert [r.error_code for r in deleted.results] == [0, 69]
        gone = c.call(req(ApiKey.OffsetFetch, group_id="simple", topics=None), 7)
        assert gone.topics == []
