"""The node freezes its heap as its replica set grows and thaws it after mass deletions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from replog.quorum.raft.ready import CommittedBatch, LeaderChange, LoadSnapshot
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.server.runtime import collector
from replog.server.runtime.collector import GrowthFreezer


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The collector's calls to `gc`, recorded instead of made (gc is process-wide)."""
    made: list[str] = []
    fake = SimpleNamespace(
        collect=lambda generation=2: made.append(f"collect({generation})") or 0,
        freeze=lambda: made.append("freeze"),
        unfreeze=lambda: made.append("unfreeze"),
        get_freeze_count=lambda: made.append("get_freeze_count") or 0,
        callbacks=[],
    )
    monkeypatch.setattr(collector, "gc", fake)
    return made


def test_growth_past_the_limit_freezes_after_a_young_collection(calls: list[str]) -> None:
    freezer = GrowthFreezer(freeze_after=100)
    freezer.replicas_changed(created=60, deleted=0, live=60)
    assert calls == []
    freezer.replicas_changed(created=40, deleted=0, live=100)
    assert calls == ["collect(1)", "freeze"]
    freezer.replicas_changed(created=99, deleted=0, live=199)
    assert freezer.freezes == 1


def test_mass_deletion_thaws_collects_in_full_and_freezes_again(calls: list[str]) -> None:
    freezer = GrowthFreezer(freeze_after=100, thaw_fraction=0.25)
    freezer.replicas_changed(created=1000, deleted=0, live=1000)
    calls.clear()
    freezer.replicas_changed(created=0, deleted=150, live=850)  # under a quarter of 850
    assert calls == []
    freezer.replicas_changed(created=0, deleted=100, live=750)  # 250 since the last thaw
    assert calls == ["unfreeze", "collect(2)", "freeze"]
    assert freezer.thaws == 1


def test_few_deletions_of_a_small_set_never_thaw(calls: list[str]) -> None:
    freezer = GrowthFreezer(freeze_after=100, thaw_fraction=0.25)
    for _ in range(99):
        freezer.replicas_changed(created=0, deleted=1, live=10)
    assert calls == []


def test_nothing_happens_unless_the_process_installed_it(
    calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "_installed", None)
    collector.replicas_changed(created=10_000, deleted=0, live=10_000)
    assert calls == []
    installed = collector.install_growth_freezer()
    collector.replicas_changed(created=10_000, deleted=0, live=10_000)
    assert calls == ["collect(1)", "freeze"] and installed.freezes == 1


def test_logs_loaded_at_start_up_count_as_new_replicas(
    calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collector, "_installed", None)
    installed = collector.install_growth_freezer()
    collector.logs_loaded(60)
    assert calls == []
    collector.logs_loaded(40)
    assert calls == ["collect(1)", "freeze"] and installed.freezes == 1


def test_committed_metadata_records_freeze_once_enough_were_applied(
    calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart replays the whole metadata log before any replica exists: the records applied
    are counted, and a loaded snapshot (the whole metadata at once) freezes at once."""
    monkeypatch.setattr(collector, "_installed", None)
    batch = CommittedBatch(
        base_offset=0, last_offset=599, quorum_epoch=1, is_control=False, batch=b""
    )
    collector.committed_item_applied(batch)
    assert calls == []  # not installed
    installed = collector.install_growth_freezer()
    collector.committed_item_applied(batch)
    control = CommittedBatch(
        base_offset=600, last_offset=999, quorum_epoch=1, is_control=True, batch=b""
    )
    collector.committed_item_applied(control)  # no metadata in a control batch
    collector.committed_item_applied(LeaderChange(leader_id=1, quorum_epoch=2))
    assert calls == []
    collector.committed_item_applied(
        CommittedBatch(
            base_offset=1000, last_offset=1399, quorum_epoch=2, is_control=False, batch=b""
        )
    )
    assert calls == ["collect(1)", "freeze"] and installed.freezes == 1
    calls.clear()
    collector.committed_item_applied(LoadSnapshot(SnapshotId(end_offset=2000, quorum_epoch=2)))
    assert calls == ["collect(1)", "freeze"] and installed.freezes == 2


def test_a_slow_full_collection_is_followed_by_a_freeze(calls: list[str]) -> None:
    now = [0.0]
    freezer = GrowthFreezer(freeze_after_collection_s=0.01, clock=lambda: now[0])

    def collection(generation: int, seconds: float) -> None:
        freezer.on_collection("start", {"generation": generation})
        now[0] += seconds
        freezer.on_collection("stop", {"generation": generation, "collected": 0})

    collection(2, 0.005)  # a quick full collection: nothing worth freezing
    collection(1, 0.5)  # a young one, however long, walked only young objects
    assert calls == [] and freezer.freezes_after_collection == 0
    collection(2, 0.3)
    assert calls == ["freeze"] and freezer.freezes_after_collection == 1


def test_logging_a_freeze_never_counts_the_frozen_objects(
    calls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """`gc.get_freeze_count` walks every frozen object (250 ms at 13.7 million, a node holding
    100,000 replicas), and these logs run on the event loop: they say what they know."""
    now = [0.0]
    freezer = GrowthFreezer(freeze_after=100, freeze_after_collection_s=0.01, clock=lambda: now[0])
    freezer.on_collection("start", {"generation": 2})
    now[0] += 0.3
    freezer.on_collection("stop", {"generation": 2, "collected": 0})
    with caplog.at_level("INFO", logger="replog.server"):
        freezer.records_applied(1)  # logs the slow collection
        freezer.replicas_changed(created=1000, deleted=0, live=1000)
        freezer.replicas_changed(created=0, deleted=1000, live=0)  # thaws, logs
    assert "get_freeze_count" not in calls, calls
    assert "300 ms" in caplog.text and "after replicas were deleted" in caplog.text


def test_a_mass_deletion_thaws_once_when_no_change_is_left(calls: list[str]) -> None:
    """Deleting 60,000 of 60,000 replicas in rounds of 250: one full collection at the end,
    over what is left, not one each time a quarter of the shrinking rest has gone."""
    freezer = GrowthFreezer(freeze_after=100, thaw_fraction=0.25)
    freezer.replicas_changed(created=60_000, deleted=0, live=60_000)
    calls.clear()
    live = 60_000
    while live > 250:
        live -= 250
        freezer.replicas_changed(created=0, deleted=250, live=live, more_waiting=True)
    assert calls == [] and freezer.thaws == 0
    freezer.replicas_changed(created=0, deleted=250, live=0, more_waiting=False)
    assert calls == ["unfreeze", "collect(2)", "freeze"] and freezer.thaws == 1


def test_growth_still_freezes_while_a_thaw_waits(calls: list[str]) -> None:
    freezer = GrowthFreezer(freeze_after=100, thaw_fraction=0.25)
    freezer.replicas_changed(created=1000, deleted=0, live=1000)
    calls.clear()
    freezer.replicas_changed(created=100, deleted=400, live=700, more_waiting=True)
    assert calls == ["collect(1)", "freeze"] and freezer.thaws == 0
