"""The wake hub's channel demand: what taps listen on, and when a subscription is live."""

from __future__ import annotations

from cairnq._wakeups import WakeHub, wants_done, wants_queued


class _Tap:
    def __init__(self) -> None:
        self.changes = 0

    def demand_changed(self) -> None:
        self.changes += 1


def test_a_hub_without_subscriptions_needs_no_channel() -> None:
    assert WakeHub().channels_needed(0.0) == (frozenset(), None)


def test_a_waiter_needs_only_the_done_channel() -> None:
    hub = WakeHub()
    with hub.subscribe(wants_done("t1"), channels=("done",)):
        needed, _ = hub.channels_needed(0.0)
    assert needed == {"done"}


def test_a_claim_loop_needs_only_the_queued_channel() -> None:
    hub = WakeHub()
    with hub.subscribe(wants_queued(["default"]), claims=True, channels=("queued",)):
        needed, _ = hub.channels_needed(0.0)
    assert needed == {"queued"}


def test_a_channel_is_needed_no_more_once_its_last_subscription_closes() -> None:
    hub = WakeHub()
    first = hub.subscribe(wants_done("t1"), channels=("done",))
    second = hub.subscribe(wants_done("t2"), channels=("done",))
    first.close()
    still, _ = hub.channels_needed(0.0)
    second.close()
    after, _ = hub.channels_needed(0.0)
    assert (still, after) == ({"done"}, frozenset())


def test_a_released_channel_stays_needed_for_the_linger() -> None:
    hub = WakeHub()
    hub.subscribe(wants_done("t1"), channels=("done",)).close()
    needed, shrinks = hub.channels_needed(3600.0)
    assert needed == {"done"}
    assert shrinks is not None


def test_taps_hear_of_a_channel_gained_and_lost_not_of_each_subscription() -> None:
    hub = WakeHub()
    tap = _Tap()
    hub.add_tap(tap)
    first = hub.subscribe(wants_done("t1"), channels=("done",))
    second = hub.subscribe(wants_done("t2"), channels=("done",))
    second.close()
    first.close()
    assert tap.changes == 2


def test_a_subscription_is_live_at_once_without_a_connected_tap() -> None:
    hub = WakeHub()
    hub.add_tap(_Tap())
    with hub.subscribe(wants_done("t1"), channels=("done",)) as sub:
        assert sub.until_live(0)


def test_a_subscription_waits_for_a_connected_tap_to_listen_on_its_channel() -> None:
    hub = WakeHub()
    tap = _Tap()
    hub.add_tap(tap)
    hub.tap_live(tap, frozenset({"queued"}))
    with hub.subscribe(wants_done("t1"), channels=("done",)) as sub:
        before = sub.until_live(0)
        hub.tap_live(tap, frozenset({"queued", "done"}))
        assert (before, sub.until_live(0), sub.is_set()) == (False, True, True)


def test_a_tap_going_down_holds_back_no_subscription() -> None:
    hub = WakeHub()
    tap = _Tap()
    hub.add_tap(tap)
    hub.tap_live(tap, frozenset())
    with hub.subscribe(wants_done("t1"), channels=("done",)) as sub:
        hub.tap_down(tap)
        assert sub.until_live(0)


def test_a_subscription_whose_channel_is_dropped_is_woken_when_it_is_back() -> None:
    hub = WakeHub()
    tap = _Tap()
    hub.add_tap(tap)
    hub.tap_live(tap, frozenset({"done"}))
    with hub.subscribe(wants_done("t1"), channels=("done",)) as sub:
        hub.tap_live(tap, frozenset())
        dropped = sub.until_live(0)
        sub.clear()
        hub.tap_live(tap, frozenset({"done"}))
        assert (dropped, sub.until_live(0), sub.is_set()) == (False, True, True)
