"""Entry point of the ``kafkalog`` command: the click group that the tool subcommands attach to.

Each subcommand lives in its own module (``dump``, ``produce``, ``consume``, ``topics``, ``info``, ``verify``,
``recover``, ``retention``, ``compact``, ``serve``), imported on first use (:data:`COMMANDS`) so that ``--help`` and ``--version`` start
fast; :mod:`kafkalog.cli.common` holds the exit codes they share.
"""

from __future__ import annotations

import importlib
from typing import Final

import click

from kafkalog import __version__
from kafkalog.cli.common import CONTEXT_SETTINGS, EXIT_CODES_HELP, KafkalogGroup, setup_logging

__all__ = ["COMMANDS", "cli", "main"]

_EPILOG = (
    EXIT_CODES_HELP
    + """

\b
Examples:
  kafkalog topics data --create orders --partitions 3
  printf 'k1\\thello\\nk2\\tworld\\n' | kafkalog produce data orders --parse-key
  kafkalog consume data orders --from-beginning --property print.key=true
  kafkalog info data
  kafkalog verify data
  kafkalog compact data users --roll
  kafkalog serve data --listen 127.0.0.1:9092
  kafkalog dump data/orders-0/00000000000000000000.log --print-data-log

Run "kafkalog COMMAND --help" for the options of a command."""
)


#: Subcommand name -> module defining a click command of that name (imported on first use).
COMMANDS: Final = {
    "compact": "kafkalog.cli.compact",
    "consume": "kafkalog.cli.consume",
    "dump": "kafkalog.cli.dump",
    "info": "kafkalog.cli.info",
    "produce": "kafkalog.cli.produce",
    "recover": "kafkalog.cli.recover",
    "retention": "kafkalog.cli.retention",
    "serve": "kafkalog.cli.serve",
    "topics": "kafkalog.cli.topics",
    "verify": "kafkalog.cli.verify",
}


class _LazyGroup(KafkalogGroup):
    """Imports a subcommand's module only when the subcommand is used (or listed by ``--help``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand, sorted."""
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand, imported on first use."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            module = importlib.import_module(COMMANDS[cmd_name])
            command = getattr(module, cmd_name)
            assert isinstance(command, click.Command)
            self.add_command(command)
        return command


@click.group(cls=_LazyGroup, context_settings=CONTEXT_SETTINGS, epilog=_EPILOG)
@click.version_option(__version__, prog_name="kafkalog")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="warning",
    show_default=True,
    help="Messages of the storage engine shown on stderr (info: what recovery and retention do).",
)
def cli(log_level: str) -> None:
    """kafkalog: Kafka's partition log storage engine, in Python.

    Tools for Kafka log directories. DIR is a data directory (Kafka's
    log.dirs entry: it holds one <topic>-<partition> directory per
    partition); some commands also take one partition directory.
    """
    setup_logging(log_level)


def main() -> None:
    """Console-script entry point."""
    cli()
