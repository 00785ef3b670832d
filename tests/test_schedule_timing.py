"""Schedule timing: which instants are slots, for cron expressions in a zone and for intervals.

Pure: fixed instants, no database, no clock. Expected slots are written in UTC.
"""

from __future__ import annotations

import datetime
import itertools
import re
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairnq.errors import InvalidArgument
from cairnq.extensions.schedules._timing import HORIZON_MS, Timing

UTC = datetime.timezone.utc
PARIS = "Europe/Paris"
NEW_YORK = "America/New_York"


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    """Epoch milliseconds of a UTC time."""
    moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    return int(moment.timestamp()) * 1_000


def on(year: int, month: int, day: int, *times: str) -> list[int]:
    """Epoch milliseconds of ``"HH:MM"`` UTC times on one day."""
    return [ms(year, month, day, int(text[:2]), int(text[3:])) for text in times]


NOW = ms(2026, 1, 1)
"""The reference instant of every parse's five-year check."""


def cron(expression: str, tz: str | None = None) -> Timing:
    return Timing.parse(cron=expression, tz=tz, now_ms=NOW)


# --- cron across daylight-saving transitions ------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "after", "through", "expected"),
    [
        pytest.param(
            PARIS,
            ms(2026, 3, 28, 12),
            ms(2026, 3, 30, 12),
            # 02:30 CET does not exist: 03:00 CEST; the next day 02:30 CEST.
            [ms(2026, 3, 29, 1), ms(2026, 3, 30, 0, 30)],
            id="paris",
        ),
        pytest.param(
            NEW_YORK,
            ms(2026, 3, 7, 12),
            ms(2026, 3, 9, 12),
            # 02:30 EST does not exist: 03:00 EDT; the next day 02:30 EDT.
            [ms(2026, 3, 8, 7), ms(2026, 3, 9, 6, 30)],
            id="new-york",
        ),
    ],
)
def test_a_nonexistent_wall_time_runs_once_when_the_gap_ends(
    tz: str, after: int, through: int, expected: list[int]
) -> None:
    assert cron("30 2 * * *", tz).slots(after, through, limit=10) == expected


@pytest.mark.parametrize(
    ("tz", "expression", "after", "through", "expected"),
    [
        pytest.param(
            PARIS,
            "30 2 * * *",
            ms(2026, 10, 24, 12),
            ms(2026, 10, 26, 12),
            # 02:30 happens at 00:30 UTC (CEST) and 01:30 UTC (CET): the first only.
            [ms(2026, 10, 25, 0, 30), ms(2026, 10, 26, 1, 30)],
            id="paris-02:30",
        ),
        pytest.param(
            NEW_YORK,
            "30 1 * * *",
            ms(2026, 10, 31, 12),
            ms(2026, 11, 2, 12),
            # 01:30 happens at 05:30 UTC (EDT) and 06:30 UTC (EST): the first only.
            [ms(2026, 11, 1, 5, 30), ms(2026, 11, 2, 6, 30)],
            id="new-york-01:30",
        ),
    ],
)
def test_a_repeated_wall_time_runs_once_at_its_first_occurrence(
    tz: str, expression: str, after: int, through: int, expected: list[int]
) -> None:
    assert cron(expression, tz).slots(after, through, limit=10) == expected


def test_a_wall_time_after_the_fall_back_hour_runs_once_in_new_york() -> None:
    # On 2026-11-01 New York repeats 01:00-02:00; 02:30 EST occurs once.
    timing = cron("30 2 * * *", NEW_YORK)
    assert timing.slots(ms(2026, 11, 1), ms(2026, 11, 1, 23), limit=10) == [ms(2026, 11, 1, 7, 30)]


@pytest.mark.parametrize(
    ("tz", "after", "through", "expected"),
    [
        pytest.param(
            PARIS,
            ms(2026, 3, 29, 0),
            ms(2026, 3, 29, 2),
            # 02:00-02:45 CET do not exist and all become 03:00 CEST (01:00 UTC) once.
            on(2026, 3, 29, "00:15", "00:30", "00:45", "01:00", "01:15", "01:30", "01:45")
            + on(2026, 3, 29, "02:00"),
            id="paris-spring",
        ),
        pytest.param(
            PARIS,
            ms(2026, 10, 25, 0),
            ms(2026, 10, 25, 2, 30),
            # 01:00-01:45 UTC are the second pass of 02:00-02:45: no slots.
            on(2026, 10, 25, "00:15", "00:30", "00:45", "02:00", "02:15", "02:30"),
            id="paris-fall",
        ),
        pytest.param(
            NEW_YORK,
            ms(2026, 3, 8, 6),
            ms(2026, 3, 8, 8),
            on(2026, 3, 8, "06:15", "06:30", "06:45", "07:00", "07:15", "07:30", "07:45")
            + on(2026, 3, 8, "08:00"),
            id="new-york-spring",
        ),
        pytest.param(
            NEW_YORK,
            ms(2026, 11, 1, 4, 30),
            ms(2026, 11, 1, 7, 30),
            # 06:00-06:45 UTC are the second pass of 01:00-01:45: no slots.
            on(2026, 11, 1, "04:45", "05:00", "05:15", "05:30", "05:45", "07:00", "07:15")
            + on(2026, 11, 1, "07:30"),
            id="new-york-fall",
        ),
    ],
)
def test_every_quarter_hour_across_a_transition_gives_each_instant_once(
    tz: str, after: int, through: int, expected: list[int]
) -> None:
    assert cron("*/15 * * * *", tz).slots(after, through, limit=100) == expected


@pytest.mark.parametrize(
    ("tz", "after", "through", "expected"),
    [
        pytest.param(
            PARIS,
            ms(2026, 10, 24, 21, 30),
            ms(2026, 10, 25, 3, 30),
            # Wall 00:00, 01:00, 02:00 (CEST), 03:00, 04:00 (CET).
            on(2026, 10, 24, "22:00", "23:00") + on(2026, 10, 25, "00:00", "02:00", "03:00"),
            id="paris",
        ),
        pytest.param(
            NEW_YORK,
            ms(2026, 11, 1, 3, 30),
            ms(2026, 11, 1, 8, 30),
            # Wall 00:00, 01:00 (EDT), 02:00, 03:00 (EST).
            on(2026, 11, 1, "04:00", "05:00", "07:00", "08:00"),
            id="new-york",
        ),
    ],
)
def test_every_hour_across_fall_back_runs_the_repeated_hour_once(
    tz: str, after: int, through: int, expected: list[int]
) -> None:
    assert cron("0 * * * *", tz).slots(after, through, limit=100) == expected


def test_a_range_starting_in_the_second_pass_holds_no_first_pass_slot() -> None:
    # 01:20 UTC is 02:20 CET, the second pass; 02:30 CEST (00:30 UTC) is behind it.
    timing = cron("*/15 * * * *", PARIS)
    assert timing.slots(ms(2026, 10, 25, 1, 20), ms(2026, 10, 25, 2, 15), limit=10) == on(
        2026, 10, 25, "02:00", "02:15"
    )


def test_a_range_starting_in_the_first_pass_keeps_the_rest_of_it() -> None:
    # 00:20 UTC is 02:20 CEST, the first pass.
    timing = cron("*/15 * * * *", PARIS)
    assert timing.slots(ms(2026, 10, 25, 0, 20), ms(2026, 10, 25, 2, 0), limit=10) == on(
        2026, 10, 25, "00:30", "00:45", "02:00"
    )


# --- cron expressions -----------------------------------------------------------------------


def test_a_six_field_expression_reads_seconds_first() -> None:
    timing = cron("*/20 * * * * *")
    assert timing.slots(0, 60_000, limit=10) == [20_000, 40_000, 60_000]


def test_a_cron_slot_after_after_ms_by_a_millisecond_is_included() -> None:
    assert cron("*/20 * * * * *").slots(19_999, 40_000, limit=10) == [20_000, 40_000]


def test_a_cron_slot_a_millisecond_before_after_ms_is_excluded() -> None:
    assert cron("*/20 * * * * *").slots(20_001, 60_000, limit=10) == [40_000, 60_000]


@pytest.mark.parametrize(
    ("alias", "expanded"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_an_alias_is_stored_as_its_five_fields(alias: str, expanded: str) -> None:
    assert cron(alias).cron == expanded


@pytest.mark.parametrize(
    ("alias", "first_slot"),
    [
        ("@yearly", ms(2027, 1, 1)),
        ("@monthly", ms(2026, 2, 1)),
        ("@weekly", ms(2026, 1, 4)),
        ("@daily", ms(2026, 1, 2)),
        ("@hourly", ms(2026, 1, 1, 1)),
    ],
)
def test_an_alias_fires_when_its_expansion_does(alias: str, first_slot: int) -> None:
    assert cron(alias).next_slot(ms(2026, 1, 1)) == first_slot


def test_cron_whitespace_is_normalised_to_single_spaces() -> None:
    assert cron("  */5 \t *  * * *\n").cron == "*/5 * * * *"


def test_a_cron_expression_is_read_in_its_zone() -> None:
    # 09:00 in Paris in January is 08:00 UTC.
    assert cron("0 9 * * *", PARIS).next_slot(ms(2026, 1, 5)) == ms(2026, 1, 5, 8)


def test_a_cron_timing_defaults_to_utc() -> None:
    assert cron("0 9 * * *").tz == "UTC"


# --- intervals ------------------------------------------------------------------------------


def test_interval_slots_are_multiples_of_the_interval_since_the_epoch() -> None:
    timing = Timing.parse(every="90s")
    assert timing.slots(1_000_000, 1_300_000, limit=10) == [1_080_000, 1_170_000, 1_260_000]


def test_interval_slots_before_the_epoch_are_aligned_too() -> None:
    assert Timing.parse(every="90s").slots(-200_000, 0, limit=10) == [-180_000, -90_000, 0]


def test_interval_slots_are_exact_far_from_the_epoch() -> None:
    base = 7_000 * 10**14
    timing = Timing.parse(every=7)
    assert timing.slots(base + 3_000, base + 14_000, limit=10) == [base + 7_000, base + 14_000]


@pytest.mark.parametrize(
    ("every", "every_ms"),
    [
        pytest.param("1h30m", 5_400_000, id="duration"),
        pytest.param("1.5s", 1_500, id="decimal-duration"),
        pytest.param(1.5, 1_500, id="float-seconds"),
        pytest.param(datetime.timedelta(minutes=2), 120_000, id="timedelta"),
        pytest.param(1, 1_000, id="one-second"),
        pytest.param(60, 60_000, id="a-minute"),
    ],
)
def test_an_interval_is_given_as_duration_seconds_or_timedelta(every: Any, every_ms: int) -> None:
    assert Timing.parse(every=every) == Timing(cron=None, every_ms=every_ms, tz="UTC")


# --- range boundaries, limit, next, last, count ---------------------------------------------


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_after_is_exclusive_and_through_inclusive(timing: Timing) -> None:
    assert timing.slots(60_000, 180_000, limit=10) == [120_000, 180_000]


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_a_range_ending_before_it_starts_holds_no_slot(timing: Timing) -> None:
    assert timing.slots(180_000, 60_000, limit=10) == []


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_limit_keeps_the_earliest_slots(timing: Timing) -> None:
    assert timing.slots(0, 10**9, limit=2) == [60_000, 120_000]


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_next_slot_is_the_first_slot_strictly_later(timing: Timing) -> None:
    assert timing.next_slot(60_000) == 120_000


def test_next_slot_is_none_when_cron_has_no_slot_within_five_years() -> None:
    # Monday 29 February: 2044, then 2072.
    timing = Timing.parse(cron="0 0 * 2 1#5", now_ms=ms(2040, 1, 1))
    assert timing.next_slot(ms(2044, 3, 1)) is None


def test_next_slot_finds_a_cron_slot_just_inside_five_years() -> None:
    timing = Timing.parse(cron="0 0 * 2 1#5", now_ms=ms(2040, 1, 1))
    slot = ms(2044, 2, 29)
    assert timing.next_slot(slot - HORIZON_MS) == slot


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_last_slot_is_the_latest_slot_at_or_before_the_end(timing: Timing) -> None:
    assert timing.last_slot(180_000, not_before_ms=0) == 180_000
    assert timing.last_slot(179_999, not_before_ms=0) == 120_000


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_last_slot_is_none_when_the_only_candidate_is_not_before(timing: Timing) -> None:
    assert timing.last_slot(179_999, not_before_ms=120_000) is None


def test_last_slot_in_the_second_pass_is_the_first_pass_slot() -> None:
    # 01:50 UTC is 02:50 CET; the latest slot is 02:45 CEST (00:45 UTC).
    timing = cron("*/15 * * * *", PARIS)
    assert timing.last_slot(ms(2026, 10, 25, 1, 50), not_before_ms=0) == ms(2026, 10, 25, 0, 45)


def test_last_slot_of_a_gap_is_the_transition() -> None:
    timing = cron("30 2 * * *", PARIS)
    assert timing.last_slot(ms(2026, 3, 29, 12), not_before_ms=0) == ms(2026, 3, 29, 1)


def test_last_slot_finds_a_slot_long_before() -> None:
    timing = cron("@yearly", PARIS)
    assert timing.last_slot(ms(2026, 6, 1), not_before_ms=0) == ms(2025, 12, 31, 23)


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_count_slots_counts_the_range(timing: Timing) -> None:
    assert timing.count_slots(60_000, 600_000, cap=100) == 9


@pytest.mark.parametrize(
    "timing", [Timing.parse(every="1m"), cron("* * * * *")], ids=["interval", "cron"]
)
def test_count_slots_stops_at_cap(timing: Timing) -> None:
    assert timing.count_slots(0, 10**12, cap=5) == 5


def test_count_slots_of_an_interval_is_exact_over_a_huge_range() -> None:
    assert Timing.parse(every="1s").count_slots(-(10**15), 10**15, cap=10**18) == 2 * 10**12


# --- describe -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timing", "text"),
    [
        (Timing.parse(every="90s"), "every 1m30s"),
        (Timing.parse(every="2h"), "every 2h00m"),
        (Timing.parse(every=1.5), "every 1s500ms"),
        (Timing.parse(every="1d30m"), "every 1d30m"),
        (cron("*/5 * * * *", PARIS), "*/5 * * * * (Europe/Paris)"),
        (cron("0 9 * * 1-5"), "0 9 * * 1-5 (UTC)"),
        (cron("@daily", NEW_YORK), "0 0 * * * (America/New_York)"),
    ],
)
def test_describe_says_the_interval_or_the_expression_and_zone(timing: Timing, text: str) -> None:
    assert timing.describe() == text


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({}, "got neither", id="neither"),
        pytest.param({"cron": "* * * * *", "every": "1m"}, "got both", id="both"),
    ],
)
def test_exactly_one_of_cron_and_every_is_required(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=f"exactly one of cron= .* or every= .*{message}"):
        Timing.parse(**kwargs)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        pytest.param("61 * * * *", "Bad minute", id="minute-out-of-range"),
        pytest.param("* * *", "Wrong number of fields", id="three-fields"),
        pytest.param("* * * * * * *", "Wrong number of fields", id="seven-fields"),
        pytest.param("", "Wrong number of fields", id="empty"),
        pytest.param("0 0 31 2 *", "Bad day-of-month", id="february-31"),
        pytest.param("0 0 * * MONDAY", "Bad day-of-week", id="bad-day-name"),
    ],
)
def test_an_invalid_cron_expression_is_refused_with_cronsims_reason(
    expression: str, reason: str
) -> None:
    with pytest.raises(
        InvalidArgument, match=re.escape(f"invalid cron expression {expression!r}: {reason}")
    ):
        cron(expression)


def test_a_cron_expression_that_is_not_text_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="must be a string"):
        Timing.parse(cron=5)  # type: ignore[arg-type]


def test_reboot_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="'@reboot' is not accepted"):
        cron("@reboot")


def test_an_unknown_alias_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="unknown cron alias '@fortnightly': use @yearly"):
        cron("@fortnightly")


def test_an_expression_that_never_fires_is_refused() -> None:
    # Day 1 or 31 of February, and the fifth Monday: never both.
    with pytest.raises(InvalidArgument, match=r"'0 0 \*/30 2 1#5' has no slot in the five years"):
        cron("0 0 */30 2 1#5")


def test_an_expression_with_no_slot_within_five_years_is_refused() -> None:
    # Monday 29 February: none between 2016 and 2044.
    with pytest.raises(InvalidArgument, match="has no slot in the five years after 2026-01-01"):
        cron("0 0 * 2 1#5")


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "utc", "", "../etc/passwd", "Europe"])
def test_an_unknown_zone_is_refused(tz: str) -> None:
    with pytest.raises(InvalidArgument, match=f"unknown time zone {tz!r}"):
        cron("* * * * *", tz)


def test_tz_with_an_interval_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="tz applies to cron schedules; intervals are"):
        Timing.parse(every="1m", tz="UTC")


@pytest.mark.parametrize(
    "every",
    [
        pytest.param(0, id="zero"),
        pytest.param(-60, id="negative"),
        pytest.param(0.999, id="under-a-second"),
        pytest.param("500ms", id="duration-under-a-second"),
        pytest.param(datetime.timedelta(0), id="zero-timedelta"),
        pytest.param(datetime.timedelta(seconds=-5), id="negative-timedelta"),
        pytest.param(datetime.timedelta(milliseconds=999), id="timedelta-under-a-second"),
    ],
)
def test_an_interval_under_one_second_is_refused(every: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"every must be 1 ?s(econd)? or more, got "):
        Timing.parse(every=every)


@pytest.mark.parametrize(
    "every",
    [
        pytest.param(True, id="bool"),
        pytest.param(60j, id="complex"),
        pytest.param(b"1m", id="bytes"),
        pytest.param([60_000], id="list"),
    ],
)
def test_an_interval_of_another_type_is_refused(every: Any) -> None:
    with pytest.raises(InvalidArgument, match="every must be a duration: seconds"):
        Timing.parse(every=every)


@pytest.mark.parametrize("every", ["60000", "60", "1x", "1,5s", "-1m"])
def test_an_interval_string_that_is_not_a_duration_is_refused(every: str) -> None:
    with pytest.raises(InvalidArgument, match=f"every: .*{every!r}"):
        Timing.parse(every=every)


def test_an_interval_number_means_seconds_so_3600_is_hourly() -> None:
    timing = Timing.parse(every=3600)
    assert (timing.every_ms, timing.describe()) == (3_600_000, "every 1h00m")


def test_a_timedelta_interval_with_a_fraction_of_a_millisecond_is_rounded_up() -> None:
    timing = Timing.parse(every=datetime.timedelta(seconds=1, microseconds=1))
    assert timing.every_ms == 1_001


@pytest.mark.parametrize("limit", [0, -1, True, 1.0])
def test_a_limit_below_one_or_not_an_int_is_refused(limit: Any) -> None:
    with pytest.raises(InvalidArgument, match="limit must be an int of at least 1"):
        Timing.parse(every="1m").slots(0, 60_000, limit=limit)


@pytest.mark.parametrize("after", [1.5, "0", None, False])
def test_an_instant_that_is_not_an_int_is_refused(after: Any) -> None:
    with pytest.raises(InvalidArgument, match="after_ms must be epoch milliseconds"):
        Timing.parse(every="1m").next_slot(after)


def test_cron_without_the_cron_extra_is_refused_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)
    with pytest.raises(InvalidArgument) as refused:
        cron("* * * * *")
    assert str(refused.value) == (
        'cron schedules need the "cron" extra (cronsim): from the cairnq source checkout, '
        'pip install ".[cron]"; or use every='
    )


def test_an_interval_needs_no_cron_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cronsim", None)
    assert Timing.parse(every="1m").slots(0, 60_000, limit=1) == [60_000]


# --- properties -----------------------------------------------------------------------------

TRANSITIONS = [
    ms(2026, 3, 29, 1),
    ms(2026, 10, 25, 1),
    ms(2026, 3, 8, 7),
    ms(2026, 11, 1, 6),
]

expressions = st.builds(
    lambda second, minute, hour, day, month, weekday: " ".join(
        field for field in (second, minute, hour, day, month, weekday) if field is not None
    ),
    st.sampled_from([None, None, "0", "*/20", "15,45"]),
    st.sampled_from(["*", "0", "30", "*/15", "5-10", "0,45", "59"]),
    st.sampled_from(["*", "0", "1", "2", "3", "1-3", "*/2", "23"]),
    st.sampled_from(["*", "*", "1", "25", "L", "*/7"]),
    st.sampled_from(["*", "*", "3", "10,11", "3-11"]),
    st.sampled_from(["*", "*", "0", "1-5", "SUN"]),
)


@st.composite
def ranges(draw: st.DrawFn) -> tuple[int, int, int]:
    """Instants a < b < c near a transition (two days at most), a to c at most 36 hours."""
    start = draw(st.sampled_from(TRANSITIONS)) + draw(st.integers(-2 * 86_400_000, 2 * 86_400_000))
    first = draw(st.integers(1, 64_800_000))
    second = draw(st.integers(1, 64_800_000))
    return start, start + first, start + first + second


property_settings = settings(max_examples=150, deadline=None)
zones = st.sampled_from([PARIS, NEW_YORK])


@property_settings
@given(expressions, zones, ranges())
def test_slots_are_strictly_ascending_and_inside_the_range(
    expression: str, tz: str, bounds: tuple[int, int, int]
) -> None:
    timing = cron(expression, tz)
    after, _, through = bounds
    found = timing.slots(after, through, limit=10**6)
    assert all(after < slot <= through for slot in found)
    assert all(earlier < later for earlier, later in itertools.pairwise(found))


@property_settings
@given(expressions, zones, ranges())
def test_splitting_a_range_neither_loses_nor_repeats_a_slot(
    expression: str, tz: str, bounds: tuple[int, int, int]
) -> None:
    timing = cron(expression, tz)
    a, b, c = bounds
    whole = timing.slots(a, c, limit=10**6)
    assert timing.slots(a, b, limit=10**6) + timing.slots(b, c, limit=10**6) == whole


@property_settings
@given(expressions, zones, ranges())
def test_last_slot_is_the_last_of_the_ranges_slots(
    expression: str, tz: str, bounds: tuple[int, int, int]
) -> None:
    timing = cron(expression, tz)
    after, _, through = bounds
    found = timing.slots(after, through, limit=10**6)
    assert timing.last_slot(through, not_before_ms=after) == (found[-1] if found else None)


@property_settings
@given(expressions, zones, ranges())
def test_count_slots_is_the_number_of_the_ranges_slots(
    expression: str, tz: str, bounds: tuple[int, int, int]
) -> None:
    timing = cron(expression, tz)
    after, _, through = bounds
    assert timing.count_slots(after, through, cap=10**6) == len(
        timing.slots(after, through, limit=10**6)
    )
