"""Task and worker ids: ``task_`` / ``worker_`` and a Crockford ULID."""

from __future__ import annotations

import base64

import pytest

from cairnq import _ids

_RFC4648 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def reference_ulid(ms: int, random: bytes) -> str:
    """The ULID spec's encoding, spelled another way: base32 of the value's 130 bits."""
    value = ms << 80 | int.from_bytes(random, "big")
    packed = (value << 6).to_bytes(17, "big")
    rfc = base64.b32encode(packed)[:26].decode("ascii")
    return rfc.translate(str.maketrans(_RFC4648, _CROCKFORD))


@pytest.mark.parametrize("ms", [0, 1, 1469918176385, 1_733_300_000_000, 2**48 - 1])
@pytest.mark.parametrize("random", [bytes(10), b"\xff" * 10, bytes(range(1, 11))])
def test_a_ulid_is_the_time_then_the_random_bits_in_crockford_base32(
    monkeypatch: pytest.MonkeyPatch, ms: int, random: bytes
) -> None:
    monkeypatch.setattr(_ids.os, "urandom", lambda n: random[:n])
    assert _ids.ulid(ms) == reference_ulid(ms, random)


def test_the_ulid_spec_example_timestamp_encodes_as_the_spec_shows() -> None:
    assert _ids.ulid(1469918176385)[:10] == "01ARYZ6S41"


def test_ids_are_26_crockford_characters_after_their_prefix() -> None:
    made = _ids.task_id()
    assert made.startswith("task_")
    assert len(made) == len("task_") + 26
    assert set(made[len("task_") :]) <= set(_CROCKFORD)
    assert _ids.worker_id().startswith("worker_")


def test_the_ids_of_one_batch_sort_in_the_order_they_were_made() -> None:
    made = _ids.task_ids(1000)
    assert made == sorted(made)
    assert len(set(made)) == 1000


def test_a_batch_id_is_a_ulid_of_its_millisecond_and_random_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    random = bytes(range(1, 11))
    monkeypatch.setattr(_ids.os, "urandom", lambda n: random[:n])
    first, second = _ids.task_ids(2, 1_733_300_000_000)
    start = int.from_bytes(random, "big") >> 1
    assert first == "task_" + reference_ulid(1_733_300_000_000, start.to_bytes(10, "big"))
    assert second == "task_" + reference_ulid(1_733_300_000_000, (start + 1).to_bytes(10, "big"))
