"""A data dir with tiered storage names its archive (``kafkalog-tiered-storage.json``: URL, layout, key prefix,
never a credential), and the read-only side reads the data dir and that archive as one history without being
told where the archive is: ``ReadOnlyDataDir``, ``consume``/``info``/``verify`` and the Spark source's spec."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkalog.cli.main import cli
from kafkalog.datadir import (
    TIERED_STORAGE_FILE,
    ArchiveLocation,
    read_archive_location,
    write_archive_location,
)
from kafkalog.errors import KafkaError
from kafkalog.log import Log, LogConfig
from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog, recorded_archive_url
from kafkalog.records import SimpleRecord
from kafkalog.records.columnar import iter_columnar
from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"
SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def _fill(log: Log, batches: int) -> None:
    for i in range(batches):
        log.append([SimpleRecord(b"value-%d-%d" % (i, j), b"k%d" % j, 1_000 + i) for j in range(4)])


@pytest.fixture
def memory_name(tmp_path: Path) -> Iterator[str]:
    name = f"archive-{tmp_path.name}"
    yield name
    forget_memory_store(name)


def _tiered_data_dir(tmp_path: Path, url: str, key_prefix: str) -> tuple[Path, list[int]]:
    """A data dir whose partition ``t-0`` has its oldest segments only in the archive at ``url`` (Aiven layout
    under ``key_prefix``), as after local retention; returns the data dir and every record's offset."""
    data = tmp_path / "data"
    part = data / "t-0"
    log = Log.open(part, SMALL)
    _fill(log, 60)
    log.roll()
    end = log.log_end_offset
    log.close()
    store = open_store(url)
    segments = segments_from_log_dir(part)
    for seg in segments:
        write_aiven_segment(store, seg, topic="t", topic_id=TOPIC_ID, partition=0, prefix=key_prefix)
    for seg in segments[:3]:  # local retention deleted these: only the archive has them
        for path in part.glob(f"{seg.base_offset:020d}.*"):
            path.unlink()
    write_archive_location(data, ArchiveLocation(url, "aiven", key_prefix))
    return data, list(range(end))


def _offsets(rl: ReadOnlyLog) -> list[int]:
    out: list[int] = []
    start, end = rl.log_start_offset, rl.log_end_offset
    for chunk in rl.iter_batch_chunks(start, end):
        for batch in iter_columnar(chunk.data, start_offset=start, end_offset=end):
            out.extend(batch.column("offset").to_pylist())
    return out


@pytest.mark.parametrize("key_prefix", ["", "tiered/", "kafka-"])
def test_the_recorded_archive_is_read_with_the_local_segments(
    tmp_path: Path, memory_name: str, key_prefix: str
) -> None:
    """Directory and free-form ``rsm.config.key.prefix`` values both find the archive."""
    data, offsets = _tiered_data_dir(tmp_path, f"memory://{memory_name}", key_prefix)
    assert ReadOnlyLog.open(data / "t-0").log_start_offset > 0  # the local files alone have lost the start
    history = ReadOnlyDataDir(data).log("t", 0)
    assert history.log_start_offset == 0
    assert _offsets(history) == offsets
    local_only = ReadOnlyDataDir(data, recorded_archive=False).log("t", 0)
    assert local_only.log_start_offset > 0


def test_the_record_never_holds_a_credential(tmp_path: Path) -> None:
    location = ArchiveLocation(
        "s3://AKIAXX:sup3rsecret@bucket/prefix?X-Amz-Signature=abc#frag", "aiven", "p/"
    )
    write_archive_location(tmp_path, location)
    raw = (tmp_path / TIERED_STORAGE_FILE).read_text()
    assert "sup3rsecret" not in raw and "AKIAXX" not in raw and "Signature" not in raw
    assert json.loads(raw) == {
        "version": 1,
        "url": "s3://bucket/prefix",
        "layout": "aiven",
        "key_prefix": "p/",
    }
    assert read_archive_location(tmp_path) == ArchiveLocation("s3://bucket/prefix", "aiven", "p/")
    assert recorded_archive_url(tmp_path) == "s3://bucket/prefix"
    write_archive_location(tmp_path, None)
    assert read_archive_location(tmp_path) is None and recorded_archive_url(tmp_path) is None


def test_a_malformed_record_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / TIERED_STORAGE_FILE).write_text('{"version": 1, "url": 5}')
    with pytest.raises(KafkaError, match=TIERED_STORAGE_FILE):
        read_archive_location(tmp_path)


def test_consume_info_and_verify_see_one_history(tmp_path: Path, memory_name: str) -> None:
    data, offsets = _tiered_data_dir(tmp_path, f"memory://{memory_name}", "")
    runner = CliRunner()
    out = runner.invoke(
        cli,
        ["consume", str(data), "t", "--from-beginning", "--format", "json"],
    )
    assert out.exit_code == 0, out.output
    seen = [json.loads(line)["offset"] for line in out.output.splitlines() if line.startswith("{")]
    assert seen == offsets
    info = runner.invoke(cli, ["info", str(data), "--json"])
    assert info.exit_code == 0, info.output
    part = next(json.loads(x) for x in info.output.splitlines() if json.loads(x)["type"] == "partition")
    assert part["logStartOffset"] == 0 and part["logEndOffset"] == len(offsets)
    verify = runner.invoke(cli, ["verify", str(data), "--json"])
    assert verify.exit_code == 0, verify.output
    assert "with its archive" in verify.output


def test_the_spark_source_ships_the_storage_options_of_a_tiered_data_dir(
    tmp_path: Path, memory_name: str
) -> None:
    from kafkalog.spark.options import parse_source_options

    data, _ = _tiered_data_dir(tmp_path, f"memory://{memory_name}", "")
    opts = parse_source_options(
        {"path": str(data), "subscribe": "t", "fs.s3a.access.key": "k"}, streaming=False
    )
    spec = opts.remote_spec(str(data))
    assert spec is not None and dict(spec.options) == {"fs.s3a.access.key": "k"}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert opts.remote_spec(str(plain)) is None


def test_the_record_of_an_azure_archive_keeps_its_container(tmp_path: Path) -> None:
    """``abfss://container@account.dfs.core.windows.net/path``: the part before ``@`` is the container, not a
    credential. The record dropped it (the read-only side then looked in a container named after the account);
    the SAS token in the query string still goes."""
    url = "abfss://tiered@account.dfs.core.windows.net/prefix?sv=2022&sig=SAS-SECRET"
    write_archive_location(tmp_path, ArchiveLocation(url, "aiven", ""))
    raw = (tmp_path / TIERED_STORAGE_FILE).read_text()
    assert "SAS-SECRET" not in raw
    assert recorded_archive_url(tmp_path) == "abfss://tiered@account.dfs.core.windows.net/prefix"
