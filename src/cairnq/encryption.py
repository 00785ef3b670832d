"""Payloads, results and event payloads encrypted at rest (``docs/encryption.md``).

``Encrypting`` is a codec (``codec=`` on ``CairnQ`` and ``Worker``) that stores
each value as a JSON object holding Fernet ciphertext (AES-128-CBC with an
HMAC-SHA256, from the ``cryptography`` package: the ``encrypt`` extra)::

    {"$cairnq_enc": "v1", "k": "2026-12", "ct": "gAAAAAB..."}

``k`` names the key of the ring that encrypted it, so a ring of several keys
decrypts what any of them encrypted and encrypts with one (``current``): keys
rotate by adding the new one as ``current`` and dropping the old one once no
stored value needs it. Keys never appear in a repr, a log line or an error.

Example::

    from cairnq.encryption import Encrypting

    codec = Encrypting({"2026-12": os.environ["CAIRNQ_KEY"]})
    cq = CairnQ.sqlite("tasks.db", codec=codec)
    worker = Worker(cq)                     # the worker reads through cq's codec
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._extras import missing_extra
from ._sealing import MARKER, Codec, DecryptionError, is_sealed
from .errors import InvalidArgument

__all__ = ["FORMAT", "KEYS_ENV", "Codec", "DecryptionError", "Encrypting", "keys_from_env"]

FORMAT = "v1"
"""The format name ``Encrypting`` writes under ``"$cairnq_enc"``."""

KEYS_ENV = "CAIRNQ_ENCRYPTION_KEYS"
"""The environment variable ``keys_from_env`` (and the CLI) reads:
``id=key,id=key``, the first one current."""

_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def _fernet() -> Any:
    try:
        from cryptography import fernet
    except ImportError:
        raise missing_extra("cairnq.encryption", "encrypt", "cryptography") from None
    return fernet


class Encrypting(Codec):
    """A key ring that encrypts with one key and decrypts with any of its keys.

    Args:
        keys: Key id to Fernet key (32 url-safe base64-encoded bytes, as
            ``Encrypting.generate_key()`` makes), in a ``dict``. Ids are 1 to 64
            letters, digits and ``_.:-``; they are stored beside the ciphertext.
        current: The id of the key new values are encrypted with; the only key
            when there is one, and required when there are several.

    Raises:
        InvalidArgument: no keys, an id or a key of the wrong type or form, or a
            ``current`` the ring does not hold (the message names ids, never keys).
        ImportError: the ``encrypt`` extra (``cryptography``) is not installed.

    Example::

        ring = Encrypting({"2027-01": new_key, "2026-12": old_key}, current="2027-01")
    """

    def __init__(self, keys: Mapping[str, str | bytes], *, current: str | None = None) -> None:
        if not isinstance(keys, Mapping):
            raise InvalidArgument(
                f"keys must be a dict of key id to Fernet key, got {type(keys).__name__}"
            )
        if not keys:
            raise InvalidArgument("keys must hold at least one key")
        fernet = _fernet()
        ring: dict[str, Any] = {}
        for key_id, key in keys.items():
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                raise InvalidArgument(
                    f"a key id must be 1 to 64 letters, digits and _.:- (starting with a "
                    f"letter or digit), got {_shown(key_id)} (a dict of id to key: were "
                    "the id and the key swapped?)"
                )
            if not isinstance(key, (str, bytes)):
                raise InvalidArgument(
                    f"the key {_shown(key_id)} must be a str or bytes, got {type(key).__name__}"
                )
            try:
                ring[key_id] = fernet.Fernet(key)
            except (ValueError, TypeError):
                raise InvalidArgument(
                    f"the key {_shown(key_id)} is not a Fernet key (32 url-safe base64-encoded "
                    "bytes; make one with Encrypting.generate_key())"
                ) from None
        if current is None:
            if len(ring) > 1:
                raise InvalidArgument(
                    f"current= must name the key to encrypt with among {_shown_all(ring)}"
                )
            current = next(iter(ring))
        elif not isinstance(current, str) or current not in ring:
            raise InvalidArgument(
                f"current={_shown(current)} is not one of the key ids {_shown_all(ring)}"
            )
        self._ring = ring
        self._invalid = fernet.InvalidToken
        self.current = current
        self.key_ids = tuple(ring)

    @staticmethod
    def generate_key() -> str:
        """A new random Fernet key, as text to keep in a secret store."""
        key: bytes = _fernet().Fernet.generate_key()
        return key.decode("ascii")

    def encode(self, text: str) -> dict[str, Any]:
        """``text`` encrypted with the current key, as the object to store."""
        token: bytes = self._ring[self.current].encrypt(text.encode("utf-8"))
        return {MARKER: FORMAT, "k": self.current, "ct": token.decode("ascii")}

    def decode(self, stored: dict[str, Any]) -> str:
        """The text ``stored`` was encrypted from.

        Raises:
            DecryptionError: another format, a key id the ring does not hold, or
                ciphertext that key does not authenticate (altered, or another key).
        """
        if not is_sealed(stored) or stored.get(MARKER) != FORMAT:
            raise DecryptionError(
                f"the stored value is not in the format {FORMAT!r} this codec reads "
                f"(found {str(stored.get(MARKER))[:40]!r})"
            )
        key_id, token = stored.get("k"), stored.get("ct")
        fernet = self._ring.get(key_id) if isinstance(key_id, str) else None
        if fernet is None:
            raise DecryptionError(
                f"the value was encrypted with the key {str(key_id)[:80]!r}, which this ring "
                f"does not hold (it holds {list(self.key_ids)})"
            )
        if not isinstance(token, str):
            raise DecryptionError(f"the value encrypted with the key {key_id!r} has no ciphertext")
        try:
            plain: bytes = fernet.decrypt(token.encode("ascii"))
        except (self._invalid, UnicodeEncodeError):
            raise DecryptionError(
                f"the value encrypted with the key {key_id!r} does not decrypt with the key "
                "of that id here: it was altered, or the id names another key"
            ) from None
        return plain.decode("utf-8")

    def __repr__(self) -> str:
        return f"Encrypting(key_ids={list(self.key_ids)!r}, current={self.current!r})"

    def __reduce__(self) -> Any:
        raise TypeError("an Encrypting codec holds keys and is not pickled")


def keys_from_env(name: str = KEYS_ENV) -> Encrypting | None:
    """An ``Encrypting`` ring from the environment variable ``name``, or ``None`` when unset.

    The variable holds ``id=key`` pairs separated by commas; the first is current.

    Raises:
        InvalidArgument: the variable is set but malformed (the message names ids only).

    Example::

        # CAIRNQ_ENCRYPTION_KEYS="2027-01=<key>,2026-12=<old key>"
        cq = CairnQ.sqlite("tasks.db", codec=keys_from_env())
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    keys: dict[str, str] = {}
    for number, pair in enumerate(text.split(","), start=1):
        key_id, sep, key = pair.strip().partition("=")
        if not sep or not key_id or not key:
            raise InvalidArgument(f"{name}: entry {number} is not id=key")
        keys[key_id] = key
    return Encrypting(keys, current=next(iter(keys)))


def _shown(key_id: object) -> str:
    """A key id as errors show it: a short one whole; anything long enough to be a key
    given by mistake (or not text) by its first characters and length only, so that no
    error repeats a key."""
    if isinstance(key_id, str) and len(key_id) <= 16:
        return repr(key_id)
    if isinstance(key_id, str):
        return f"{key_id[:4]!r}... ({len(key_id)} characters)"
    return f"a {type(key_id).__name__}"


def _shown_all(ids: Iterable[object]) -> str:
    return "[" + ", ".join(_shown(i) for i in sorted(ids, key=str)) + "]"
