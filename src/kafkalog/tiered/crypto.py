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
(``rsa_padding_supported`` allows SHA-1/SHA-2 only), so the data key is wrapped and unwrapped by pycryptodome's
``Crypto.Cipher.PKCS1_OAEP`` with ``hashAlgo=SHA3_512`` and ``mgfunc=MGF1(..., SHA3_512)``, on the key converted
to a pycryptodome ``RsaKey`` from its numbers: its RSA decryption is blinded and its OAEP decoding checks are
constant-time; any failure is one undifferentiated ``ValueError`` (no padding oracle). The test vector in
``tests/tiered/vectors.py`` (checked by ``tests/tiered/test_manifest_crypto.py``) was made by Java 17 (SunJCE,
with the explicit parameter spec above).

A :class:`KeyRing` holds private keys only in memory; its ``repr`` names the key ids, never key material.

The key-ring format every reader takes (Spark's ``keyRing`` option, the Python API's ``key_ring``, the CLI's
``--key-ring FILE``): a JSON object ``{"<kekId>": "<PEM text, or the path of a PEM file>"}``
(:func:`parse_key_ring_json`, :func:`load_key_ring_file`). Errors name the key id and the file, never a
key's content.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kafkalog.errors import RemoteStorageError

if TYPE_CHECKING:
    from Crypto.Cipher.PKCS1_OAEP import PKCS1OAEP_Cipher
    from Crypto.PublicKey.RSA import RsaKey
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

__all__ = [
    "GCM_TAG_SIZE",
    "IV_SIZE",
    "KeyRing",
    "decrypt_chunk",
    "encrypt_chunk",
    "load_key_ring_file",
    "oaep_sha3_512_decrypt",
    "oaep_sha3_512_encrypt",
    "parse_key_ring_json",
    "wrap_data_key",
]

IV_SIZE: Final = 12
GCM_TAG_SIZE: Final = 16
_H_LEN: Final = 64  # SHA3-512
#: The option that supplies the keys (named in errors).
KEY_RING_OPTION: Final = "key_ring"
#: A key-ring file larger than this is refused unread (a JSON object of a few PEM keys is a few KiB each).
MAX_KEY_RING_FILE_BYTES: Final = 1024 * 1024
_KEY_RING_SHAPE: Final = '{"kekId": "PEM text or path to a PEM file"}'


def parse_key_ring_json(text: str | bytes, option: str) -> dict[str, str]:
    """The ``{kekId: PEM text or path}`` object of a key ring given as JSON (Spark's ``keyRing`` option, a
    ``--key-ring`` file); ``ValueError`` naming ``option`` (never the text, which may hold a key)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(v, str) and v for v in parsed.values()):
        raise ValueError(f"{option} must be a JSON object {_KEY_RING_SHAPE}")
    return dict(parsed)


def load_key_ring_file(path: str | os.PathLike[str]) -> KeyRing:
    """The :class:`KeyRing` a key-ring file describes (JSON, :func:`parse_key_ring_json`; a relative PEM path
    is relative to the working directory, as in Spark's ``keyRing``). Any failure is a
    :class:`~kafkalog.errors.RemoteStorageError` naming the file and, for one key, its id."""
    where = f"key-ring file {os.fspath(path)}"
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_KEY_RING_FILE_BYTES + 1)
    except OSError as exc:
        raise RemoteStorageError(f"{where}: cannot read it: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_KEY_RING_FILE_BYTES:
        raise RemoteStorageError(f"{where}: larger than {MAX_KEY_RING_FILE_BYTES} bytes; not a key ring")
    try:
        keys = parse_key_ring_json(data, where)
    except ValueError as exc:
        raise RemoteStorageError(str(exc)) from None
    return KeyRing(keys, option=where)


def _cryptography() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise RemoteStorageError(
            "reading an encrypted tiered-storage archive needs the 'cryptography' package: "
            "pip install 'kafkalog[tiered]'"
        ) from None
    return serialization


def _require_pycryptodome() -> None:
    try:
        import Crypto.Cipher.PKCS1_OAEP
        import Crypto.Hash.SHA3_512
        import Crypto.PublicKey.RSA
        import Crypto.Signature.pss  # noqa: F401
    except ImportError:
        raise RemoteStorageError(
            "an encrypted tiered-storage archive needs the 'pycryptodome' package (RSA-OAEP with SHA3-512): "
            "pip install 'kafkalog[tiered]'"
        ) from None


def _rsa_key(key: RSAPrivateKey | RSAPublicKey) -> RsaKey:
    """The pycryptodome ``RsaKey`` of a ``cryptography`` RSA key (with its private half if it has one)."""
    from Crypto.PublicKey import RSA
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

    if isinstance(key, RSAPrivateKey):
        priv = key.private_numbers()
        pub = priv.public_numbers
        return RSA.construct((pub.n, pub.e, priv.d, priv.p, priv.q))
    numbers = key.public_numbers()
    return RSA.construct((numbers.n, numbers.e))


def _oaep_sha3_512(key: RsaKey, seed: bytes | None = None) -> PKCS1OAEP_Cipher:
    """pycryptodome's OAEP cipher as BouncyCastle's ``OAEPWithSHA3-512AndMGF1Padding``: SHA3-512 as the OAEP
    digest and as the MGF1 digest, empty label (``seed``: the OAEP seed of an encryption, only for tests)."""
    from Crypto.Cipher import PKCS1_OAEP
    from Crypto.Hash import SHA3_512
    from Crypto.Signature.pss import MGF1

    if seed is not None and len(seed) != _H_LEN:
        raise ValueError(f"an OAEP-SHA3-512 seed is {_H_LEN} bytes, not {len(seed)}")
    return PKCS1_OAEP.new(
        key,
        hashAlgo=SHA3_512,
        mgfunc=lambda mgf_seed, length: MGF1(mgf_seed, length, SHA3_512),
        label=b"",
        randfunc=None if seed is None else lambda n: seed,
    )


def oaep_sha3_512_encrypt(public_key: RSAPublicKey, message: bytes, *, seed: bytes | None = None) -> bytes:
    """RSAES-OAEP-ENCRYPT with SHA3-512 / MGF1(SHA3-512) and an empty label (``seed`` only for tests);
    ``ValueError`` if the message is too long for the key."""
    _require_pycryptodome()
    return _oaep_sha3_512(_rsa_key(public_key), seed).encrypt(message)


def oaep_sha3_512_decrypt(private_key: RSAPrivateKey, ciphertext: bytes) -> bytes:
    """RSAES-OAEP-DECRYPT with SHA3-512 / MGF1(SHA3-512), empty label; ``ValueError`` ("decryption error")
    on any failure, without saying which check failed."""
    _require_pycryptodome()
    return _decrypt(_oaep_sha3_512(_rsa_key(private_key)), ciphertext)


def _decrypt(cipher: PKCS1OAEP_Cipher, ciphertext: bytes) -> bytes:
    try:
        return cipher.decrypt(ciphertext)
    except ValueError:
        raise ValueError("decryption error") from None


class KeyRing:
    """RSA private keys by key-encryption-key id: ``{kekId: PEM text, PEM bytes, or a path to a PEM file}``.

    Unencrypted PKCS#8 (``BEGIN PRIVATE KEY``) or PKCS#1 (``BEGIN RSA PRIVATE KEY``) keys, as the plugin's
    ``RsaKeyReader`` reads. A key that cannot be loaded is a :class:`RemoteStorageError` naming its id and
    ``option`` (where the keys came from: the option's name, or a key-ring file), never the key's content."""

    def __init__(
        self, keys: Mapping[str, str | bytes | os.PathLike[str]], *, option: str = KEY_RING_OPTION
    ) -> None:
        serialization = _cryptography()
        _require_pycryptodome()
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

        self.option = option
        # pycryptodome's cipher objects, never its RsaKey (whose repr prints the private numbers)
        self._keys: dict[str, PKCS1OAEP_Cipher] = {}
        # the PEMs, only to pickle the ring to Spark executors (as the key-ring option itself travels)
        self._pems: dict[str, bytes] = {}
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
                        f"{self.option}: cannot read the PEM file of key {key_id!r}: {exc.strerror}"
                    ) from None
            try:
                key = serialization.load_pem_private_key(pem, password=None)
            except (ValueError, TypeError):
                raise RemoteStorageError(
                    f"{self.option}: key {key_id!r} is not an unencrypted PEM private key"
                ) from None
            if not isinstance(key, RSAPrivateKey):
                raise RemoteStorageError(f"{self.option}: key {key_id!r} is not an RSA private key")
            self._pems[key_id] = pem
            try:
                self._keys[key_id] = _oaep_sha3_512(_rsa_key(key))
            except ValueError:
                raise RemoteStorageError(
                    f"{self.option}: key {key_id!r} is not an RSA private key pycryptodome can use"
                ) from None

    def __repr__(self) -> str:
        return f"KeyRing({sorted(self._keys)})"

    @property
    def _holder(self) -> str:
        """What holds the keys, as errors say it: ``the key_ring option``, ``key-ring file ring.json``."""
        return self.option if " " in self.option else f"the {self.option} option"

    def __reduce__(self) -> tuple[Any, tuple[dict[str, bytes], str]]:
        # a planned archive goes to executors with its ring: the PEMs, loaded again there (cipher objects
        # do not pickle); never shown by a repr
        return _key_ring, (dict(self._pems), self.option)

    @property
    def key_ids(self) -> list[str]:
        """The ids of the keys held."""
        return sorted(self._keys)

    def unwrap(self, data_key: str, where: str) -> bytes:
        """The AES data key of ``"<kekId>:<base64>"`` (``where``: the manifest, for errors)."""
        kek_id, _, wrapped_text = data_key.partition(":")
        cipher = self._keys.get(kek_id)
        if cipher is None:
            raise RemoteStorageError(
                f"{where}: encrypted with key {kek_id!r}, which {self._holder} does not hold "
                f"(it holds {self.key_ids}); supply that RSA private key"
            )
        try:
            wrapped = base64.b64decode(wrapped_text, validate=True)
            dek = _decrypt(cipher, wrapped)
        except (binascii.Error, ValueError):
            raise RemoteStorageError(
                f"{where}: the data key does not decrypt with key {kek_id!r} of {self._holder} "
                "(a wrong key under that id, or a corrupt manifest)"
            ) from None
        if len(dek) not in (16, 24, 32):
            raise RemoteStorageError(f"{where}: the data key decrypts to {len(dek)} bytes, not an AES key")
        return dek


def _key_ring(pems: dict[str, bytes], option: str) -> KeyRing:
    """An unpickled :class:`KeyRing`."""
    return KeyRing(pems, option=option)


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
