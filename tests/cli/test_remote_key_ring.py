"""``kafkalog info|verify|consume|dump URL --key-ring FILE``: an encrypted Aiven archive reads from the CLI with
the key ring Spark's ``keyRing`` and the Python API take (a JSON object ``{kekId: PEM text or path}``), and no
error ever shows a private key: they name the key-ring file and the key id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

from .helpers import json_lines, run, write_partition

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


@pytest.fixture(scope="module")
def kek() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def encrypted(tmp_path: Path, kek: rsa.RSAPrivateKey) -> Iterator[tuple[Path, str]]:
    """A local partition and its encrypted Aiven archive at ``memory://...`` (every segment but the active)."""
    written = write_partition(tmp_path / "data" / "orders-0", batches=40, transactions=False)
    name = f"ring-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    for seg in segments_from_log_dir(written.path):
        write_aiven_segment(
            store,
            seg,
            topic="orders",
            topic_id=TOPIC_ID,
            partition=0,
            encryption=("kek-1", kek.public_key()),
            chunk_size=700,
        )
    yield tmp_path / "data", f"memory://{name}"
    forget_memory_store(name)


def _offsets(text: str) -> list[int]:
    return [int(line.split("\t")[0].removeprefix("Offset:")) for line in text.splitlines()]


def test_an_encrypted_archive_reads_with_a_key_ring_file_as_pem_text_or_path(
    encrypted: tuple[Path, str], kek: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    data, url = encrypted
    pem_file = tmp_path / "kek-1.pem"
    pem_file.write_text(_pem(kek))
    inline = tmp_path / "ring-inline.json"
    inline.write_text(json.dumps({"kek-1": _pem(kek)}))
    by_path = tmp_path / "ring-path.json"
    by_path.write_text(json.dumps({"kek-1": str(pem_file)}))
    local = run("consume", data, "orders", "--from-beginning", "--property", "print.offset=true")
    for ring in (inline, by_path):
        result = run(
            "consume",
            url,
            "orders",
            "--from-beginning",
            "--property",
            "print.offset=true",
            "--key-ring",
            ring,
        )
        assert result.exit_code == 0, result.stderr
        offsets = _offsets(result.stdout)
        assert offsets and offsets == _offsets(local.stdout)[: len(offsets)]
        verified = run("verify", url, "--json", "--key-ring", ring)
        assert verified.exit_code == 0, verified.stdout
        info = [
            o
            for o in json_lines(run("info", url, "--json", "--key-ring", ring).stdout)
            if o["type"] == "partition"
        ]
        assert info[0]["logEndOffset"] == offsets[-1] + 1
    segment = sorted(p.name for p in (data / "orders-0").glob("*.log"))[0]
    dumped = run("dump", f"{url}/orders-{TOPIC_ID}/0/{segment}", "--deep-iteration", "--key-ring", inline)
    assert dumped.exit_code == 0, dumped.stderr
    assert "| offset: 0 " in dumped.stdout


def test_without_the_key_ring_the_error_names_the_option(encrypted: tuple[Path, str]) -> None:
    _, url = encrypted
    result = run("consume", url, "orders", "--from-beginning")
    assert result.exit_code != 0
    assert "--key-ring" in result.stderr and "kek-1" in result.stderr


def test_key_ring_errors_name_the_file_and_key_id_never_the_key(
    encrypted: tuple[Path, str], kek: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    _, url = encrypted
    pem = _pem(kek)
    secret_line = pem.splitlines()[3]  # a line of the private key's base64
    other = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    cases = {
        "wrong-key": ({"kek-1": other}, "does not decrypt with key 'kek-1'"),
        "missing-id": ({"kek-9": pem}, "encrypted with key 'kek-1'"),
        "not-a-key": (
            {"kek-1": "-----BEGIN PRIVATE KEY-----\n" + secret_line + "\n-----END PRIVATE KEY-----\n"},
            "key 'kek-1' is not an unencrypted PEM private key",
        ),
        "missing-pem-file": (
            {"kek-1": str(tmp_path / "nowhere.pem")},
            "cannot read the PEM file of key 'kek-1'",
        ),
        "not-json": (secret_line, "must be a JSON object"),
    }
    for label, (content, expected) in cases.items():
        ring = tmp_path / f"{label}.json"
        ring.write_text(content if isinstance(content, str) else json.dumps(content))
        for args in (("consume", url, "orders", "--from-beginning"), ("verify", url), ("info", url)):
            result = run(*args, "--key-ring", ring)
            shown = result.stdout + result.stderr
            assert result.exit_code != 0, (label, args)
            assert expected in shown, (label, args, shown)
            assert str(ring) in shown, (label, args, shown)
            assert secret_line not in shown and "PRIVATE KEY" not in shown, (label, args)
    missing = run("verify", url, "--key-ring", tmp_path / "absent.json")
    assert missing.exit_code == 64 and f"key-ring file {tmp_path / 'absent.json'}" in missing.stderr


def test_key_ring_is_for_a_url(encrypted: tuple[Path, str], tmp_path: Path) -> None:
    data, _ = encrypted
    ring = tmp_path / "ring.json"
    ring.write_text("{}")
    result = run("verify", data, "--key-ring", ring)
    assert result.exit_code == 64 and "--key-ring is for a URL" in result.stderr
    segment = sorted((data / "orders-0").glob("*.log"))[0]
    dumped = run("dump", segment, "--key-ring", ring)
    assert dumped.exit_code == 64 and "--key-ring is for a URL" in dumped.stderr
