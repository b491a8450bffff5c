"""Model files that cannot be read or altered unnoticed: AES-GCM encryption and a SHA-256 integrity footer.

Encrypted file:   MAGIC_ENCRYPTED (8) | version (1) | scheme (1) | nonce (12) | ciphertext | GCM tag (16)
Integrity footer: <plain .ms bytes> | MAGIC_INTEGRITY (8) | SHA-256 of the plain bytes (32)

The encrypted header is the GCM associated data, so the header and the payload are both authenticated; the scheme
byte names the key length (AES-128/192/256-GCM); every file gets a fresh random nonce. The cipher is the
maintained `cryptography` package's AESGCM, imported only when a file is encrypted or decrypted, so the runtime
still needs nothing but numpy and flatbuffers for plain files. The key never appears in a message.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import struct

from lite.status import GraphFileError, NotSupportedError, ParamInvalidError

MAGIC_ENCRYPTED = b"MSPYENC\x00"
MAGIC_INTEGRITY = b"MSPYSHA2"
VERSION = 1
SCHEMES = {1: 16, 2: 24, 3: 32}              # scheme byte -> AES key bytes (GCM)
_HEADER = struct.Struct("<8sBB12s")
NONCE_BYTES, TAG_BYTES, DIGEST_BYTES = 12, 16, 32
REFUSED = "wrong key or tampered file"


def parse_key(key: str | bytes) -> bytes:
    """A key given as bytes or as hex text (MindSpore's `--encryptKey` form); 16, 24 or 32 bytes."""
    if isinstance(key, str):
        try:
            key = bytes.fromhex(key)
        except ValueError:
            raise ParamInvalidError("the key must be hexadecimal text (32, 48 or 64 hex digits)") from None
    if not isinstance(key, (bytes, bytearray)) or len(key) not in SCHEMES.values():
        raise ParamInvalidError(f"the key must be 16, 24 or 32 bytes, got {len(key) if key else 0}")
    return bytes(key)


def _aesgcm(key: bytes):
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise NotSupportedError("encrypted models need the 'cryptography' package: pip install cryptography") \
            from None
    return AESGCM(key)


def is_encrypted(buf: bytes | memoryview) -> bool:
    return bytes(buf[:len(MAGIC_ENCRYPTED)]) == MAGIC_ENCRYPTED


def encrypt(plain: bytes | memoryview, key: str | bytes) -> bytes:
    """The encrypted file for the plain `.ms` bytes `plain`."""
    key = parse_key(key)
    scheme = next(s for s, n in SCHEMES.items() if n == len(key))
    header = _HEADER.pack(MAGIC_ENCRYPTED, VERSION, scheme, os.urandom(NONCE_BYTES))
    return header + _aesgcm(key).encrypt(header[-NONCE_BYTES:], bytes(plain), header)


def decrypt(buf: bytes | memoryview, key: str | bytes | None) -> bytes:
    """The plain `.ms` bytes of an encrypted file; `GraphFileError` for a missing or wrong key or any altered
    byte (header, payload or tag), naming neither the key nor where the file differs."""
    if key is None:
        raise GraphFileError("the model is encrypted: give its key (dec_key)")
    key = parse_key(key)
    if len(buf) < _HEADER.size + TAG_BYTES:
        raise GraphFileError(f"encrypted model is truncated ({len(buf)} bytes): {REFUSED}")
    magic, version, scheme, nonce = _HEADER.unpack_from(buf, 0)
    if version != VERSION:
        raise GraphFileError(f"encrypted model format version {version} is not supported (this runtime reads "
                             f"version {VERSION})")
    if SCHEMES.get(scheme) != len(key):
        raise GraphFileError(f"the model's encryption scheme does not match the key: {REFUSED}")
    from cryptography.exceptions import InvalidTag
    try:
        return _aesgcm(key).decrypt(nonce, bytes(buf[_HEADER.size:]), bytes(buf[:_HEADER.size]))
    except InvalidTag:
        raise GraphFileError(REFUSED) from None


def with_integrity(plain: bytes) -> bytes:
    """`plain` followed by the integrity footer."""
    return plain + MAGIC_INTEGRITY + hashlib.sha256(plain).digest()


def has_integrity(buf: bytes | memoryview) -> bool:
    footer = len(MAGIC_INTEGRITY) + DIGEST_BYTES
    return len(buf) >= footer and bytes(buf[-footer:-DIGEST_BYTES]) == MAGIC_INTEGRITY


def check_integrity(buf: memoryview) -> memoryview:
    """The payload of a file with an integrity footer (a view, so weights stay zero-copy), once its SHA-256
    matches; `GraphFileError` otherwise."""
    payload = buf[:len(buf) - len(MAGIC_INTEGRITY) - DIGEST_BYTES]
    if not hmac.compare_digest(hashlib.sha256(payload).digest(), bytes(buf[-DIGEST_BYTES:])):
        raise GraphFileError("integrity check failed (SHA-256 of the model differs): tampered file")
    return payload


def _aligned(data: bytes, alignment: int = 64) -> memoryview:
    """`data` copied to an `alignment`-aligned buffer, as a mapped file's weights are (see schema.DATA_ALIGNMENT)."""
    import numpy as np
    raw = np.empty(len(data) + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    raw[start:start + len(data)] = np.frombuffer(data, np.uint8)
    return memoryview(raw[start:start + len(data)]).cast("B")


def unwrap(view: memoryview, key: str | bytes | None) -> memoryview:
    """The plain `.ms` bytes inside a model buffer: decrypted when it is encrypted, its integrity footer checked
    and removed when it has one; their format (`lite.format`) is found only then. A key given for a plain model
    is refused rather than ignored."""
    if is_encrypted(view):
        view = _aligned(decrypt(view, key))
    elif key is not None:
        raise GraphFileError("a decryption key was given, but the model is not encrypted")
    return check_integrity(view) if has_integrity(view) else view
