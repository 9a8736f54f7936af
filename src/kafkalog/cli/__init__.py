"""The ``kafkalog`` command line (click): one command with a subcommand per tool."""

from __future__ import annotations

from kafkalog.cli.main import cli, main

__all__ = ["cli", "main"]
