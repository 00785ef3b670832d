"""The payload codec hook: what is stored in place of a payload, a result or an event payload.

A codec (``CairnQ(..., codec=...)``, ``Worker(..., codec=...)``) turns the checked
JSON text of a value into the JSON object stored in its place, and back. The
stored object is still JSON, so the protocol's columns hold it unchanged; cairnq
recognises it by its marker key, ``"$cairnq_enc"``. Metadata and error envelopes
never pass through a codec.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from .errors import InvalidArgument, SerializationError

MARKER = "$cairnq_enc"
"""The key that marks a stored value as a codec's: ``{"$cairnq_enc": "v1", ...}``."""

_COMPACT = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


@runtime_checkable
class Codec(Protocol):
    """What ``codec=`` takes: ``encode`` and ``decode`` between JSON text and a stored object.

    ``encode(text)`` gets the compact JSON text of a payload, result or event
    payload (already checked against the size and depth limits) and returns the
    JSON object to store instead: a ``dict`` with ``"$cairnq_enc"`` (its format's
    name) among its keys. ``decode(stored)`` gets such an object back and returns
    the original text, or raises ``DecryptionError``.
    """

    def encode(self, text: str) -> dict[str, Any]: ...

    def decode(self, stored: dict[str, Any]) -> str: ...


class DecryptionError(SerializationError):
    """A stored value is encoded and cannot be read here: no codec, or a key it lacks.

    The message names the key id the value was encoded with, never a key.
    """


def is_sealed(value: Any) -> bool:
    """Whether ``value`` (decoded from a stored column) is a codec's object."""
    return type(value) is dict and MARKER in value


def check_codec(codec: Any, where: str) -> Codec | None:
    """``codec`` when it has ``encode`` and ``decode`` (or ``None``), else ``InvalidArgument``."""
    if codec is None or isinstance(codec, Codec):
        return codec
    raise InvalidArgument(
        f"{where} codec= must have encode(text) and decode(stored) methods "
        f"(such as cairnq.encryption.Encrypting), got {type(codec).__name__}"
    )


def seal(codec: Codec, text: str, what: str) -> str:
    """The stored text of ``text`` under ``codec``: its object, as compact JSON."""
    stored = codec.encode(text)
    if not is_sealed(stored):
        raise SerializationError(
            f"the codec's encode() of a {what} must return a dict holding {MARKER!r}, "
            f"got {type(stored).__name__}"
        )
    try:
        return _COMPACT.encode(stored)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"the codec's encoded {what} is not JSON: {exc}") from None


def unseal(codec: Codec | None, stored: dict[str, Any], what: str, task_id: str | None) -> str:
    """The JSON text ``stored`` (a codec's object) was made from.

    Raises:
        DecryptionError: there is no codec here, or it cannot decode ``stored``.
    """
    where = f" of task {task_id}" if task_id else ""
    if codec is None:
        raise DecryptionError(
            f"the {what}{where} is encoded ({described(stored)}) and this client or worker "
            f"has no codec=: give it the codec (and keys) that encoded it",
            task_id=task_id,
        )
    text = codec.decode(stored)
    if not isinstance(text, str):
        raise DecryptionError(
            f"the codec's decode() of the {what}{where} must return JSON text, "
            f"got {type(text).__name__}",
            task_id=task_id,
        )
    return text


def described(stored: dict[str, Any]) -> str:
    """A codec's object in words, without its content: ``encrypted, v1, key '2026-12'``."""
    fmt = stored.get(MARKER)
    key = stored.get("k")
    words = ["encrypted"]
    if isinstance(fmt, str):
        words.append(fmt[:40])
    if isinstance(key, str):
        words.append(f"key {key[:80]!r}")
    return ", ".join(words)


def refuse_payload_path(key: object, what: str) -> None:
    """Refuse a key read from a payload path (``"payload.customer"``) on an encrypting
    client or worker: the path is read in SQL, where the payload is ciphertext."""
    if isinstance(key, str) and key.split(".")[0] == "payload":
        raise InvalidArgument(
            f"{what} is keyed by {key!r}, a payload path read in SQL, and payloads are "
            "encrypted here (codec=); key it by a metadata path left in the clear "
            "('metadata.customer') instead"
        )
