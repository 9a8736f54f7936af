"""Entry point of the ``kafkalog`` command: the click group that the tool subcommands attach to."""

from __future__ import annotations

import click

from kafkalog import __version__

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafkalog")
def cli() -> None:
    """kafkalog: Kafka's partition log storage engine, in Python.

    Tools for Kafka log directories: dump segment files, and (as they land) produce, consume,
    inspect, verify, recover and apply retention.
    """


def main() -> None:
    """Console-script entry point."""
    cli()


from kafkalog.cli.dump import dump  # noqa: E402 - subcommands register after the group exists

cli.add_command(dump)
