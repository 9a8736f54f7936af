"""Option parsing and offset resolution of the ``kafkalog`` source (pure: no Spark session).

Error texts follow Spark's Kafka source (``KafkaSourceProvider``, ``JsonUtils``, ``KafkaOffsetReaderAdmin``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkalog.spark.offsets import (
    EARLIEST,
    LATEST,
    PartitionBounds,
    SpecificOffsets,
    SpecificTimestamps,
    from_json_offsets,
    parse_assign,
    parse_offset_spec,
    resolve_offsets,
    to_json_offsets,
)
from kafkalog.spark.options import parse_bool, parse_source_options, time_string_as_ms


def batch(**options: Any) -> Any:
    return parse_source_options(
        {"path": "/data", **{k.lower(): str(v) for k, v in options.items()}}, streaming=False
    )


def stream(**options: Any) -> Any:
    return parse_source_options(
        {"path": "/data", **{k.lower(): str(v) for k, v in options.items()}}, streaming=True
    )


def test_defaults() -> None:
    opts = batch(subscribe="a, b,,")
    assert opts.paths == ("/data",)
    assert (opts.strategy.kind, opts.strategy.topics) == ("subscribe", ("a", "b"))
    assert (opts.starting, opts.ending) == (EARLIEST, LATEST)
    assert (opts.include_headers, opts.fail_on_data_loss, opts.read_committed) == (False, True, False)
    assert (opts.min_partitions, opts.max_records_per_partition, opts.max_offsets_per_trigger) == (
        None,
        None,
        None,
    )
    assert opts.max_trigger_delay_ms == 15 * 60 * 1000
    assert stream(subscribe="a").starting == LATEST


def test_strategies() -> None:
    assert batch(subscribePattern="ord.*").strategy.matches("orders")
    assert not batch(subscribePattern="ord").strategy.matches("orders")  # fullmatch, like Java's matches()
    assigned = batch(assign='{"t": [1, 0], "u": [3]}').strategy
    assert assigned.assigned == (("t", 1), ("t", 0), ("u", 3))
    assert assigned.matches("u") and not assigned.matches("v")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "One of the following options must be specified for Kafka source"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
        ({"subscribe": " , "}, "No topics to subscribe to"),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "("}, "invalid subscribePattern"),
        ({"assign": "t:0"}, "No topicpartitions to assign"),
        ({"assign": '{"t": 0}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}'),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
        ({"subscribe": "a", "kafka.key.deserializer": "x"}, "'key.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, "'value.deserializer' is not supported"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "'enable.auto.commit' is not supported"),
        ({"subscribe": "a", "kafka.interceptor.classes": "x"}, "'interceptor.classes' is not supported"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
        ({"subscribe": "a", "maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition must be positive"),
        ({"subscribe": "a", "minPartitions": "x"}, "for input string"),
        ({"subscribe": "a", "includeHeaders": "yes"}, "for input string"),
        ({"subscribe": "a", "failOnDataLoss": "1"}, "for input string"),
        ({"subscribe": "a", "kafka.isolation.level": "serializable"}, "isolation.level"),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "minOffsetPerTrigger(10)",
        ),
        (
            {"subscribe": "a", "startingOffsets": "latest"},
            "starting offset can't be latest for batch queries",
        ),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest"),
        ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest"),
        (
            {"subscribe": "a", "startingOffsets": "{bad"},
            'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}',
        ),
        ({"subscribe": "a", "startingOffsetsByTimestamp": "[]"}, 'Expected e.g. {"topicA": {"0": 123456789'),
        ({"subscribe": "a", "startingTimestamp": "soon"}, "Expected a single long value, got soon"),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"},
            "No value found for 'EARLIEST'",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":5}}', "endingOffsets": '{"a":{"1":9}}'},
            "do not match the specified end offset topic partitions",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
            "starting offset 9 is greater than the ending offset 5",
        ),
        ({"subscribe": "a", "maxTriggerDelay": "5 parsecs"}, "Failed to parse time string"),
        ({"subscribe": "a", "arrowBatchRows": "0"}, "arrowBatchRows must be positive"),
    ],
)
def test_batch_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as info:
        batch(**options)
    assert message in str(info.value)


def test_path_is_required_and_paths_list_accepted() -> None:
    with pytest.raises(ValueError, match="Option 'path' must be specified"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    opts = parse_source_options({"paths": '["/a", "/b"]', "path": "/a", "subscribe": "t"}, streaming=False)
    assert opts.paths == ("/a", "/b")
    with pytest.raises(ValueError, match="JSON list"):
        parse_source_options({"paths": "/a", "subscribe": "t"}, streaming=False)


def test_streaming_only_and_batch_only_options() -> None:
    with pytest.raises(ValueError, match="ending offset not valid in streaming queries"):
        stream(subscribe="a", endingOffsets="latest")
    with pytest.raises(ValueError, match="ending timestamp not valid in streaming queries"):
        stream(subscribe="a", endingOffsetsByTimestamp='{"a":{"0":1}}')
    opts = stream(subscribe="a", startingOffsets="latest", maxOffsetsPerTrigger=500, minOffsetsPerTrigger=5)
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (500, 5)
    assert batch(subscribe="a", maxOffsetsPerTrigger=5).max_offsets_per_trigger == 5  # ignored with a warning


def test_accepted_and_ignored_options(caplog: pytest.LogCaptureFixture) -> None:
    opts = batch(
        subscribe="a",
        **{
            "kafka.group.id": "g",
            "groupIdPrefix": "p",
            "kafka.bootstrap.servers": "host:9092",
            "kafkaConsumer.pollTimeoutMs": "10",
            "fetchOffset.numRetries": "3",
            "fetchOffset.retryIntervalMs": "10",
        },
    )
    assert opts.strategy.topics == ("a",)
    assert "kafka.group.id" in caplog.text
    ignored = [
        r.getMessage() for r in caplog.records if "options ignored by the kafkalog source" in r.getMessage()
    ]
    assert len(ignored) == 1
    for name in (
        "groupidprefix",
        "kafka.bootstrap.servers",
        "kafkaconsumer.polltimeoutms",
        "fetchoffset.numretries",
    ):
        assert name in ignored[0]
    assert "kafka.group.id" not in ignored[0]


def test_values_and_case() -> None:
    opts = parse_source_options(
        {
            "PATH": "/d",
            "SubscribePattern": "x",
            "INCLUDEHEADERS": "TRUE",
            "failOnDataLoss": "False",
            "kafka.isolation.level": "READ_COMMITTED",
            "maxTriggerDelay": "30s",
            "minPartitions": "8",
            "maxRecordsPerPartition": "1000",
        },
        streaming=True,
    )
    assert (opts.include_headers, opts.fail_on_data_loss, opts.read_committed) == (True, False, True)
    assert (opts.max_trigger_delay_ms, opts.min_partitions, opts.max_records_per_partition) == (
        30_000,
        8,
        1000,
    )
    assert parse_bool("x", " true ") and not parse_bool("x", "FALSE")
    assert [time_string_as_ms(t) for t in ("15m", "100", "2h", "1d", "250ms", "3min")] == [
        900_000,
        100,
        7_200_000,
        86_400_000,
        250,
        180_000,
    ]


def test_offset_spec_precedence() -> None:
    opts = batch(
        subscribe="a",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"a": {"0": 5}}',
        startingTimestamp="7",
        endingOffsetsByTimestamp='{"a": {"0": 9}}',
    )
    assert opts.starting == SpecificTimestamps(global_timestamp=7)
    assert opts.ending == SpecificTimestamps({("a", 0): 9})
    assert batch(subscribe="a", startingOffsetsByTimestamp='{"a": {"0": 5}}').starting == SpecificTimestamps(
        {("a", 0): 5}
    )
    assert batch(subscribe="a", startingOffsetsByTimestampStrategy="LATEST").starting_no_match_latest


# --- offsets JSON -------------------------------------------------------------------------------------------


def test_offsets_json_round_trip_in_canonical_order() -> None:
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 1): 0}
    assert list(to_json_offsets(offsets).items()) == [("a", {"1": 0}), ("b", {"2": 7, "10": 5})]
    assert list(to_json_offsets(offsets)["b"]) == ["2", "10"]  # numeric, not text, order
    assert from_json_offsets(to_json_offsets(offsets)) == offsets
    assert from_json_offsets('{"a": {"3": 4}}') == {("a", 3): 4}
    assert from_json_offsets(None) == {}
    assert parse_offset_spec(" Latest ") == LATEST
    assert parse_offset_spec('{"t": {"0": 23, "1": -2}}') == SpecificOffsets({("t", 0): 23, ("t", 1): -2})
    assert parse_assign('{"t": [0, 1]}') == [("t", 0), ("t", 1)]
    for bad in ('{"t": {"x": 1}}', '{"t": {"0": "1"}}', '{"t": [0]}', "[1]"):
        with pytest.raises(ValueError, match=r"Expected e\.g\."):
            parse_offset_spec(bad)


# --- resolution ---------------------------------------------------------------------------------------------

BOUNDS = {("t", 0): PartitionBounds(10, 100), ("t", 1): PartitionBounds(0, 50)}
TIMES = {("t", 0): {1000: 40}, ("t", 1): {}}


def resolve(spec: Any, *, starting: bool = True, no_match_latest: bool = False) -> dict[Any, int]:
    return resolve_offsets(
        spec,
        sorted(BOUNDS),
        BOUNDS.__getitem__,
        lambda tp, ts: TIMES[tp].get(ts),
        starting=starting,
        no_match_latest=no_match_latest,
    )


def test_resolve_offsets() -> None:
    assert resolve(EARLIEST) == {("t", 0): 10, ("t", 1): 0}
    assert resolve(LATEST) == {("t", 0): 100, ("t", 1): 50}
    assert resolve(SpecificOffsets({("t", 0): -2, ("t", 1): -1})) == {("t", 0): 10, ("t", 1): 50}
    assert resolve(SpecificOffsets({("t", 0): 3, ("t", 1): 70})) == {
        ("t", 0): 3,
        ("t", 1): 70,
    }  # kept as given
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve(SpecificOffsets({("t", 0): 3}))
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve(SpecificOffsets({("t", 0): 3, ("t", 1): 3, ("u", 0): 1}))


def test_resolve_timestamps() -> None:
    with pytest.raises(
        ValueError, match="No offset matched from request of topic-partition t-1 and timestamp 1000"
    ):
        resolve(SpecificTimestamps(global_timestamp=1000))
    assert resolve(SpecificTimestamps(global_timestamp=1000), no_match_latest=True) == {
        ("t", 0): 40,
        ("t", 1): 50,
    }
    assert resolve(SpecificTimestamps(global_timestamp=1000), starting=False) == {("t", 0): 40, ("t", 1): 50}
    assert resolve(SpecificTimestamps({("t", 0): -2, ("t", 1): -1})) == {("t", 0): 10, ("t", 1): 50}
    with pytest.raises(ValueError, match="ByTimestamp contains specific offsets"):
        resolve(SpecificTimestamps({("t", 0): 1000}))
