"""`replog sim`'s admin client (`replog.sim.admin`): a run exercises the operator's requests,
and the end checks catch a controller that acknowledges one without writing it (each planted
by patching one rule of the real code)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from planted_bug_seeds import caught_within

from replog.quorum.controller.config_control import ConfigControl
from replog.quorum.controller.replication_control import ReplicationControl
from replog.sim.admin import Asked
from replog.sim.run import simulate

PLANTED_BUG_SEEDS = range(30)


def test_a_run_sends_the_admin_requests() -> None:
    report = simulate(1)
    assert report.data["admin requests acknowledged"] > 0
    assert report.data["admin requests"] > report.data["admin requests acknowledged"] // 2


def _unwritten(cls: type, name: str) -> Callable[[pytest.MonkeyPatch], None]:
    """`cls.name` answers as the real one does but writes no record."""
    real = getattr(cls, name)

    def plant(monkeypatch: pytest.MonkeyPatch) -> None:
        def answered_only(self: object, *args: Any, **kwargs: Any) -> Any:
            return dataclasses.replace(real(self, *args, **kwargs), records=())

        monkeypatch.setattr(cls, name, answered_only)

    return plant


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        (_unwritten(ConfigControl, "incremental_alter_configs"), "config change lost"),
        (_unwritten(ReplicationControl, "alter_partition_reassignments"), "reassignment lost"),
        (_unwritten(ReplicationControl, "create_partitions"), "partitions, not between"),
    ],
    ids=["config change", "reassignment", "partition addition"],
)
def test_an_acknowledged_admin_request_left_unwritten_is_caught(
    plant: Callable[[pytest.MonkeyPatch], None], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    caught_within(PLANTED_BUG_SEEDS, expected)


def test_what_may_stand_after_the_last_acknowledged_request() -> None:
    asked = Asked()
    assert asked.allowed() is None  # nothing acknowledged: not checked
    asked.requests += [("1", True), ("2", False), ("3", True), ("4", False), ("5", False)]
    assert asked.allowed() == ["3", "4", "5"]
