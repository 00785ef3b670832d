"""The default ``redact`` hook: what the dashboard masks unless told otherwise.

Two rules, applied to payloads, results, metadata and error envelopes at any depth:

- a value under a key that looks like a secret (``password``, ``token``,
  ``api_key``, ``authorization``, ...) is replaced by ``MASK`` whatever it is;
- inside every string (and every integer that could be a card number), the parts
  that look like a secret are replaced by ``MASK`` and the rest of the text is
  kept, so a traceback or a message stays readable: card numbers, bearer and
  basic credentials, passwords in URLs and query strings, and the usual shapes
  of API tokens (see ``SECRET_TEXT``).

Both are heuristics: they catch the common leaks, not every secret. A hook of
one's own can call ``default_redact`` and mask more, or replace it entirely.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MASK", "SECRET_KEYS", "SECRET_TEXT", "default_redact", "mask_text"]

MASK = "••••••"

SECRET_KEYS = re.compile(
    r"pass(word|wd)?|secret|token|api[-_]?key|auth|credential|private[-_]?key|cookie|session"
    r"|signature|ssn|card[-_]?number|cvv",
    re.IGNORECASE,
)

# Text that is a secret wherever it appears. Each alternative is one shape:
SECRET_TEXT = re.compile(
    "|".join(
        (
            # "Bearer <credentials>", or "Authorization: Basic <credentials>" (a header
            # copied into a message): the words stay, the credentials go. A lone
            # "Basic" is too common a word to go by.
            r"(?P<scheme>\bBearer\s+|\bAuthorization:\s*Basic\s+)[A-Za-z0-9._~+/=-]{8,}",
            # A password in a URL (postgresql://user:password@host): the user stays.
            r"(?P<userinfo>\b[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)[^@\s/]+(?=@)",
            # A secret in a query string (?access_token=..., &api_key=...): the name stays.
            r"(?P<param>[?&](?:access_token|token|api_key|apikey|key|password|secret|sig"
            r"|signature|client_secret)=)[^&\s#]+",
            # JSON Web Tokens: three base64url parts, the first two JSON objects.
            r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
            # API keys with a recognisable prefix: OpenAI and Anthropic (sk-...),
            # Stripe (sk_live_..., rk_test_...), GitHub (ghp_..., github_pat_...),
            # Slack (xoxb-...), AWS access key ids (AKIA...).
            r"\bsk-[A-Za-z0-9_-]{16,}",
            r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        )
    ),
    re.IGNORECASE,
)

# Candidate card numbers: 13 to 19 digits, optionally grouped by single spaces or
# dashes, not part of a longer word, run of digits or decimal number (the digits
# after a point are a fraction, not a card). ``_is_card`` decides.
_CARD_CANDIDATE = re.compile(r"(?<![0-9A-Za-z_.])\d(?:[ -]?\d){12,18}(?![0-9A-Za-z_]|\.\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _is_card(text: str) -> bool:
    """13-19 digits starting 2-6 (the major card networks) that pass the Luhn check.

    The first digit keeps millisecond timestamps (13 digits starting with 1) and
    most numeric ids out.
    """
    digits = text.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


def _mask_secret(match: re.Match[str]) -> str:
    kept = match.group("scheme") or match.group("userinfo") or match.group("param")
    return (kept or "") + MASK


def _mask_card(match: re.Match[str]) -> str:
    return MASK if _is_card(match.group(0)) else match.group(0)


def mask_text(text: str) -> str:
    """``text`` with its card numbers, bearer credentials and API tokens masked.

    Example::

        >>> mask_text("card 4242 4242 4242 4242 declined")
        'card •••••• declined'
    """
    text = SECRET_TEXT.sub(_mask_secret, text)
    return _CARD_CANDIDATE.sub(_mask_card, text)


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and SECRET_KEYS.search(k) else _mask(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return MASK if _is_card(str(value)) else value
    return value


def default_redact(field: str, value: Any, task: Any) -> Any:
    """The default ``redact`` hook: masks what looks like a secret, shows the rest.

    At any depth of the value: everything under a key that looks like a secret
    (password, secret, token, api_key, auth, credential, private_key, cookie,
    session, signature, ssn, card_number, cvv) becomes ``"••••••"``; in every
    string, card numbers (13-19 digits starting 2-6, optionally grouped by spaces
    or dashes, Luhn-valid), ``Bearer`` credentials, JWTs and
    API keys of the usual shapes (``sk-...``, ``sk_live_...``, ``ghp_...``,
    ``github_pat_...``, ``xoxb-...``, ``AKIA...``) become ``"••••••"`` and the
    rest of the string is kept; an integer that is such a card number is masked.

    Args:
        field: ``"payload"``, ``"result"``, ``"metadata"`` or ``"error"`` (the
            error envelope: type, code, message, details).
        value: The decoded JSON value.
        task: The task it belongs to.

    Returns:
        The value to display.

    Example::

        def redact(field, value, task):
            shown = default_redact(field, value, task)
            return "[hidden]" if task.queue == "billing" and field == "payload" else shown
    """
    return _mask(value)
