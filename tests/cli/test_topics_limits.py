"""``kafkalog topics`` under the partition limits, and over a registry whose stored count is absurd."""

from __future__ import annotations

import json
from pathlib import Path

from kafkalog.datadir import TOPICS_FILE

from .helpers import json_lines, run


def test_topics_create_past_the_partition_limit_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = run("topics", data, "--create", "big", "--partitions", "1001")
    assert result.exit_code == 64
    assert "max.partitions.per.request is 1000" in result.stderr
    assert not [p for p in data.iterdir() if p.name.startswith("big")]
    assert run("topics", data).stdout.splitlines() == []


def test_topics_count_the_directories_not_an_absurd_stored_count(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("topics", data, "--create", "t", "--partitions", "2").exit_code == 0
    doc = json.loads((data / TOPICS_FILE).read_text())
    doc["topics"]["t"]["partitions"] = 2**31 - 1
    doc["topics"]["ghost"] = {"partitions": 400, "config": {}}
    (data / TOPICS_FILE).write_text(json.dumps(doc))
    (data / "t-2000000000").mkdir()
    listed = json_lines(run("topics", data, "--json").stdout)  # read-only: the file is not corrected
    assert [(o["topic"], o["partitionCount"]) for o in listed] == [("t", 2)]
    described = json_lines(run("topics", data, "--describe", "t", "--json").stdout)[0]
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
