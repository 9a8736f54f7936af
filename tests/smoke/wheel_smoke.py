"""Smoke test of an installed wheel (``make wheel-smoke``): run by the wheel venv's interpreter, never by
pytest, with that venv *not* activated (its ``bin`` is not on ``PATH``, no ``PYSPARK_PYTHON``).

Runs the README's command-line block as printed (except the two lines that never exit: ``consume --follow``
and ``serve``) with ``kafkalog`` taken from this interpreter's ``bin``, then a Spark read through the
auto-registered data source set up the way the README's Spark section says (``PYSPARK_PYTHON``). First, what an
index page shows: the installed metadata's long description has no relative link and no project URL, and
every ``docs/…`` file it names is in the directory ``python -m kafkalog.docs`` prints, inside the package.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

README = Path(sys.argv[1])


def readme_cli_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Command line\n+```bash\n(.*?)```", text, flags=re.S)
    assert block is not None, "README has no command-line block"
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and "--follow" not in line and "kafkalog serve" not in line]


def check_index_page() -> None:
    """The wheel's METADATA as an index page shows it (see the module doc)."""
    from importlib.metadata import metadata

    meta = metadata("kafkalog")
    description = str(meta.json["description"])
    assert meta.get_all("Project-URL") is None, meta.get_all("Project-URL")
    prose = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", "", description, flags=re.S | re.M)
    prose = re.sub(r"(`+).+?\1", "", prose)
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)", prose) + re.findall(
        r"(?:href|src)\s*=\s*[\"']?([^\"'\s>]+)", prose
    )
    relative = [t for t in targets if not re.match(r"(https?|mailto):", t)]
    assert not relative, f"relative links in the long description: {relative}"
    shown = subprocess.run(
        [sys.executable, "-m", "kafkalog.docs"], capture_output=True, text=True, check=True
    ).stdout.strip()
    docs = Path(shown)
    assert docs.parts[-2:] == ("kafkalog", "docs") and "site-packages" in docs.parts, docs
    named = set(re.findall(r"`docs/([\w./-]+\.md)`", description))
    missing = [name for name in sorted(named) if not (docs / name).is_file()]
    assert named and not missing, (named, missing)
    print(f"wheel-smoke: long description without relative links; its {len(named)} docs/ files are in {docs}")


def main() -> None:
    bin_dir = Path(sys.executable).parent
    assert str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep), "the venv must not be activated"
    check_index_page()
    work = Path(tempfile.mkdtemp(prefix="kafkalog-wheel-smoke-"))
    for line in readme_cli_lines():
        command = re.sub(r"(^|\| )kafkalog ", lambda m: f"{m.group(1)}{bin_dir / 'kafkalog'} ", line)
        done = subprocess.run(["sh", "-c", command], cwd=work, capture_output=True, text=True, check=False)
        print(f"wheel-smoke: exit {done.returncode}: {line}")
        if done.returncode != 0:
            sys.exit(f"wheel-smoke: README line failed: {line}\n{done.stderr}")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # what the README's Spark section says to do
    from pyspark.sql import SparkSession

    import kafkalog.spark

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    try:
        kafkalog.spark.check_workers(spark)
        rows = spark.read.format("kafkalog").option("subscribe", "orders").load(str(work / "data")).collect()
        assert sorted((r.key, r.value) for r in rows) == [(b"k1", b"hello"), (b"k2", b"world")], rows
    finally:
        spark.stop()
    print(f"wheel-smoke: Spark read {len(rows)} rows through the auto-registered data source")
    check_cloud_extra(work)


def check_cloud_extra(work: Path) -> None:
    """The ``cloud`` extra installed from the wheel: obstore imports lazily and a store opens (no I/O)."""
    from kafkalog.objstore import open_store
    from kafkalog.objstore.cloud import ObstoreStore

    store = open_store("s3a://bucket/prefix", {"fs.s3a.endpoint": "http://127.0.0.1:1"})
    assert isinstance(store, ObstoreStore), store
    local = open_store(str(work))
    assert local.list("").objects or local.list("").prefixes, local
    print(f"wheel-smoke: kafkalog[cloud] opens {store!r}")


if __name__ == "__main__":
    main()
