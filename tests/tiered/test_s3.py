"""Archives in a real S3 server (SeaweedFS, ``tests/s3_server.py``): an encrypted, zstd-chunked Aiven archive
and a LocalTieredStorage archive written to a bucket, detected from their keys and read back byte-identical
through obstore, with planning's requests counted at the seam."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkalog.tiered import AivenArchive, LocalTieredArchive, detect_layout
from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment, write_local_tiered_segment
from s3_server import S3Server

from .conftest import build_log, materialize, rows

TOPIC_ID = "tqimKeZwStOEOwRzT3L5oQ"


def test_archives_in_a_real_bucket(s3_server: S3Server, tmp_path: Path) -> None:
    pytest.importorskip("obstore")
    source_log = build_log(tmp_path / "src" / "clicks-7", 80, epochs=((0, 0), (4, 50)))
    segments = segments_from_log_dir(source_log)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    bucket = s3_server.make_bucket("tiered")
    writer = s3_server.open(f"s3://{bucket}")
    for i, seg in enumerate(segments):
        write_aiven_segment(
            writer,
            seg,
            topic="clicks",
            topic_id=TOPIC_ID,
            partition=7,
            prefix="aiven/",
            compression=True,
            encryption=("k1", key.public_key()),
            chunk_size=512,
            event_timestamp_ms=1_000 + i,
        )
        write_local_tiered_segment(
            writer, seg, topic="clicks", topic_id=TOPIC_ID, partition=7, prefix="local/"
        )
    archived = [r for r in rows(source_log) if r[0] <= segments[-1].end_offset]

    store = s3_server.open(f"s3://{bucket}")
    assert (detect_layout(store, "aiven/"), detect_layout(store, "local/")) == ("aiven", "local-tiered")
    store.stats.reset()
    source = AivenArchive(store, "aiven/", key_ring={"k1": pem}).partition("clicks", 7)
    assert store.stats.get_requests == len(segments) + 1  # the manifests and the newest epoch blob
    assert [(s.base_offset, s.end_offset) for s in source.segments] == [
        (s.base_offset, s.end_offset) for s in segments
    ]
    for seg in segments:
        assert source.read(f"{seg.base_offset:020d}.log") == seg.log
    assert rows(materialize(source, tmp_path / "aiven" / "clicks-7")) == archived

    local = LocalTieredArchive(store, "local/").partition("clicks", 7)
    assert rows(materialize(local, tmp_path / "local" / "clicks-7")) == archived
