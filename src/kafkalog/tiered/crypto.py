"""Encryption of Aiven tiered-storage archives: the RSA-wrapped data key and AES-256-GCM chunks.

Format owned here (the plugin's ``security/*`` and ``EncryptionChunkEnumeration``):

* Each segment has its own 256-bit AES data key (DEK). The manifest stores it as ``"<kekId>:<base64>"``,
  the DEK encrypted with the RSA key-encryption key (KEK) ``kekId`` under BouncyCastle's
  ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding``. BouncyCastle's ``CipherSpi`` maps that name to
  ``OAEPParameterSpec("SHA3-512", "MGF1", MGF1ParameterSpec("SHA3-512"), PSpecified.DEFAULT)``: **SHA3-512 for
  both the OAEP digest and MGF1**, empty label (unlike SunJCE's ``OAEPWith<H>AndMGF1Padding``, whose MGF1
  defaults to SHA-1).
* Every transformed chunk (and every non-empty part of the ``.indexes`` object) is
  ``IV (12 bytes) || AES-GCM ciphertext || tag (16 bytes)``, with the manifest's ``aad`` as additional data.

``cryptography`` loads the PEM keys and does AES-GCM. It does not offer OAEP with SHA3 digests
(``rsa_padding_supported`` allows SHA-1/SHA-2 only), so the OAEP encoding of RFC 8017 §7.1 is done here over
the RSA primitive (``pow`` with the key's numbers, CRT for the private key), with ``hashlib``'s SHA3-512.
A decoding failure is one undifferentiated error (no padding oracle). The test vector in
``tests/tiered/test_crypto.py`` was made by Java 17 (SunJCE, with the explicit parameter spec above).

A :class:`KeyRing` holds private keys only in memory; its ``repr`` names the key ids, never key material.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kafkalog.errors import RemoteStorageError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

__all__ = [
    "GCM_TAG_SIZE",
    "IV_SIZE",
    "KeyRing",
    "decrypt_chunk",
    "encrypt_chunk",
    "oaep_sha3_512_decrypt",
    "oaep_sha3_512_encrypt",
    "wrap_data_key",
]

IV_SIZE: Final = 12
GCM_TAG_SIZE: Final = 16
_H_LEN: Final = 64  # SHA3-512
_EMPTY_LABEL_HASH: Final = hashlib.sha3_512(b"").digest()
#: The option that supplies the keys (named in errors).
KEY_RING_OPTION: Final = "key_ring"


def _cryptography() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise RemoteStorageError(
            "reading an encrypted tiered-storage archive needs the 'cryptography' package: "
            "pip install 'kafkalog[tiered]'"
        ) from None
    return serialization


def _mgf1(seed: bytes, length: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha3_512(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:length])


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def oaep_sha3_512_encrypt(public_key: RSAPublicKey, message: bytes, *, seed: bytes | None = None) -> bytes:
    """RSAES-OAEP-ENCRYPT with SHA3-512 / MGF1(SHA3-512) and an empty label (``seed`` only for tests)."""
    numbers = public_key.public_numbers()
    k = (numbers.n.bit_length() + 7) // 8
    if len(message) > k - 2 * _H_LEN - 2:
        raise ValueError(f"message too long for OAEP-SHA3-512 with a {k * 8}-bit key")
    db = _EMPTY_LABEL_HASH + b"\0" * (k - len(message) - 2 * _H_LEN - 2) + b"\x01" + message
    seed = secrets.token_bytes(_H_LEN) if seed is None else seed
    masked_db = _xor(db, _mgf1(seed, k - _H_LEN - 1))
    masked_seed = _xor(seed, _mgf1(masked_db, _H_LEN))
    em = int.from_bytes(b"\0" + masked_seed + masked_db, "big")
    return pow(em, numbers.e, numbers.n).to_bytes(k, "big")


def oaep_sha3_512_decrypt(private_key: RSAPrivateKey, ciphertext: bytes) -> bytes:
    """RSAES-OAEP-DECRYPT with SHA3-512 / MGF1(SHA3-512), empty label; ``ValueError`` ("decryption error")
    on any failure, without saying which check failed."""
    priv = private_key.private_numbers()
    pub = priv.public_numbers
    k = (pub.n.bit_length() + 7) // 8
    c = int.from_bytes(ciphertext, "big")
    if len(ciphertext) != k or k < 2 * _H_LEN + 2 or c >= pub.n:
        raise ValueError("decryption error")
    # CRT: m = c^d mod n
    m1 = pow(c, priv.dmp1, priv.p)
    m2 = pow(c, priv.dmq1, priv.q)
    m = m2 + ((priv.iqmp * (m1 - m2)) % priv.p) * priv.q
    em = m.to_bytes(k, "big")
    masked_seed, masked_db = em[1 : 1 + _H_LEN], em[1 + _H_LEN :]
    seed = _xor(masked_seed, _mgf1(masked_db, _H_LEN))
    db = _xor(masked_db, _mgf1(seed, k - _H_LEN - 1))
    ok = hmac.compare_digest(db[:_H_LEN], _EMPTY_LABEL_HASH) & (em[0] == 0)
    rest = db[_H_LEN:]
    separator = -1
    for i, byte in enumerate(rest):
        if byte == 1 and separator < 0:
            separator = i
        elif byte != 0 and separator < 0:
            ok = False
    if not ok or separator < 0:
        raise ValueError("decryption error")
    return rest[separator + 1 :]


class KeyRing:
    """RSA private keys by key-encryption-key id: ``{kekId: PEM text, PEM bytes, or a path to a PEM file}``.

    Unencrypted PKCS#8 (``BEGIN PRIVATE KEY``) or PKCS#1 (``BEGIN RSA PRIVATE KEY``) keys, as the plugin's
    ``RsaKeyReader`` reads. A key that cannot be loaded is a :class:`RemoteStorageError` naming its id."""

    def __init__(self, keys: Mapping[str, str | bytes | os.PathLike[str]]) -> None:
        serialization = _cryptography()
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

        self._keys: dict[str, RSAPrivateKey] = {}
        for key_id, source in keys.items():
            if isinstance(source, bytes):
                pem = source
            elif isinstance(source, str) and "-----BEGIN" in source:
                pem = source.encode("ascii", "replace")
            else:
                try:
                    pem = Path(source).read_bytes()
                except OSError as exc:
                    raise RemoteStorageError(
                        f"{KEY_RING_OPTION}: cannot read the PEM file of key {key_id!r}: {exc.strerror}"
                    ) from None
            try:
                key = serialization.load_pem_private_key(pem, password=None)
            except (ValueError, TypeError):
                raise RemoteStorageError(
                    f"{KEY_RING_OPTION}: key {key_id!r} is not an unencrypted PEM private key"
                ) from None
            if not isinstance(key, RSAPrivateKey):
                raise RemoteStorageError(f"{KEY_RING_OPTION}: key {key_id!r} is not an RSA private key")
            self._keys[key_id] = key

    def __repr__(self) -> str:
        return f"KeyRing({sorted(self._keys)})"

    @property
    def key_ids(self) -> list[str]:
        """The ids of the keys held."""
        return sorted(self._keys)

    def unwrap(self, data_key: str, where: str) -> bytes:
        """The AES data key of ``"<kekId>:<base64>"`` (``where``: the manifest, for errors)."""
        kek_id, _, wrapped_text = data_key.partition(":")
        key = self._keys.get(kek_id)
        if key is None:
            raise RemoteStorageError(
                f"{where}: encrypted with key {kek_id!r}, which the {KEY_RING_OPTION} option does not hold "
                f"(it holds {self.key_ids}); supply that RSA private key"
            )
        try:
            wrapped = base64.b64decode(wrapped_text, validate=True)
            dek = oaep_sha3_512_decrypt(key, wrapped)
        except (binascii.Error, ValueError):
            raise RemoteStorageError(
                f"{where}: the data key does not decrypt with key {kek_id!r} of the {KEY_RING_OPTION} option "
                "(a wrong key under that id, or a corrupt manifest)"
            ) from None
        if len(dek) not in (16, 24, 32):
            raise RemoteStorageError(f"{where}: the data key decrypts to {len(dek)} bytes, not an AES key")
        return dek


def wrap_data_key(dek: bytes, kek_id: str, public_key: RSAPublicKey) -> str:
    """``"<kekId>:<base64>"`` as the plugin's ``DataKeySerializer`` writes it."""
    return f"{kek_id}:{base64.b64encode(oaep_sha3_512_encrypt(public_key, dek)).decode('ascii')}"


def decrypt_chunk(key: bytes, aad: bytes, chunk: bytes, where: str) -> bytes:
    """The plaintext of ``IV || ciphertext || tag``; a chunk failing authentication raises, naming ``where``."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if len(chunk) < IV_SIZE + GCM_TAG_SIZE:
        raise RemoteStorageError(f"{where}: encrypted chunk of {len(chunk)} bytes is shorter than IV and tag")
    try:
        return AESGCM(key).decrypt(chunk[:IV_SIZE], chunk[IV_SIZE:], aad)
    except InvalidTag:
        raise RemoteStorageError(
            f"{where}: chunk fails AES-GCM authentication (corrupt or altered object, or a data key from "
            f"a different {KEY_RING_OPTION} entry)"
        ) from None


def encrypt_chunk(key: bytes, aad: bytes, data: bytes, *, iv: bytes | None = None) -> bytes:
    """``IV || AES-GCM(data) || tag`` as ``EncryptionChunkEnumeration`` writes it (test writers)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = secrets.token_bytes(IV_SIZE) if iv is None else iv
    return iv + AESGCM(key).encrypt(iv, data, aad)
