"""The package's metadata as an index page shows it (issue #23 item 11): the long description (the README
rendered by ``hatch_build.py``) has no relative link, the ``docs/`` files it names ship with the package, and
there is no project URL (the project has none to give)."""

from __future__ import annotations

import re
from pathlib import Path

import hatch_build
import pytest
from hatchling.metadata.core import ProjectMetadata
from hatchling.plugin.manager import PluginManager

from kafkalog.docs import docs_dir

ROOT = Path(__file__).resolve().parents[1]


def link_targets(markdown: str) -> list[str]:
    """Every link target of ``markdown`` outside fenced code and code spans: inline links and images, HTML
    ``href``/``src``, reference definitions (this test's own reading, not hatch_build's)."""
    prose = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", "", markdown, flags=re.S | re.M)
    prose = re.sub(r"(`+).+?\1", "", prose)
    return [
        *re.findall(r"\]\(\s*<?([^)\s>]+)", prose),
        *re.findall(r"""(?:href|src)\s*=\s*["']?([^"'\s>]+)""", prose, flags=re.I),
        *re.findall(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", prose, flags=re.M),
    ]


def relative(targets: list[str]) -> list[str]:
    return [t for t in targets if not re.match(r"(https?|mailto):", t)]


@pytest.fixture(scope="module")
def metadata() -> ProjectMetadata:
    return ProjectMetadata(str(ROOT), PluginManager())


def test_the_long_description_has_no_relative_link(metadata: ProjectMetadata) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert relative(link_targets(readme))  # the README itself links to docs/ and its sections
    description = metadata.core.readme
    assert metadata.core.readme_content_type == "text/markdown"
    assert description.startswith("# kafkalog\n")
    assert relative(link_targets(description)) == []
    assert "python -m kafkalog.docs" in description  # the note saying where docs/ is installed


def test_the_docs_the_description_names_ship_with_the_package(metadata: ProjectMetadata) -> None:
    named = set(re.findall(r"`docs/([\w./-]+\.md)`", metadata.core.readme))
    assert {
        "architecture.md",
        "formats.md",
        "operations.md",
        "server.md",
        "spark.md",
        "benchmarks.md",
    } <= named
    shipped = docs_dir()
    assert all((shipped / name).is_file() for name in named), named
    # the wheel installs the repository's docs/ as kafkalog/docs/ (make wheel-smoke checks the installed copy)
    wheel = metadata.hatch.build_targets["wheel"]
    assert wheel["force-include"]["docs"] == "kafkalog/docs"


def test_no_project_url_points_nowhere(metadata: ProjectMetadata) -> None:
    assert metadata.core.urls == {}


def test_the_rendering_rewrites_prose_only_and_refuses_what_it_cannot_rewrite() -> None:
    readme = (
        "# t\n\nSee [formats.md §4](docs/formats.md#4-x), [docs/spark.md](docs/spark.md), the [limits](docs/"
        "operations.md#9-limits) and [Install](#install); [Kafka](https://kafka.apache.org/) stays.\n"
        "```bash\necho '[a](docs/x.md)'\n```\nA span: `[b](docs/y.md)`.\n"
    )
    out = hatch_build.render_long_description(readme)
    assert "`docs/formats.md` §4" in out
    assert "`docs/spark.md`," in out
    assert "the limits (`docs/operations.md`)" in out
    assert "and *Install*;" in out
    assert "[Kafka](https://kafka.apache.org/) stays" in out
    assert "echo '[a](docs/x.md)'" in out and "`[b](docs/y.md)`" in out  # code is left as it is
    assert relative(link_targets(out)) == []
    for bad in ("![chart](docs/benchmarks/log.png)", '<a href="docs/x.md">x</a>', "[x]: docs/x.md"):
        with pytest.raises(ValueError, match="relative"):
            hatch_build.render_long_description(f"# t\n\n{bad}\n")


def test_the_shipped_docs_link_only_to_each_other() -> None:
    """The docs installed as ``kafkalog/docs/`` keep their relative links: each must resolve inside ``docs/``
    (a link to ``../README.md`` or to a source file would break in the installed copy)."""
    docs = ROOT / "docs"
    broken = []
    for page in sorted(docs.glob("*.md")):
        for target in relative(link_targets(page.read_text(encoding="utf-8"))):
            path = target.split("#", 1)[0]
            if path and not ((docs / path).resolve().is_relative_to(docs) and (docs / path).is_file()):
                broken.append(f"{page.name}: {target}")
    assert broken == []
