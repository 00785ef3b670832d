"""The one rule for duration and time options: ``duration_ms`` and ``point_ms``."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from cairnq import InvalidArgument
from cairnq.durations import delay_ms_of, duration_ms, point_ms
from cairnq.extensions.snooze import Snooze

UTC = datetime.timezone.utc


def test_a_bare_number_means_seconds() -> None:
    assert duration_ms(90, "delay") == 90_000


def test_a_float_number_means_seconds_to_the_millisecond() -> None:
    assert duration_ms(0.3, "delay") == 300


def test_a_timedelta_is_its_length() -> None:
    assert duration_ms(datetime.timedelta(minutes=5), "delay") == 300_000


def test_a_string_with_a_decimal_amount_is_parsed() -> None:
    assert duration_ms("1.5s", "delay") == 1_500


def test_a_string_without_a_unit_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="delay: duration '60' has no unit"):
        duration_ms("60", "delay")


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_refused(value: bool) -> None:
    with pytest.raises(InvalidArgument, match="delay must be a duration: seconds"):
        duration_ms(value, "delay")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_number_that_is_not_finite_is_refused(value: float) -> None:
    with pytest.raises(InvalidArgument, match="finite number of seconds"):
        duration_ms(value, "delay")


def test_a_negative_number_is_refused_in_seconds() -> None:
    with pytest.raises(InvalidArgument, match=r"^snooze delay must be 0 seconds or more, got -5$"):
        Snooze(-5)


def test_a_string_over_the_bound_names_the_string_and_the_bound_as_a_duration() -> None:
    with pytest.raises(InvalidArgument, match=r"^every must be at most 1d, got '2d'$"):
        duration_ms("2d", "every", high_ms=86_400_000)


def test_a_timedelta_under_the_bound_names_it_in_seconds() -> None:
    with pytest.raises(
        InvalidArgument, match=r"^every must be 1s or more, got timedelta\(seconds=0.5\)$"
    ):
        duration_ms(datetime.timedelta(milliseconds=500), "every", low_ms=1_000)


def test_delay_ms_of_reads_the_same_rule() -> None:
    assert delay_ms_of("1m30s") == delay_ms_of(90) == 90_000


def test_an_aware_datetime_is_its_instant_in_epoch_milliseconds() -> None:
    moment = datetime.datetime(2030, 1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert point_ms(moment, "run_at") == 1_893_456_000_000


def test_a_naive_datetime_is_refused_and_told_to_add_a_tzinfo() -> None:
    with pytest.raises(InvalidArgument, match="run_at=2030-01-01T00:00:00 is a naive datetime"):
        point_ms(datetime.datetime(2030, 1, 1), "run_at")


@pytest.mark.parametrize("value", [datetime.date(2030, 1, 1), 1_893_456_000_000, "2030-01-01"])
def test_a_point_that_is_not_a_datetime_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgument, match="run_at must be an aware datetime"):
        point_ms(value, "run_at")
