"""The main job (``make demo``) end to end with a small number of events, in a subprocess as ``make`` runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]


def _skip_reason() -> str | None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'kafkalog[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime on PATH (Spark needs Java 17 or 21)"
    return None


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "kafkalog.demo", "--master", "local[1]", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )


def test_demo_runs_and_checks_its_results(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    data = tmp_path / "demo"
    proc = run_demo("--events", "5000", "--users", "300", "--partitions", "2", "--data-dir", str(data))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    for text in ("kafkalog demo: timings", "produce", "batch", "stream", "all checks passed"):
        assert text in out, out[-4000:]
    assert (data / "events-0" / "00000000000000000000.log").is_file()
    assert (data / "user-stats-1").is_dir() and (data / "purchases-0").is_dir()
    assert not list((data / ".kafkalog-spark" / "staging").rglob("*.batches"))

    # a directory the demo did not make is refused, untouched
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    proc = run_demo("--events", "10", "--data-dir", str(foreign))
    assert proc.returncode != 0 and "not made by the demo" in proc.stderr
    assert (foreign / "precious.txt").read_text() == "keep me"


def _correct_rows(expected: Any) -> dict[str, dict[str, Any]]:
    """user-stats rows as a correct pipeline writes them (Spark's to_json: ISO timestamps, amount in units)."""
    from datetime import UTC, datetime

    def iso(ms: int) -> str:
        return (
            datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )

    return {
        f"u{u:06d}": {
            "events": t.events,
            "purchases": t.purchases,
            "spent": round(t.spent_cents / 100, 2),
            "first_seen": iso(t.first_seen),
            "last_seen": iso(t.last_seen),
        }
        for u, t in expected.per_user.items()
    }


def test_user_stats_check_catches_a_wrong_aggregate() -> None:
    """The demo's per-user check (no Spark needed): correct rows pass; one wrong number in any field, a missing
    user or an extra one fails it, by name."""
    from kafkalog.demo import EventGenerator, Expected, check_user_stats

    expected = Expected()
    gen = EventGenerator(users=50, partitions=2)
    for _ in gen.chunk(2000, 1_700_000_000_000, 3_600_000, expected):
        pass
    rows = _correct_rows(expected)
    assert len(rows) == len(expected.per_user) > 10
    assert sum(int(r["events"]) for r in rows.values()) == 2000
    assert check_user_stats(rows, expected) == []

    user = max(rows, key=lambda u: rows[u]["purchases"])
    for field, wrong in [("events", 1), ("purchases", 1), ("spent", 0.01)]:
        bad = {u: dict(r) for u, r in rows.items()}
        bad[user][field] += wrong
        problems = check_user_stats(bad, expected)
        assert len(problems) == 1 and problems[0].startswith(user), (field, problems)
    bad = {u: dict(r) for u, r in rows.items()}
    bad[user]["last_seen"] = (
        bad[user]["first_seen"] if bad[user]["events"] > 1 else "1970-01-01T00:00:00.000Z"
    )
    assert [p.split(":")[0] for p in check_user_stats(bad, expected)] == [user]
    missing = {u: r for u, r in rows.items() if u != user}
    assert check_user_stats(missing, expected) == [f"{user}: no aggregate written"]
    extra = {**rows, "u999999": rows[user]}
    assert check_user_stats(extra, expected) == ["u999999: aggregate for a user with no events"]
