"""The JSON boundary: what may be stored, and reading back what others stored.

Values are encoded compactly (``separators=(",", ":")``, UTF-8 text) so that
both backends and the reference SDKs read them identically (a negative zero is
written as ``0.0``, which is all PostgreSQL's ``jsonb`` could keep of it). Rejected on the way
in: NaN and infinities, lone surrogates, NUL characters (PostgreSQL ``jsonb``
cannot hold them), an object whose keys would be written twice (``{"1": 0, 1: 0}``:
JSON keys are strings, so ``1`` becomes ``"1"``), nesting deeper than
``max_depth``, and encodings over ``max_bytes``. On the way out, text another
writer left behind that Python cannot represent faithfully raises
``SerializationError`` instead of crashing the reader.

Error envelopes are the exception: a failure must always be recordable, so
``encode_error`` escapes what the other values would be refused for, and falls
back to a stripped envelope when the details cannot be stored.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ._sealing import Codec, DecryptionError, described, is_sealed, seal, unseal
from .errors import SerializationError, safe_str

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 64
# Python's own default for int(str): longer digit strings take quadratic time to convert.
MAX_INT_DIGITS = 4300

# A number in exponent form (1e+16), matched only outside strings: the alternation
# consumes each string whole, so group 1 is set only for a bare number.
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?[eE][+-]?\d+)')
_EXPONENT_HINT = re.compile(r"\d[eE][+-]?\d")
# A negative zero (-0.0), matched only outside strings, as above.
_STRING_OR_NEGATIVE_ZERO = re.compile(r'"(?:[^"\\]|\\.)*"|(-)0\.0(?![0-9])')

# An escaped NUL inside a JSON string: `\u0000` preceded by an even number of
# backslashes (an odd count would make it the literal text "\u0000").
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")

# An object key that a non-string key (1, 1.5, True, None) could have been encoded
# as. Every such key is written right after "{" or ","; a match only means "look".
_NON_STRING_KEY_HINT = re.compile(r'[{,]"(?:-?\d[\d.e+-]*|true|false|null)":')

# Either hint above, in one scan of the text: every branch starts with a literal,
# so the regex engine skips ahead to the next candidate character instead of
# trying each position.
_KEY_TEXT = r'"(?:-?\d[\d.e+-]*|true|false|null)":'
_ANY_HINT = re.compile(
    "|".join([r"\{" + _KEY_TEXT, "," + _KEY_TEXT, *(rf"{d}[eE][+-]?\d" for d in "0123456789")])
)

# json.dumps with these options would build a new encoder on every call.
_COMPACT = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))

# Longest type, code and message kept in a stripped error envelope (characters).
ERROR_TEXT_LIMITS = {"type": 200, "code": 200, "message": 4000}


@dataclass(frozen=True)
class JsonCodec:
    """Encodes and decodes stored JSON under size and depth limits.

    ``sealer``: the payload codec (``codec=``) that ``seal`` and ``opened`` apply to
    payloads, results and event payloads; ``None``, they are stored as plain JSON.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    sealer: Codec | None = None

    def seal(self, value: Any, *, what: str) -> str:
        """``encode``, then, with a ``sealer``, the stored text of its object instead.

        The limits apply to the value's own JSON; the stored object is larger.
        """
        return self.seal_text(self.encode(value, what=what), what=what)

    def seal_text(self, text: str, *, what: str) -> str:
        """The stored text of ``text`` (JSON ``encode`` made): itself without a ``sealer``."""
        return text if self.sealer is None else seal(self.sealer, text, what)

    def seal_optional(self, value: Any, *, what: str) -> str | None:
        """Like ``seal``, but ``None`` stays SQL NULL."""
        return None if value is None else self.seal(value, what=what)

    def opened(self, value: Any, *, what: str, task_id: str | None = None) -> Any:
        """A decoded stored value with its codec's encoding undone (any other value as is).

        Raises:
            DecryptionError: the value is encoded and this codec has no ``sealer``
                that can decode it.
        """
        if not is_sealed(value):
            return value
        return self.decode(unseal(self.sealer, value, what, task_id), what=what, task_id=task_id)

    def opened_task(self, task: Any) -> Any:
        """``task`` (a ``Task``) with its payload and result ``opened``; itself when
        neither is encoded."""
        if not (is_sealed(task.payload) or is_sealed(task.result)):
            return task
        return dataclasses.replace(
            task,
            payload=self.opened(task.payload, what="payload", task_id=task.id),
            result=self.opened(task.result, what="result", task_id=task.id),
        )

    def shown(self, value: Any, *, what: str, task_id: str | None = None) -> Any:
        """``opened`` for people (the CLI, the dashboard): a value this codec cannot
        decode reads as ``"<encrypted, v1, key '...'>"`` instead of raising."""
        try:
            return self.opened(value, what=what, task_id=task_id)
        except DecryptionError:
            return f"<{described(value)}>"

    def encode(self, value: Any, *, what: str = "value") -> str:
        """Encode ``value`` as compact JSON text, or raise ``SerializationError``."""
        try:
            text = _COMPACT.encode(value)
        except ValueError as exc:
            raise SerializationError(f"{what} is not valid JSON: {exc}") from None
        except TypeError as exc:
            raise SerializationError(f"{what} is not JSON-serializable: {exc}") from None
        except RecursionError:
            raise SerializationError(f"{what} is nested too deeply to encode") from None
        if _ANY_HINT.search(text):
            if _NON_STRING_KEY_HINT.search(text):
                _refuse_duplicate_keys(value, what)
            if _EXPONENT_HINT.search(text):
                text = _STRING_OR_EXPONENT.sub(_positional, text)
        if "-0.0" in text:
            text = _STRING_OR_NEGATIVE_ZERO.sub(_unsigned_zero, text)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise SerializationError(f"{what} contains a lone surrogate character") from None
        if size > self.max_bytes:
            raise SerializationError(
                f"{what} is {size} bytes encoded, over the limit of {self.max_bytes}"
            )
        if "\\u0000" in text and _ESCAPED_NUL.search(text):
            raise SerializationError(f"{what} contains a NUL character (\\u0000)")
        if text.count("[") + text.count("{") > self.max_depth:
            depth = _depth(value)
            if depth > self.max_depth:
                raise SerializationError(
                    f"{what} is nested {depth} levels deep, over the limit of {self.max_depth}"
                )
        return text

    def encode_error(self, envelope: Mapping[str, Any], *, retryable: bool) -> str:
        """Encode a failed attempt's error envelope; never raises.

        Tried in turn: the envelope as given; the envelope with NUL characters
        and lone surrogates in its strings and keys written as visible backslash
        escapes (``storable_text``); and, when it still cannot be stored (details
        that are not JSON, nested too deeply, too large), the stripped envelope:
        type, code and message (escaped, capped by ``ERROR_TEXT_LIMITS``),
        ``retryable`` and empty details.
        """
        try:
            return self.encode(envelope, what="error envelope")
        except Exception:
            pass
        try:
            return self.encode(_storable(envelope, self.max_depth + 1), what="error envelope")
        except Exception:
            pass
        source: Mapping[str, Any] = envelope if isinstance(envelope, Mapping) else {}
        defaults = {"type": "TaskError", "code": "task_error", "message": "task failed"}
        stripped: dict[str, Any] = {
            field: _capped(source.get(field), default, ERROR_TEXT_LIMITS[field])
            for field, default in defaults.items()
        }
        stripped.update(retryable=bool(retryable), details={})
        # Bounded by the caps, so it fits the default limits whatever this codec's are.
        return DEFAULT_CODEC.encode(stripped, what="error envelope")

    def encode_optional(self, value: Any, *, what: str = "value") -> str | None:
        """Like ``encode``, but ``None`` stays SQL NULL."""
        return None if value is None else self.encode(value, what=what)

    @staticmethod
    def decode(text: str | None, *, what: str = "value", task_id: str | None = None) -> Any:
        """Parse stored JSON text; ``None`` (SQL NULL) reads as ``None``."""
        if text is None:
            return None
        if text == "{}":
            return {}  # the default payload and metadata, read for every task
        try:
            if isinstance(text, str):
                return _DECODER.decode(text)
            return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:
            where = f" of task {task_id}" if task_id else ""
            raise SerializationError(
                f"stored {what}{where} is not JSON Python can read: {exc}", task_id=task_id
            ) from None


_ONLY_STR = frozenset((str,))
_SCALARS = frozenset((str, int, float, bool, type(None)))


def _refuse_duplicate_keys(value: Any, what: str) -> None:
    """Raise ``SerializationError`` for a dict in ``value`` two of whose keys encode alike.

    Only a dict with a key that is not a string can hold such a pair.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not _ONLY_STR.issuperset(map(type, item)):
                seen: dict[str, Any] = {}
                for key in item:
                    text = _key_text(key)
                    if text in seen:
                        raise SerializationError(
                            f"{what} has the key {text!r} twice: {seen[text]!r} and {key!r} "
                            "are both written as it in JSON"
                        )
                    seen[text] = key
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if not _SCALARS.issuperset(map(type, children)):
            stack.extend(children)


def _key_text(key: Any) -> str:
    """The text ``json`` writes for a dict key (after it accepted the key)."""
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return json.dumps(key)
    if isinstance(key, int):
        return int.__repr__(key)
    return float.__repr__(key)


def storable_text(text: str) -> str:
    """``text`` with what no store holds written visibly: NUL as ``\\x00``, a lone
    surrogate as ``\\udXXX``. Every other character, backslashes included, is kept."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _storable(value: Any, depth: int) -> Any:
    """A copy of ``value`` with every string and string key passed through ``storable_text``.

    Below ``depth`` levels, and for anything not a JSON container or string, the
    value is kept as it is (the encoder then judges it). Two keys that escape to
    the same text raise ``SerializationError`` rather than one silently replacing the other.
    """
    if isinstance(value, str):
        return storable_text(value)
    if depth <= 0:
        return value
    if isinstance(value, dict):
        copy = {
            storable_text(key) if isinstance(key, str) else key: _storable(item, depth - 1)
            for key, item in value.items()
        }
        if len(copy) != len(value):
            raise SerializationError("two keys escape to the same text")
        return copy
    if isinstance(value, (list, tuple)):
        return [_storable(item, depth - 1) for item in value]
    return value


def _capped(value: Any, default: str, limit: int) -> str:
    """``value`` as storable text of at most ``limit`` characters, saying how much was cut."""
    text = storable_text(default if value is None else safe_str(value))
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text


def _positional(match: re.Match[str]) -> str:
    """Write an exponent-form float positionally (``1e+16`` -> ``10000000000000000.0``).

    PostgreSQL's ``jsonb`` keeps numbers as ``numeric`` and prints them without an
    exponent, so ``1e+16`` would read back as the integer 10000000000000000. A
    fractional digit keeps it a float on every backend.
    """
    number = match.group(1)
    if number is None:
        return match.group(0)
    text = format(Decimal(number), "f")
    return text if "." in text else text + ".0"


def _unsigned_zero(match: re.Match[str]) -> str:
    """Write -0.0 as 0.0: PostgreSQL's ``numeric`` has no negative zero, so ``jsonb``
    would read it back as 0.0 while SQLite kept -0.0. Both now store 0.0."""
    return match.group(0) if match.group(1) is None else "0.0"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        # The number itself is payload content: leave it out of the message.
        raise ValueError(f"a {len(text)}-character number is out of range for a float")
    return number


# One decoder for every read: json.loads with options builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _int_digits_limit() -> int:
    get = getattr(sys, "get_int_max_str_digits", None)
    limit = get() if get is not None else 0
    return min(limit, MAX_INT_DIGITS) if limit else MAX_INT_DIGITS


class _TooManyDigits(ValueError):
    pass


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    limit = _int_digits_limit()
    if digits > limit:
        # The digits themselves are input content: only their count is reported.
        raise _TooManyDigits(f"an integer of {digits} digits, over the limit of {limit}")
    return int(text)


_INPUT_DECODER = json.JSONDecoder(parse_int=_bounded_int)


def parse_input(text: str, *, what: str) -> Any:
    """Parse JSON a person gave (a command-line payload, a scenario file).

    Every way it can be unreadable is one ``SerializationError`` line: malformed
    text, an integer of more digits than Python converts (4300), or nesting deep
    enough to exhaust the parser's recursion. Whether the value is portable
    (NaN, depth over 64, size) is the client's check, as for any payload.

    Raises:
        SerializationError: the text cannot be read as JSON.
    """
    try:
        return _INPUT_DECODER.decode(text)
    except _TooManyDigits as exc:
        raise SerializationError(f"{what} holds {exc}") from None
    except json.JSONDecodeError as exc:
        raise SerializationError(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise SerializationError(
            f"{what} is nested too deeply to read (the limit is {DEFAULT_MAX_DEPTH} levels)"
        ) from None


def _depth(value: Any) -> int:
    """Nesting depth of containers (a scalar is 0, ``[]`` is 1)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children)
    return deepest


DEFAULT_CODEC = JsonCodec()
