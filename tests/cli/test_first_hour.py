"""What a new user meets first: the examples of ``kafkalog --help`` work as printed, and a command whose
optional dependency is missing names the extra to install instead of a traceback (issue 23 items 8, 9)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from kafkalog.cli.main import cli


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_help_examples_run_as_printed(tmp_path: Path) -> None:
    help_text = CliRunner().invoke(cli, ["--help"]).output
    examples = [line.strip() for line in help_text.split("Examples:")[1].splitlines() if line.strip()]
    create, produce, consume = examples[0], examples[1], examples[2]
    assert create.startswith("kafkalog topics") and "produce" in produce and "consume" in consume
    for line in (create, produce):
        result = _shell(line, tmp_path)
        assert result.returncode == 0, (line, result.stderr)
    assert "produced 2 records" in result.stderr and "b'" not in result.stderr
    shown = _shell(consume, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert sorted(shown.stdout.splitlines()) == ["k1\thello", "k2\tworld"]


_WITHOUT_KAFKA = "import sys; sys.modules['kafka'] = None\nfrom kafkalog.cli.main import main\nmain()\n"


def test_serve_without_the_server_extra_names_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_KAFKA, "serve", str(tmp_path), "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "pip install 'kafkalog[server]'" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2


def test_spark_data_source_without_the_spark_extra_names_it() -> None:
    code = "import sys; sys.modules['pyspark'] = None\nfrom kafkalog.spark import KafkaLogDataSource\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1
    assert "pip install 'kafkalog[spark]'" in result.stderr.strip().splitlines()[-1]
