"""``kafkalog serve DIR``: serve a data directory to Kafka clients over Kafka's wire protocol.

One node (id 0 by default) leads every partition; clients bootstrap from ``--listen`` (127.0.0.1:9092 by
default: loopback only unless another address is given). The directory's lock is held while serving (other
writers get exit 75; readers such as ``consume``, ``info`` and ``verify`` work). SIGTERM or SIGINT (Ctrl-C)
shuts down gracefully: in-flight requests finish, then every log is flushed, the checkpoints and the
clean-shutdown marker are written, so the next start scans nothing; exit 0.

``--config KEY=VALUE`` sets default topic configs (Kafka's topic names, e.g. ``retention.ms``); ``--set
KEY=VALUE`` sets broker settings by Kafka's names: the server's (``socket.request.max.bytes``,
``auto.create.topics.enable``, ``node.id``, ``advertised.host``, ``num.io.threads``) and the LogManager's
(``num.partitions``, ``log.retention.check.interval.ms``, ...), tiered storage's included
(``remote.log.storage.system.enable``, ``remote.log.manager.task.interval.ms``, ``rsm.config.storage.url``,
``rsm.config.storage.fs.s3a.*``, ``rsm.config.key.prefix``, ...: docs/operations.md §9). ``--properties FILE``
reads broker settings from a ``server.properties``-style file first (``KEY=VALUE`` or ``KEY: VALUE`` lines,
``#``/``!`` comments); ``--set`` overrides it. Storage credentials belong in that file (readable by the
server's user only), not on the command line, where other users see them in the process list.
"""

from __future__ import annotations

from pathlib import Path

import click

from kafkalog.cli.common import CONTEXT_SETTINGS, EXIT_CODES_HELP, KafkalogCommand, parse_key_values

__all__ = ["read_properties", "serve"]


def read_properties(path: Path) -> dict[str, str]:
    """A ``server.properties``-style file: ``KEY=VALUE`` or ``KEY: VALUE`` per line, ``#`` and ``!`` comment
    lines, blank lines ignored, keys and values stripped. A line without a separator is a usage error naming
    its line number only (a value may be a secret)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {path}: {exc.strerror or exc}", param_hint="--properties"
        ) from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise click.BadParameter(
                f"{path}, line {number}: expected KEY=VALUE or KEY: VALUE", param_hint="--properties"
            )
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


@click.command(
    "serve",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
    short_help="Serve a data directory over Kafka's wire protocol.",
)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--listen",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on (port 0 picks a free port).",
)
@click.option(
    "--advertised-host", default=None, help="Host name given to clients (default: the listen host)."
)
@click.option(
    "--auto-create-topics/--no-auto-create-topics",
    default=None,
    help="Create unknown topics on Metadata requests (Kafka's auto.create.topics.enable; off by default).",
)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Default topic config.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Broker setting (Kafka names).")
@click.option(
    "--properties",
    "properties_file",
    default=None,
    metavar="FILE",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Broker settings from a server.properties-style file (read first; --set overrides).",
)
def serve(
    path: Path,
    listen: str,
    advertised_host: str | None,
    auto_create_topics: bool | None,
    configs: tuple[str, ...],
    settings: tuple[str, ...],
    properties_file: Path | None,
) -> None:
    """Serve DIR to Kafka clients until SIGTERM or SIGINT.

    \b
    Example:
      kafkalog serve data --listen 127.0.0.1:9092
      kafka-console-producer.sh --bootstrap-server 127.0.0.1:9092 --topic orders
    """
    from kafkalog.server.config import ServerConfig, parse_listen
    from kafkalog.server.server import serve as run

    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--listen") from None
    broker = {} if properties_file is None else read_properties(properties_file)
    broker.update(parse_key_values(settings, "--set"))
    server_names = ServerConfig.known_names()
    server_props = {k: v for k, v in broker.items() if k in server_names}
    manager_props = {k: v for k, v in broker.items() if k not in server_names}
    extra: dict[str, object] = {"host": host, "port": port}
    if advertised_host is not None:
        extra["advertised_host"] = advertised_host
    if auto_create_topics is not None:
        extra["auto_create_topics"] = auto_create_topics
    config = ServerConfig.from_props(server_props, **extra)
    run(path, config, log_config=parse_key_values(configs), manager_config=manager_props)
