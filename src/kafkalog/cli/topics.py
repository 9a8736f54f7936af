"""``kafkalog topics DIR``: create, list, describe, alter and delete topics, like Kafka's ``kafka-topics.sh``.

Changes (``--create``, ``--alter``, ``--delete``) go through :class:`~kafkalog.manager.LogManager`, which takes
the data directory's lock (exit 75 while a producer or broker holds it), validates names and configs, and
persists topics in ``kafkalog-topics.json``. A deleted topic's partition directories are removed before the
command returns. Listing and describing are read-only (``kafkalog-topics.json`` plus the partition
directories, offsets through :class:`~kafkalog.readonly.log.ReadOnlyLog`): they take no lock and run no
recovery, so they work next to a running producer.

Output: ``--list`` one topic per line; ``--describe`` Kafka's tab-separated layout (a ``Topic:`` line with the
config overrides, then one line per partition with its offsets and size). ``--json``: ``{"type":"topic",
"topic","topicId","partitionCount","config","partitions":[{"partition","logStartOffset","logEndOffset",
"highWatermark","sizeBytes","segments"}]}`` per topic (``partitions`` only with ``--describe``).

Exit codes: 0 done; 1 the operation failed (the topic exists, does not exist, ...); 64 a bad option, topic
name, partition count or config; 66 no such directory (only ``--create`` creates a data directory); 75 locked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_FAULT,
    EXIT_USAGE,
    CliError,
    KafkalogCommand,
    json_dumps,
    parse_key_values,
    require_dir,
)
from kafkalog.cli.paths import list_partition_dirs
from kafkalog.cli.state import open_manager
from kafkalog.datadir import read_topics
from kafkalog.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaError,
    PolicyViolationError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.config import LogConfig, ManagerConfig
from kafkalog.readonly.log import ReadOnlyLog

__all__ = ["describe_topics", "topics"]

_BAD_INPUT = (InvalidConfigurationError, InvalidPartitionsError, InvalidTopicError, PolicyViolationError)


def _topic_table(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Topics of a data directory, read-only: ``kafkalog-topics.json`` and the partition directories."""
    found: dict[str, int] = {}
    limit = ManagerConfig().max_partitions  # what open_manager loads: a directory numbered past it is ignored
    for tp, _ in list_partition_dirs(data_dir)[0]:
        if tp.partition < limit:
            found[tp.topic] = max(found.get(tp.topic, 0), tp.partition + 1)
    doc = read_topics(data_dir)
    stored = doc.topics if doc is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for topic, count in found.items():
        # the count is what the directories show, as LogManager.open corrects it: a stored count alone
        # (kafkalog-topics.json may say 2147483647) never sizes anything
        meta = stored.get(topic)
        out[topic] = {
            "partitions": count,
            "config": dict(meta.config) if meta is not None else {},
            "topic_id": meta.topic_id if meta is not None else None,
        }
    return out


def describe_topics(data_dir: Path, only: str | None, with_partitions: bool) -> list[dict[str, Any]]:
    """The ``--json`` objects of ``--list`` / ``--describe`` (read-only)."""
    table = _topic_table(data_dir)
    if only is not None and only not in table:
        raise CliError(f"topic {only!r} does not exist in {data_dir}")
    result = []
    for name in sorted(table):
        if only is not None and name != only:
            continue
        meta = table[name]
        obj: dict[str, Any] = {
            "type": "topic",
            "topic": name,
            "topicId": meta["topic_id"],
            "partitionCount": meta["partitions"],
            "config": dict(sorted(meta["config"].items())),
        }
        if with_partitions:
            parts = []
            for p in range(meta["partitions"]):
                path = data_dir / f"{name}-{p}"
                entry: dict[str, Any] = {"partition": p}
                if path.is_dir():
                    rl = ReadOnlyLog.open(path)
                    segs = rl.segments
                    entry.update(
                        logStartOffset=rl.log_start_offset,
                        logEndOffset=rl.log_end_offset,
                        highWatermark=rl.high_watermark,
                        sizeBytes=sum(s.size_bytes for s in segs),
                        segments=len(segs),
                    )
                else:  # created lazily: the partition has no directory yet
                    entry.update(logStartOffset=0, logEndOffset=0, highWatermark=0, sizeBytes=0, segments=0)
                parts.append(entry)
            obj["partitions"] = parts
        result.append(obj)
    return result


def _print_describe(objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        configs = ",".join(f"{k}={v}" for k, v in obj["config"].items())
        click.echo(
            f"Topic: {obj['topic']}\tTopicId: {obj['topicId'] or '-'}\tPartitionCount: {obj['partitionCount']}\t"
            f"ReplicationFactor: 1\tConfigs: {configs}"
        )
        for p in obj["partitions"]:
            click.echo(
                f"\tTopic: {obj['topic']}\tPartition: {p['partition']}\tLogStartOffset: {p['logStartOffset']}\t"
                f"LogEndOffset: {p['logEndOffset']}\tHighWatermark: {p['highWatermark']}\t"
                f"Size: {p['sizeBytes']}\tSegments: {p['segments']}"
            )


def _typed(value: str) -> int | str:
    """A config value as JSON will keep it: integers as numbers, the rest as text."""
    try:
        return int(value)
    except ValueError:
        return value


def _check_configs(config: dict[str, Any]) -> None:
    try:
        LogConfig.from_props(config)
    except InvalidConfigurationError as exc:
        raise click.UsageError(str(exc)) from None


@click.command(
    "topics",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
    short_help="Create, list, describe, alter and delete topics.",
)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--create", "create", metavar="TOPIC", default=None, help="Create a topic.")
@click.option("--list", "list_", is_flag=True, help="List the topics (the default action).")
@click.option(
    "--describe",
    "describe",
    metavar="[TOPIC]",
    is_flag=False,
    flag_value="",
    default=None,
    help="Describe every topic, or one: config overrides and per-partition offsets.",
)
@click.option(
    "--alter", "alter", metavar="TOPIC", default=None, help="Change a topic's configs or partitions."
)
@click.option("--delete", "delete", metavar="TOPIC", default=None, help="Delete a topic and its data.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="--create: number of partitions (default 1); --alter: grow to N partitions.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config (repeat, or separate with commas), e.g. retention.ms=86400000.",
)
@click.option(
    "--delete-config", "delete_configs", multiple=True, metavar="KEY", help="--alter: remove an override."
)
@click.option("--if-not-exists", is_flag=True, help="--create: do nothing if the topic exists.")
@click.option("--if-exists", is_flag=True, help="--alter/--delete: do nothing if the topic does not exist.")
@click.option("--json", "json_output", is_flag=True, help="--list/--describe: write JSON Lines.")
def topics(
    path: Path,
    create: str | None,
    list_: bool,
    describe: str | None,
    alter: str | None,
    delete: str | None,
    partitions: int | None,
    configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    if_not_exists: bool,
    if_exists: bool,
    json_output: bool,
) -> None:
    """Create, list, describe, change and delete topics in a data directory.

    Topic configs are Kafka's (segment.bytes, retention.ms,
    retention.bytes, cleanup.policy, compression.type, ...). Describing
    and listing take no lock; the other actions need the directory's lock
    (exit 75 while a producer runs).

    \b
    Examples:
      kafkalog topics data --create orders --partitions 3 \\
          --config retention.ms=86400000
      kafkalog topics data --list
      kafkalog topics data --describe orders
      kafkalog topics data --alter orders --config retention.bytes=1073741824 \\
          --delete-config retention.ms
      kafkalog topics data --alter orders --partitions 6
      kafkalog topics data --delete orders
    """
    actions = [a for a in (create, alter, delete) if a is not None] + [
        x for x in (describe,) if x is not None
    ]
    if list_:
        actions.append("list")
    if len(actions) > 1:
        raise click.UsageError("give one of --create, --list, --describe, --alter, --delete")
    config: dict[str, Any] = {k: _typed(v) for k, v in parse_key_values(configs).items()}
    if (config or partitions) and create is None and alter is None:
        raise click.UsageError("--config and --partitions go with --create or --alter")
    if delete_configs and alter is None:
        raise click.UsageError("--delete-config goes with --alter")
    _check_configs(config)
    if create is not None:
        _create(path, create, partitions or 1, config, if_not_exists)
        return
    require_dir(path)
    if alter is not None:
        if not config and not delete_configs and partitions is None:
            raise click.UsageError("--alter needs --config, --delete-config or --partitions")
        _alter(path, alter, config, delete_configs, partitions, if_exists)
    elif delete is not None:
        _delete(path, delete, if_exists)
    else:
        objs = describe_topics(path, describe or None, with_partitions=describe is not None)
        if json_output:
            for obj in objs:
                click.echo(json_dumps(obj))
        elif describe is not None:
            _print_describe(objs)
        else:
            for obj in objs:
                click.echo(obj["topic"])


def _create(path: Path, name: str, partitions: int, config: dict[str, Any], if_not_exists: bool) -> None:
    if path.exists() and not path.is_dir():
        raise CliError(f"{path}: not a directory", 66)
    with open_manager(path) as mgr:
        try:
            mgr.create_topic(name, partitions, config)
        except TopicExistsError:
            if if_not_exists:
                return
            raise CliError(f"topic {name!r} already exists in {path}") from None
        except _BAD_INPUT as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    click.echo(f"Created topic {name}.")


def _alter(
    path: Path,
    name: str,
    config: dict[str, Any],
    delete_configs: tuple[str, ...],
    partitions: int | None,
    if_exists: bool,
) -> None:
    with open_manager(path) as mgr:
        try:
            current = mgr.num_partitions(name)
        except UnknownTopicOrPartitionError:
            if if_exists:
                return
            raise CliError(f"topic {name!r} does not exist in {path}") from None
        changes: dict[str, Any] = dict(config)
        changes.update({key: None for key in delete_configs})
        try:
            if changes:
                mgr.alter_topic_config(name, changes)
                click.echo(f"Updated config for topic {name}.")
            if partitions is not None and partitions != current:
                mgr.add_partitions(name, partitions)
                click.echo(f"Topic {name} now has {partitions} partitions.")
        except _BAD_INPUT as exc:
            raise CliError(str(exc), EXIT_USAGE) from None


def _delete(path: Path, name: str, if_exists: bool) -> None:
    with open_manager(path) as mgr:
        try:
            mgr.delete_topic(name)
        except UnknownTopicOrPartitionError:
            if if_exists:
                return
            raise CliError(f"topic {name!r} does not exist in {path}") from None
        try:
            mgr.delete_logs()
        except KafkaError as exc:  # the directories are renamed -delete; the next open removes them
            message = f"topic {name!r} deleted, but its files could not be removed yet: {exc}"
            raise CliError(message, EXIT_FAULT) from None
    click.echo(f"Deleted topic {name}.")
