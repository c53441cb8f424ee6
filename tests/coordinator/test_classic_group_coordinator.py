"""The classic group coordinator's settings, error messages and timer bookkeeping; the
transitions themselves are specified by the scenario scripts (test_group_scenarios.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from replog.coordinator.classic_group_coordinator import (
    ClassicGroupConfig,
    ClassicGroupCoordinator,
)
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    SyncGroupRequest,
)
from replog.coordinator.group_records import GroupMetadataValue, MemberMetadata
from replog.coordinator.offsets_records import GroupMetadataKey
from replog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
)

RANGE = (("range", b"m"),)


def _join(member_id: str = "", **kwargs: object) -> JoinGroupRequest:
    fields: dict[str, object] = {
        "group_id": "g",
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": RANGE,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 20000,
        "client_id": "c",
    }
    fields.update(kwargs)
    return JoinGroupRequest(**fields)  # type: ignore[arg-type]


def _counter() -> Callable[[], str]:
    count = itertools.count(1)
    return lambda: str(next(count))


def _stable_group() -> ClassicGroupCoordinator:
    coordinator = ClassicGroupCoordinator(
        ClassicGroupConfig(initial_rebalance_delay_ms=0),
        _counter(),
    )
    coordinator.join(_join(api_version=3), 1, 0)
    coordinator.tick(0)
    coordinator.sync(SyncGroupRequest("g", "c-1", 1, assignments=(("c-1", b"a"),)), 2, 0)
    return coordinator


@pytest.mark.parametrize(
    ("fields", "setting"),
    [
        ({"min_session_timeout_ms": 10, "max_session_timeout_ms": 5}, "group.min.session"),
        ({"initial_rebalance_delay_ms": -1}, "group.initial.rebalance.delay.ms"),
        ({"max_size": 0}, "group.max.size"),
    ],
)
def test_bad_settings_name_the_setting(fields: dict[str, int], setting: str) -> None:
    with pytest.raises(InvalidConfigError, match=setting):
        ClassicGroupConfig(**fields)


def test_errors_name_the_group_and_what_is_wrong() -> None:
    coordinator = _stable_group()
    result = coordinator.join(_join(session_timeout_ms=100), 3, 0)
    error = result.joins[0].error
    assert isinstance(error, InvalidSessionTimeoutError)
    assert "100 ms" in str(error) and "group.min.session.timeout.ms (6000)" in str(error)

    error = coordinator.join(_join(protocols=(("sticky", b""),)), 4, 0).joins[0].error
    assert isinstance(error, InconsistentGroupProtocolError)
    assert "['range'] in common" in str(error) and "['sticky']" in str(error)

    error = coordinator.heartbeat(HeartbeatRequest("g", "c-1", 7), 0)
    assert isinstance(error, IllegalGenerationError)
    assert str(error) == "group 'g' is at generation 1, not 7"

    answer = coordinator.join(_join(), 5, 0).joins[0]
    assert isinstance(answer.error, MemberIdRequiredError)
    assert answer.member_id in str(answer.error)


def test_a_fenced_static_member_is_told_who_replaced_it() -> None:
    coordinator = ClassicGroupCoordinator(
        ClassicGroupConfig(initial_rebalance_delay_ms=0),
        _counter(),
    )
    coordinator.join(_join(group_instance_id="i", api_version=5), 1, 0)
    coordinator.tick(0)
    coordinator.sync(SyncGroupRequest("g", "i-1", 1, "i", assignments=(("i-1", b"a"),)), 2, 0)
    coordinator.join(_join(group_instance_id="i", api_version=5), 3, 0)
    error = coordinator.heartbeat(HeartbeatRequest("g", "i-1", 1, "i"), 0)
    assert isinstance(error, FencedInstanceIdError)
    assert "'i' is member 'i-2' now, not 'i-1'" in str(error)


def test_timers_fire_at_their_deadline_however_late_the_tick() -> None:
    """A late tick gives the same result as ticks on time: each timer acts at its deadline."""

    def run(ticks: list[int]) -> list[tuple[int, str, str, str]]:
        coordinator = _stable_group()
        coordinator.join(_join(api_version=3), 3, 0)  # a rebalance: c-1 must rejoin
        for now in ticks:
            coordinator.tick(now)
        return coordinator.timers()

    assert run([20000, 30000, 40000]) == run([40000])


def test_next_deadline_is_the_earliest_timer() -> None:
    coordinator = _stable_group()
    assert coordinator.next_deadline_ms() == 10000  # c-1's session
    coordinator.heartbeat(HeartbeatRequest("g", "c-1", 1), 4000)
    assert coordinator.next_deadline_ms() == 14000
    assert coordinator.tick(13999) == GroupResult()


WALL = 1_700_000_000_000  # the wall clock, far from the monotonic `now_ms` the calls pass


def _group_values(result: GroupResult) -> list[GroupMetadataValue]:
    return [r.value for r in result.records if isinstance(r, GroupRecord) and r.value is not None]


def test_the_group_record_is_stamped_with_the_wall_clock_not_now_ms() -> None:
    # Kafka's currentStateTimestamp is wall-clock milliseconds; `now_ms` (monotonic) runs the
    # timers only.
    wall = [WALL]
    coordinator = ClassicGroupCoordinator(
        ClassicGroupConfig(initial_rebalance_delay_ms=0), _counter(), lambda: wall[0]
    )
    coordinator.join(_join(api_version=3), 1, 5_000)
    wall[0] += 250
    coordinator.tick(5_000)
    synced = coordinator.sync(
        SyncGroupRequest("g", "c-1", 1, assignments=(("c-1", b"a"),)), 2, 5_000
    )
    assert [v.current_state_timestamp_ms for v in _group_values(synced)] == [WALL + 250]


def test_a_record_stamped_with_a_monotonic_value_loads_and_is_restamped() -> None:
    # An older replog wrote the monotonic clock there: the group loads and works, and its next
    # state change writes the wall clock.
    coordinator = ClassicGroupCoordinator(
        ClassicGroupConfig(initial_rebalance_delay_ms=0), _counter(), lambda: WALL
    )
    member = MemberMetadata("old", None, "c", "/h", 20000, 10000, b"m", b"a")
    coordinator.replay(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "old", 12_345, (member,))
    )
    coordinator.loaded(0)
    assert coordinator.heartbeat(HeartbeatRequest("g", "old", 1), 0) is None
    coordinator.join(_join(api_version=3), 3, 100)  # a new member (c-1): a rebalance
    coordinator.join(_join("old", api_version=3), 4, 100)
    coordinator.tick(100)
    synced = coordinator.sync(
        SyncGroupRequest("g", "old", 2, assignments=(("old", b"a"), ("c-1", b"b"))), 5, 100
    )
    assert [(v.generation, v.current_state_timestamp_ms) for v in _group_values(synced)] == [
        (2, WALL)
    ]
