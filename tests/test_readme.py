"""The README's Python examples only import what kafkalog or a documented extra installs, and the
embedded-server example runs as printed (issue 23 item 8)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)

#: distribution name -> top-level module, for the runtime dependencies and user-facing extras
MODULES = {
    "crc32c": "crc32c",
    "zstandard": "zstandard",
    "lz4": "lz4",
    "cramjam": "cramjam",
    "numpy": "numpy",
    "numba": "numba",
    "click": "click",
    "rich": "rich",
    "pyarrow": "pyarrow",
    "pyspark": "pyspark",
    "prometheus-client": "prometheus_client",
    "kafka-python": "kafka",
}
USER_EXTRAS = ("arrow", "spark", "metrics", "server")


def _installable_modules() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in USER_EXTRAS:
        requirements += project["optional-dependencies"][extra]
    names = {re.split(r"[<>=!\[ ;]", r, maxsplit=1)[0].strip().lower() for r in requirements}
    return {MODULES[n] for n in names} | {"kafkalog", "pyspark_kafkalog"}


def _imports(code: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_readme_examples_import_only_documented_dependencies() -> None:
    assert BLOCKS
    allowed = _installable_modules() | set(sys.stdlib_module_names)
    for code in BLOCKS:
        try:
            imported = _imports(code)
        except SyntaxError:  # fragments such as `spark.read...` continuation lines
            continue
        assert imported <= allowed, (
            f"README imports {sorted(imported - allowed)}, which no documented extra installs"
        )


def test_readme_embedded_server_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("kafka")
    (example,) = [code for code in BLOCKS if "KafkaServer(" in code]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    from kafkalog.manager import LogManager

    with LogManager.open(tmp_path / "data", background=False) as mgr:
        assert sum(mgr.get_log("orders", p).log_end_offset for p in range(3)) == 1


def test_data_directory_picture_is_drawn_from_a_real_directory() -> None:
    """The "What a data directory looks like" picture is what ``python -m kafkalog.cli.layout`` draws today
    (``make readme-layout`` regenerates it), so it cannot drift from the files kafkalog writes."""
    from kafkalog.cli.layout import example_tree

    section = README.split("## What a data directory looks like\n", 1)[1]
    picture = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert picture is not None
    assert picture.group(1).splitlines() == example_tree()
