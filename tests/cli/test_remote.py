"""``kafkalog info|verify|consume URL --storage-option KEY=VALUE``: a copy of a data directory in object storage
reads as the local directory it was copied from (same records, offsets, verify verdict), a prefix that holds
nothing exits 66, and storage options never show in output or errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store

from .helpers import json_lines, run, run_process, write_partition


def copy_tree(root: Path, store: Any, prefix: str = "") -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            key = path.relative_to(root).as_posix()
            store.put(f"{prefix}/{key}" if prefix else key, path.read_bytes())


@pytest.fixture
def copied(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A data directory (two partitions, transactions, several segments) and its copy at ``memory://...``."""
    data = tmp_path / "data"
    write_partition(data / "orders-0")
    write_partition(data / "orders-1", batches=25)
    name = f"cli-{tmp_path.name}"
    copy_tree(data, open_store(f"memory://{name}"))
    yield data, f"memory://{name}"
    forget_memory_store(name)


def test_consume_a_url_prints_what_the_local_directory_holds(copied: tuple[Path, str]) -> None:
    data, url = copied
    for args in (
        ("--from-beginning",),
        ("--from-beginning", "--isolation-level", "read_committed", "--format", "json"),
        ("--offset", "30", "--partition", "1", "--property", "print.offset=true,print.key=true"),
    ):
        local = run("consume", data, "orders", *args)
        remote = run("consume", url, "orders", *args)
        assert local.exit_code == remote.exit_code == 0, remote.stderr
        assert remote.stdout == local.stdout and local.stdout.count("\n") > 20


def test_info_and_verify_of_a_url(copied: tuple[Path, str]) -> None:
    data, url = copied
    local = {
        (o["topic"], o["partition"]): o
        for o in json_lines(run("info", data, "--json").stdout)
        if o["type"] == "partition"
    }
    remote_run = run("info", url, "--json")
    assert remote_run.exit_code == 0, remote_run.stderr
    remote = {
        (o["topic"], o["partition"]): o for o in json_lines(remote_run.stdout) if o["type"] == "partition"
    }
    assert set(remote) == set(local) == {("orders", 0), ("orders", 1)}
    for key, theirs in local.items():
        ours = remote[key]
        assert ours["path"] == f"{url}/orders-{key[1]}"
        for field in (
            "logStartOffset",
            "logEndOffset",
            "highWatermark",
            "lastStableOffset",
            "segments",
            "producerSnapshotOffset",
            "producers",
            "leaderEpochs",
            "sizeBytes",
            "error",
        ):
            assert ours[field] == theirs[field], field
    verified = run("verify", url, "--json")
    assert verified.exit_code == 0, verified.stdout
    parts = [o for o in json_lines(verified.stdout) if o["type"] == "partition"]
    assert [(p["partition"], p["faults"]) for p in parts] == [("orders-0", 0), ("orders-1", 0)]
    assert all(p["batches"] > 20 for p in parts)


def test_verify_reports_a_damaged_copy(copied: tuple[Path, str]) -> None:
    _, url = copied
    store = open_store(url)
    key = "orders-0/00000000000000000000.log"
    raw = bytearray(store.get(key))
    raw[200] ^= 0xFF  # inside the first segment's batches: a CRC mismatch (or a bad frame)
    store.put(key, bytes(raw))
    result = run("verify", url, "--json")
    assert result.exit_code == 1
    faults = [o for o in json_lines(result.stdout) if o["type"] == "fault"]
    assert faults and all(f["partition"] == "orders-0" for f in faults)
    assert run("consume", url, "orders", "--from-beginning", "--partition", "0").exit_code == 2


def test_a_url_that_holds_nothing_exits_66_and_options_stay_secret(copied: tuple[Path, str]) -> None:
    _, url = copied
    for command in (["info", url + "-typo"], ["verify", url + "-typo"], ["consume", url + "-typo", "orders"]):
        result = run(*command, "--storage-option", "fs.s3a.secret.key=hunter2-very-secret")
        assert result.exit_code == 66, result.output
        assert "nothing" in result.stderr and "hunter2" not in result.output + result.stderr
    bad = run("info", url, "--storage-option", "hunter2-very-secret")
    assert bad.exit_code == 64 and "hunter2-very-secret" not in bad.stderr
    local_with_option = run("info", "/tmp", "--storage-option", "fs.s3a.endpoint=x")
    assert local_with_option.exit_code == 64


def test_against_a_real_s3_server(tmp_path: Path, s3_server: Any) -> None:
    """The console script against SeaweedFS: options on the command line, the secret never printed."""
    data = tmp_path / "data"
    write_partition(data / "events-0", batches=30)
    bucket = s3_server.make_bucket("cli")
    copy_tree(data, s3_server.open(f"s3://{bucket}"), "backup/cluster1")
    url = f"s3://{bucket}/backup/cluster1"
    options = [a for k, v in s3_server.options().items() for a in ("--storage-option", f"{k}={v}")]
    local = run_process("consume", data, "events", "--from-beginning")
    remote = run_process("consume", url, "events", "--from-beginning", *options)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and remote.stdout.count(b"\n") > 80
    wrong = [*options[:-2], "--storage-option", "fs.s3a.secret.key=not-the-secret-xyz"]
    refused = run_process("info", url, *wrong)
    assert refused.returncode != 0
    assert b"not-the-secret-xyz" not in refused.stderr + refused.stdout
    assert s3_server.secret_key.encode() not in refused.stderr + refused.stdout
    segment = sorted((data / "events-0").glob("*.log"))[0]
    local_dump = run_process("dump", segment, "--deep-iteration")
    remote_dump = run_process("dump", f"{url}/events-0/{segment.name}", "--deep-iteration", *options)
    assert remote_dump.returncode == 0, remote_dump.stderr
    refused_dump = run_process("dump", f"{url}/events-0/{segment.name}", *wrong)
    assert (
        refused_dump.returncode != 0
        and b"not-the-secret-xyz" not in refused_dump.stderr + refused_dump.stdout
    )
    assert remote_dump.stdout == local_dump.stdout.replace(
        str(segment.parent).encode(), f"{url}/events-0".encode()
    )


def test_verify_of_an_archive_reports_orphans_overlaps_and_manifest_disagreements(tmp_path: Path) -> None:
    from dataclasses import replace

    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    written = write_partition(tmp_path / "orders-2", batches=60)
    segments = segments_from_log_dir(written.path)
    assert len(segments) >= 5
    name = f"archive-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    url = f"memory://{name}"
    try:

        def upload(seg: Any, **kw: Any) -> str:
            return write_aiven_segment(
                store, seg, topic="orders", topic_id="MWJ6FHTfRYy67jzwZdeqSQ", partition=2, **kw
            )

        ids = [f"segment{i:02d}AAAAAAAAAAAAA" for i in range(len(segments))]  # 22 characters, as a Kafka Uuid
        for seg, segment_id in zip(segments, ids, strict=True):
            upload(seg, event_timestamp_ms=1, segment_id=segment_id)
        clean = run("verify", url, "--json")
        assert clean.exit_code == 0, clean.stdout
        info = [o for o in json_lines(run("info", url, "--json").stdout) if o["type"] == "partition"]
        assert [
            (o["partition"], o["logStartOffset"], o["logEndOffset"], o["highWatermark"]) for o in info
        ] == [(2, 0, segments[-1].end_offset + 1, segments[-1].end_offset + 1)]
        assert [s["baseOffset"] for s in info[0]["segments"]] == [seg.base_offset for seg in segments]
        consumed = run("consume", url, "orders", "--from-beginning", "--property", "print.offset=true")
        assert consumed.exit_code == 0, consumed.stderr
        local = run("consume", tmp_path, "orders", "--from-beginning", "--property", "print.offset=true")
        end = segments[-1].end_offset
        assert consumed.stdout.splitlines() == [
            line
            for line in local.stdout.splitlines()
            if int(line.split("\t")[0].removeprefix("Offset:")) <= end
        ]
        upload(segments[1], upload_manifest=False)  # an orphan: the upload failed before its manifest
        upload(segments[2], event_timestamp_ms=2)  # a re-upload of the same offsets
        lying = replace(segments[3], end_offset=segments[3].end_offset + 5)
        upload(lying, event_timestamp_ms=1, segment_id=ids[3])  # its manifest lies about its end
        result = run("verify", url, "--json")
        findings = [o for o in json_lines(result.stdout) if o["type"] in ("fault", "warning")]
        text = "\n".join(f"{o['type']}: {o['message']}" for o in findings)
        assert "warning: orphan object" in text
        assert "not read" in text or "two archived segments" in text
        assert f"the manifest says the segment ends at offset {lying.end_offset}" in text, text
        assert result.exit_code == 1
    finally:
        forget_memory_store(name)


def test_consume_of_an_archive_missing_a_segment_exits_2(tmp_path: Path) -> None:
    """A segment missing between archived ones is damage for consume (exit 2 after the records before it),
    not silently fewer records."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    written = write_partition(tmp_path / "orders-0", batches=60, transactions=False)
    segments = segments_from_log_dir(written.path)
    name = f"gap-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    try:
        for i, seg in enumerate(segments):
            if i != 2:
                write_aiven_segment(
                    store, seg, topic="orders", topic_id="MWJ6FHTfRYy67jzwZdeqSQ", partition=0
                )
        result = run(
            "consume", f"memory://{name}", "orders", "--from-beginning", "--property", "print.offset=true"
        )
        assert result.exit_code == 2, result.stderr
        printed = [int(line.split("\t")[0].removeprefix("Offset:")) for line in result.stdout.splitlines()]
        assert printed and max(printed) < segments[2].base_offset
    finally:
        forget_memory_store(name)


def test_verify_and_consume_report_an_archive_whose_logs_are_gone(tmp_path: Path) -> None:
    """Every ``.log`` deleted while the manifests remain: ``verify`` faults each lost range naming the objects
    gone (exit 1), ``consume`` exits 2 with the offsets missing, never 0 rows and exit 0."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    written = write_partition(tmp_path / "orders-0", batches=40, transactions=False)
    segments = segments_from_log_dir(written.path)
    name = f"lost-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    try:
        stems = [
            write_aiven_segment(store, seg, topic="orders", topic_id="MWJ6FHTfRYy67jzwZdeqSQ", partition=0)
            for seg in segments
        ]
        for stem in stems:
            store.delete(stem + ".log")
        result = run("verify", f"memory://{name}", "--json")
        faults = [o["message"] for o in json_lines(result.stdout) if o["type"] == "fault"]
        assert result.exit_code == 1, result.stdout
        for seg, stem in zip(segments, stems, strict=True):
            assert any(
                f"offsets {seg.base_offset}-{seg.end_offset} are lost" in m and f"{stem}.log is gone" in m
                for m in faults
            ), faults
        consumed = run("consume", f"memory://{name}", "orders", "--from-beginning")
        assert consumed.exit_code == 2 and consumed.stdout == ""
        assert f"{stems[0]}.log gone" in consumed.stderr, consumed.stderr
    finally:
        forget_memory_store(name)


def test_consume_follow_sees_segments_uploaded_to_an_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``consume URL --follow`` over an archive prints the records of segments uploaded while it waits."""
    import kafkalog.cli.consume as consume_module
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    written = write_partition(tmp_path / "orders-0", batches=60, transactions=False)
    segments = segments_from_log_dir(written.path)
    name = f"follow-{tmp_path.name}"
    store = open_store(f"memory://{name}")

    def upload(segs: list[Any]) -> None:
        for seg in segs:
            write_aiven_segment(store, seg, topic="orders", topic_id="MWJ6FHTfRYy67jzwZdeqSQ", partition=0)

    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the poll between reads: the uploader runs here, no race
        waits.append(seconds)
        if len(waits) == 1:
            upload(segments[2:])
        elif len(waits) > 20:  # polled 20 times after the upload: it is not going to see it
            raise AssertionError("consume --follow never printed the records uploaded while it waited")

    try:
        upload(segments[:2])
        monkeypatch.setattr(consume_module.time, "sleep", sleep)
        end = segments[-1].end_offset + 1
        result = run(
            "consume",
            f"memory://{name}",
            "orders",
            "--from-beginning",
            "--follow",
            "--max-messages",
            str(end),
            "--property",
            "print.offset=true",
        )
        assert result.exit_code == 0, result.stderr
        printed = [int(line.split("\t")[0].removeprefix("Offset:")) for line in result.stdout.splitlines()]
        assert printed == list(range(end)) and len(waits) >= 1
    finally:
        forget_memory_store(name)


def _dumped(*args: str | Path) -> tuple[int, bytes, str]:
    result = run("dump", *args)
    return result.exit_code, result.stdout_bytes, result.stderr


def test_dump_of_a_url_prints_what_the_local_file_holds(copied: tuple[Path, str], tmp_path: Path) -> None:
    """``dump URL``: every kind of file of a copied partition directory and of an archive (Aiven zstd-chunked,
    LocalTieredStorage) dumps byte for byte as the local file, with the URL where the local path would be."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment, write_local_tiered_segment

    data, url = copied
    local_dir = data / "orders-0"
    names = sorted(p.name for p in local_dir.iterdir() if p.is_file())
    assert {n.rsplit(".", 1)[-1] for n in names} >= {"log", "index", "timeindex", "txnindex", "snapshot"}
    for name in names:
        for flags in ((), ("--deep-iteration", "--print-data-log"), ("--json",)):
            local = _dumped(local_dir / name, *flags)
            remote = _dumped(f"{url}/orders-0/{name}", *flags)
            assert remote[0] == local[0], (name, flags, remote[2])
            assert remote[1] == local[1].replace(str(local_dir).encode(), f"{url}/orders-0".encode()), name
    # --max-bytes: only that much of the object is read (in 128-byte blocks here)
    seg = max(local_dir.glob("*.log"), key=lambda p: p.stat().st_size)
    assert seg.stat().st_size > 1024
    store = open_store(url)
    before = store.stats.bytes_read
    small = ("--max-bytes", "300", "--storage-option", "storage.block.size=128")
    remote = _dumped(f"{url}/orders-0/{seg.name}", *small, "--json")
    assert remote[1] == _dumped(seg, *small[:2], "--json")[1] and remote[1].count(b"\n") > 1
    # 3 blocks cover the 300 bytes; read-ahead (storage.readahead.blocks, 4 by default) may add 4 more
    assert store.stats.bytes_read - before <= (3 + 4) * 128
    # archives: the files the reader presents, decompressed, are the original files
    segments = segments_from_log_dir(local_dir)
    topic_id = "MWJ6FHTfRYy67jzwZdeqSQ"
    name = f"dump-archive-{tmp_path.name}"
    store, lts = open_store(f"memory://{name}"), open_store(f"memory://{name}-lts")
    try:
        for seg in segments:
            write_aiven_segment(
                store, seg, topic="orders", topic_id=topic_id, partition=0, compression=True, chunk_size=500
            )
            write_local_tiered_segment(lts, seg, topic="orders", topic_id=topic_id, partition=0)
        first = segments[0]
        files = [f"{first.base_offset:020d}.{s}" for s in ("log", "index", "timeindex")]
        files.append(f"{first.end_offset + 1:020d}.snapshot")
        for directory in (f"memory://{name}/orders-{topic_id}/0", f"memory://{name}-lts/orders-0-{topic_id}"):
            for file in files:
                local = _dumped(local_dir / file, "--deep-iteration")
                remote = _dumped(f"{directory}/{file}", "--deep-iteration")
                assert remote[0] == local[0] == 0, (directory, file, remote[2])
                assert remote[1] == local[1].replace(str(local_dir).encode(), directory.encode()), (
                    directory,
                    file,
                )
        missing = _dumped(f"memory://{name}/orders-{topic_id}/0/{segments[-1].end_offset + 1:020d}.log")
        assert missing[0] == 66 and "no such file" in missing[2]
    finally:
        forget_memory_store(name)
        forget_memory_store(f"{name}-lts")


def test_dump_of_a_url_streams_a_log_instead_of_copying_it(
    copied: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dump URL`` of a ``.log`` (and the ``.log`` an index is checked against) reads it by ranged GETs as the
    dump walks, with nothing written to local disk; only a small file read whole (the index) is staged."""
    import os
    import tempfile

    data, url = copied
    local_dir = data / "orders-0"
    seg = max(local_dir.glob("*.log"), key=lambda p: p.stat().st_size)
    index = seg.with_suffix(".index")
    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    store = open_store(url)
    staged: list[tuple[str, ...]] = []
    inner = store.get_range

    def get_range(key: str, start: int, end: int) -> bytes:  # the files on local disk at each GET
        staged.append(tuple(sorted(f.name for f in staging.rglob("*") if f.is_file())))
        return inner(key, start, end)

    monkeypatch.setattr(store, "get_range", get_range)
    block = ("--storage-option", "storage.block.size=256")
    for file, flags in ((seg, ("--deep-iteration",)), (index, ())):
        staged.clear()
        code, out, err = _dumped(f"{url}/orders-0/{file.name}", *block, *flags)
        local = _dumped(file, *flags)
        assert code == local[0] == 0, err
        assert out == local[1].replace(str(local_dir).encode(), f"{url}/orders-0".encode())
        assert len(staged) > seg.stat().st_size // 256  # the .log was read block by block as it was dumped
        assert set(staged) <= {(), (index.name,)} and (file == seg) == (set(staged) == {()}), set(staged)
    assert not os.listdir(staging)
