"""Fence notices: which broker a metadata change fences or unfences, and why (the controller's
from its records and reason; a broker's own, from the delta it replays and its lifecycle state),
and the line the broker logs when it learns it."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from replog.quorum.metadata.broker_lifecycle import LifecycleState
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.fence_notices import FenceNotice, fence_notices, own_fence_notice
from replog.quorum.metadata.loader import LoaderManifest, ManifestKind
from replog.quorum.metadata.records import BrokerRegistrationChangeRecord, FenceChange, NoOpRecord
from replog.server.broker.broker_runtime import _LifecycleFeed
from tests.metadata.metadata_helpers import bootstrapped, delta_of, register, replayed

RUNNING = replayed(bootstrapped(), register(1, 10, fenced=False), register(2, 20, fenced=False))
SESSION = (
    "the controller fenced it: its heartbeats did not reach the active controller within "
    "broker.session.timeout.ms"
)


def change(broker_id: int, epoch: int, fenced: FenceChange) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(broker_id, epoch, fenced)


def test_the_controllers_notices_are_its_fencing_and_unfencing_records() -> None:
    records = [NoOpRecord(), change(1, 10, FenceChange.FENCE), change(2, 20, FenceChange.UNFENCE)]
    assert fence_notices(records, "why") == (
        FenceNotice(1, 10, True, "why"),
        FenceNotice(2, 20, False, "why"),
    )
    shutdown_flag = BrokerRegistrationChangeRecord(1, 10, in_controlled_shutdown=True)
    assert fence_notices([shutdown_flag], "why") == ()


def test_a_broker_notices_its_own_fencing_with_why() -> None:
    fenced = delta_of(RUNNING, change(1, 10, FenceChange.FENCE))
    assert own_fence_notice(fenced, 1, LifecycleState.RUNNING) == FenceNotice(1, 10, True, SESSION)
    shutting = own_fence_notice(fenced, 1, LifecycleState.PENDING_CONTROLLED_SHUTDOWN)
    assert shutting is not None and shutting.reason == "its controlled shutdown"
    assert own_fence_notice(fenced, 2, LifecycleState.RUNNING) is None  # another broker's
    back = replayed(RUNNING, change(1, 10, FenceChange.FENCE))
    unfenced = own_fence_notice(
        delta_of(back, change(1, 10, FenceChange.UNFENCE)), 1, LifecycleState.RUNNING
    )
    assert unfenced is not None and not unfenced.fenced and "unfenced it" in unfenced.reason
    # A new incarnation starts fenced: a registration, not a fencing.
    assert own_fence_notice(delta_of(RUNNING, register(1, 30)), 1, LifecycleState.STARTING) is None
    # A first image (from the empty one) knows no previous state.
    assert own_fence_notice(MetadataDelta.of_image(back), 1, LifecycleState.RUNNING) is None


def test_the_broker_logs_its_fencing_when_it_replays_it(caplog: pytest.LogCaptureFixture) -> None:
    offsets: list[int] = []
    lifecycle = SimpleNamespace(
        config=SimpleNamespace(broker_id=1),
        state=LifecycleState.RUNNING,
        update_metadata_offset=offsets.append,
    )
    feed = _LifecycleFeed(lifecycle, asyncio.Event())  # type: ignore[arg-type]
    delta = delta_of(RUNNING, change(1, 10, FenceChange.FENCE))
    image = replayed(RUNNING, change(1, 10, FenceChange.FENCE))
    manifest = LoaderManifest(ManifestKind.LOG, image.provenance, RUNNING, 1, 1)
    with caplog.at_level(logging.INFO, logger="replog.server.broker"):
        feed.on_metadata_update(delta, image, manifest)
    assert [r.getMessage() for r in caplog.records] == [
        f"broker 1 fenced at broker epoch 10: {SESSION} (metadata offset "
        f"{image.provenance.last_offset})"
    ]
    assert offsets == [image.provenance.last_offset]
