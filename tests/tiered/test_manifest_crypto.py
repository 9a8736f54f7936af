"""Wire details of the Aiven plugin pinned by vectors from its own tests and from Java: the manifest JSON
(``SegmentManifestV1SerdeTest``), the chunk index (``ChunkIndexSerializationTest``), ``ChunkSizesBinaryCodec``
(``ChunkSizesBinaryCodecTest``), RSA-OAEP with SHA3-512 and AES-GCM chunks (``vectors.py``, made by Java)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

from kafkalog.errors import RemoteStorageError, UnsupportedRemoteSegmentError
from kafkalog.tiered.crypto import KeyRing, decrypt_chunk, encrypt_chunk, oaep_sha3_512_decrypt, wrap_data_key
from kafkalog.tiered.manifest import (
    Chunk,
    decode_chunk_sizes,
    encode_chunk_sizes,
    manifest_json,
    parse_manifest,
)

from .vectors import JAVA_GCM_AAD, JAVA_GCM_CHUNK, JAVA_PRIVATE_KEY_PEM, JAVA_WRAPPED_DEK

# --- SegmentManifestV1SerdeTest's exact JSON (Aiven-Open/tiered-storage-for-apache-kafka) ---
RLSM_JSON = (
    '{"remoteLogSegmentId":{'
    '"topicIdPartition":{"topicId":"lZ6vvmajTWKDBUTV6SQAtQ","topicPartition":'
    '{"topic":"topic1","partition":42}},'
    '"id":"adh9f8BMS4anaUnD8KWfWg"},'
    '"startOffset":0,"endOffset":1000,'
    '"maxTimestampMs":1000000000,"brokerId":2,"eventTimestampMs":2000000000,'
    '"segmentLeaderEpochs":{"0":100,"1":200,"2":300}}'
)
INDEXES_JSON = (
    '"segmentIndexes":{'
    '"offset":{"position":0,"size":1},'
    '"timestamp":{"position":1,"size":1},'
    '"producerSnapshot":{"position":2,"size":1},'
    '"leaderEpoch":{"position":3,"size":1},'
    '"transaction":{"position":4,"size":1}'
    "},"
)
WITHOUT_ENCRYPTION_JSON = (
    '{"version":"1",'
    '"chunkIndex":{"type":"fixed","originalChunkSize":100,'
    '"originalFileSize":1000,"transformedChunkSize":110,"finalTransformedChunkSize":110},'
    + INDEXES_JSON
    + '"compression":false,"remoteLogSegmentMetadata":'
    + RLSM_JSON
    + "}"
)
WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON = WITHOUT_ENCRYPTION_JSON.replace(
    '"transaction":{"position":4,"size":1}', '"transaction":null'
)
# ChunkIndexSerializationTest: 10, 20, 30 encoded and zstd-compressed with the content size.
ENCODED_CHUNKS = "KLUv/SAPeQAAAAAAAwAAAAoBAAoAAAAe"


def test_serde_test_json_parses_and_reserializes_byte_identically() -> None:
    m = parse_manifest(WITHOUT_ENCRYPTION_JSON.encode(), "m")
    assert (m.chunk_index.kind, m.chunk_index.original_chunk_size, m.chunk_index.original_file_size) == (
        "fixed",
        100,
        1000,
    )
    assert m.chunk_index.transformed_sizes == (110,) * 10
    assert m.segment_indexes.transaction is not None and m.segment_indexes.transaction.position == 4
    assert m.compression is False and m.encryption is None
    md = m.remote_log_segment_metadata
    assert md is not None
    assert (md.topic, md.partition, md.topic_id, md.segment_id) == (
        "topic1",
        42,
        "lZ6vvmajTWKDBUTV6SQAtQ",
        "adh9f8BMS4anaUnD8KWfWg",
    )
    assert (md.start_offset, md.end_offset, md.max_timestamp_ms, md.broker_id, md.event_timestamp_ms) == (
        0,
        1000,
        1000000000,
        2,
        2000000000,
    )
    assert md.segment_leader_epochs == {0: 100, 1: 200, 2: 300}
    assert manifest_json(m).decode() == WITHOUT_ENCRYPTION_JSON
    no_txn = parse_manifest(WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON.encode(), "m")
    assert no_txn.segment_indexes.transaction is None
    assert manifest_json(no_txn).decode() == WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON


def test_old_style_manifest_without_metadata_parses() -> None:
    doc = json.loads(WITHOUT_ENCRYPTION_JSON)
    del doc["remoteLogSegmentMetadata"]
    m = parse_manifest(json.dumps(doc).encode(), "m")
    assert m.remote_log_segment_metadata is None


def test_chunk_index_vectors() -> None:
    variable = json.dumps(
        {
            "version": "1",
            "chunkIndex": {
                "type": "variable",
                "originalChunkSize": 100,
                "originalFileSize": 250,
                "transformedChunks": ENCODED_CHUNKS,
            },
            "segmentIndexes": json.loads("{" + INDEXES_JSON[:-1] + "}")["segmentIndexes"],
            "compression": True,
        }
    )
    ci = parse_manifest(variable.encode(), "m").chunk_index
    assert ci.transformed_sizes == (10, 20, 30)
    assert [ci.chunk(i) for i in range(3)] == [
        Chunk(0, 0, 100, 0, 10),
        Chunk(1, 100, 100, 10, 20),
        Chunk(2, 200, 50, 30, 30),
    ]
    assert ci.chunks_for_range(150, 201) == [Chunk(1, 100, 100, 10, 20), Chunk(2, 200, 50, 30, 30)]
    fixed = variable.replace(
        f'"type": "variable", "originalChunkSize": 100, "originalFileSize": 250, "transformedChunks": "{ENCODED_CHUNKS}"',
        '"type": "fixed", "originalChunkSize": 100, "originalFileSize": 250, "transformedChunkSize": 110, '
        '"finalTransformedChunkSize": 30',
    )
    ci = parse_manifest(fixed.encode(), "m").chunk_index
    assert [ci.chunk(i) for i in range(3)] == [
        Chunk(0, 0, 100, 0, 110),
        Chunk(1, 100, 100, 110, 110),
        Chunk(2, 200, 50, 220, 30),
    ]
    assert ci.transformed_file_size == 250


@pytest.mark.parametrize(
    ("values", "width"),
    [
        ([0, 1000, 2, 44002, 369], 2),
        ([2**31 - 1, 2**31 - 2, 2**31 - 3, 10], 1),
        ([1, 2, 3, 2**31 - 1], 1),
        ([1, 0xFFFF + 10, 0xFFFF + 20, 0xFFFF + 30, 2**31 - 1], 3),
        ([1, 0xFFFFFF + 10, 0xFFFFFF + 20, 0xFFFFFF + 30, 2**31 - 1], 4),
    ],
)
def test_chunk_sizes_codec_matches_the_plugins_layout(values: list[int], width: int) -> None:
    encoded = encode_chunk_sizes(values)
    assert len(encoded) == 4 + 4 + 1 + (len(values) - 1) * width + 4
    assert encoded[8] == width
    assert decode_chunk_sizes(encoded) == values
    assert decode_chunk_sizes(encode_chunk_sizes([213])) == [213]
    assert encode_chunk_sizes([]) == b"\0\0\0\0"
    # ChunkIndexSerializationTest's hand-made bytes: count 3, base 10, 1 byte per value, 0, 10, last 30
    assert encode_chunk_sizes([10, 20, 30]) == bytes.fromhex("000000030000000a01000a0000001e")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(version="2"), "version"),
        (lambda d: d["chunkIndex"].update(type="sparse"), "chunkIndex.type"),
        (lambda d: d["chunkIndex"].update(originalChunkSize=0), "originalChunkSize"),
        (lambda d: d["chunkIndex"].pop("finalTransformedChunkSize"), "finalTransformedChunkSize"),
        (lambda d: d["segmentIndexes"].pop("offset"), "segmentIndexes.offset"),
        (lambda d: d["segmentIndexes"]["timestamp"].update(size="1"), "segmentIndexes.timestamp.size"),
        (lambda d: d.update(compression="no"), "compression"),
        (lambda d: d.update(encryption={"dataKey": "nocolon", "aad": "AA=="}), "dataKey"),
        (lambda d: d["remoteLogSegmentMetadata"].update(endOffset=-5), "endOffset"),
        (
            lambda d: d["chunkIndex"].update(
                type="variable", transformedChunks=ENCODED_CHUNKS, originalFileSize=1000
            ),
            "make 10",
        ),
    ],
)
def test_corrupt_manifests_are_typed_errors_naming_the_object(mutate: object, message: str) -> None:
    doc = json.loads(WITHOUT_ENCRYPTION_JSON)
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(RemoteStorageError, match=message) as err:
        parse_manifest(json.dumps(doc).encode(), "s3://b/t-x/0/0.rsm-manifest")
    assert "s3://b/t-x/0/0.rsm-manifest: corrupt segment manifest" in str(err.value)
    with pytest.raises(RemoteStorageError, match="not JSON"):
        parse_manifest(b'{"version":"1",', "m")


def test_a_puffin_manifest_is_refused_as_iceberg_mode() -> None:
    with pytest.raises(UnsupportedRemoteSegmentError, match="Iceberg mode"):
        parse_manifest(b"PFA1\x00\x00rest-of-puffin", "m")


def test_rsa_oaep_sha3_512_unwraps_a_key_java_wrapped() -> None:
    ring = KeyRing({"kek1": JAVA_PRIVATE_KEY_PEM})
    assert ring.unwrap(f"kek1:{JAVA_WRAPPED_DEK}", "m") == bytes(range(32))
    assert "PRIVATE" not in repr(ring) and repr(ring) == "KeyRing(['kek1'])"


def test_the_key_ring_keeps_no_printable_key_material_and_needs_pycryptodome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cryptography.hazmat.primitives import serialization

    ring = KeyRing({"kek1": JAVA_PRIVATE_KEY_PEM})
    key = serialization.load_pem_private_key(JAVA_PRIVATE_KEY_PEM.encode(), password=None)
    d = str(key.private_numbers().d)
    assert d not in repr(vars(ring)) and d not in repr(ring)
    # without pycryptodome: the typed error naming the extra, not an ImportError
    monkeypatch.setitem(sys.modules, "Crypto.Cipher.PKCS1_OAEP", None)
    with pytest.raises(RemoteStorageError, match=r"needs the 'pycryptodome' package .*kafkalog\[tiered\]"):
        KeyRing({"kek1": JAVA_PRIVATE_KEY_PEM})
    with pytest.raises(RemoteStorageError, match="pycryptodome"):
        oaep_sha3_512_decrypt(key, base64.b64decode(JAVA_WRAPPED_DEK))


def test_aes_gcm_chunk_java_encrypted_decrypts_and_tampering_is_caught() -> None:
    chunk = base64.b64decode(JAVA_GCM_CHUNK)
    aad = base64.b64decode(JAVA_GCM_AAD)
    assert chunk[:12] == bytes(range(100, 112))  # the IV is prepended
    assert decrypt_chunk(bytes(range(32)), aad, chunk, "obj") == b"kafkalog tiered chunk"
    assert encrypt_chunk(bytes(range(32)), aad, b"kafkalog tiered chunk", iv=bytes(range(100, 112))) == chunk
    bad = chunk[:-1] + bytes([chunk[-1] ^ 1])
    with pytest.raises(RemoteStorageError, match="obj: chunk fails AES-GCM authentication"):
        decrypt_chunk(bytes(range(32)), aad, bad, "obj")


def test_our_wrapping_round_trips_and_wrong_keys_are_typed_errors(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    java_ring = KeyRing({"kek1": JAVA_PRIVATE_KEY_PEM.encode()})
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    wrapped = wrap_data_key(b"k" * 32, "kek1", other.public_key())
    assert KeyRing({"kek1": pem}).unwrap(wrapped, "m") == b"k" * 32
    (tmp_path / "kek1.pem").write_bytes(pem)  # a PKCS#1 PEM file, by path
    assert KeyRing({"kek1": tmp_path / "kek1.pem"}).unwrap(wrapped, "m") == b"k" * 32
    assert KeyRing({"kek1": str(tmp_path / "kek1.pem")}).unwrap(wrapped, "m") == b"k" * 32
    assert oaep_sha3_512_decrypt(other, base64.b64decode(wrapped.split(":")[1])) == b"k" * 32
    with pytest.raises(RemoteStorageError, match="does not decrypt with key 'kek1' of the key_ring option"):
        java_ring.unwrap(wrapped, "m")
    with pytest.raises(RemoteStorageError, match=r"encrypted with key 'kek2'.*key_ring"):
        java_ring.unwrap(wrapped.replace("kek1:", "kek2:"), "m")
    with pytest.raises(RemoteStorageError, match=r"key 'x' is not an unencrypted PEM private key"):
        KeyRing({"x": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"})
    with pytest.raises(RemoteStorageError, match="cannot read the PEM file of key 'y'"):
        KeyRing({"y": "/nonexistent/key.pem"})
