"""``kafkalog serve --properties FILE``: broker settings (tiered storage's credentials among them) from a
``server.properties``-style file, never from the command line; ``--set`` overrides the file."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from kafkalog.cli.serve import read_properties


def test_a_properties_file_reads_as_kafka_reads_server_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# tiered storage\n"
        "! also a comment\n"
        "\n"
        "remote.log.storage.system.enable=true\n"
        "rsm.config.storage.url = s3://bucket/prefix\n"
        "rsm.config.storage.fs.s3a.secret.key: a=b:c\n"
    )
    assert read_properties(path) == {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.url": "s3://bucket/prefix",
        "rsm.config.storage.fs.s3a.secret.key": "a=b:c",
    }


def test_a_malformed_line_is_named_by_number_never_echoed(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=0\nsup3rsecretvalue\n")
    with pytest.raises(click.BadParameter) as info:
        read_properties(path)
    assert "line 2" in str(info.value) and "sup3rsecret" not in str(info.value)
