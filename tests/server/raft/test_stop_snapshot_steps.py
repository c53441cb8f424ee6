"""A stop's snapshot state is taken in steps of whole topics, each on the Raft driver's loop,
at the stable offset of the first step (issue #50: 100,000 partitions in one loop turn held it
155-172 ms of CPU). The steps hold that offset's timeline snapshot, so commits between them
change nothing of what they take, and the hold goes with the last step, or with steps left
half way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from replog.quorum.controller import controller as controller_module
from replog.quorum.controller.replication_control import ReplicationControl
from replog.quorum.metadata.steps import Steps
from replog.server.raft.metadata_snapshots import StopState
from tests.server.controller.test_controller_driver import (
    LoneController,
    active,
    create_request,
    lone_controller,
    snapshot_before_stop_ticking,
    start_brokers,
)


async def create_topics(node: LoneController, *names: str, first: bool = False) -> None:
    """Topics of 3 partitions on broker 1, one CreateTopics each; `first`: once the
    controller is active and broker 1 started."""
    if first:
        await active(node)
        await start_brokers(node, (1,))
    for name in names:
        created = await node.service.CreateTopics(create_request(name, 3, 1), None)
        assert not created.topics[0].HasField("error")


async def on_loop(node: LoneController, steps: Steps[StopState | None]) -> StopState | str | None:
    """Run one of `steps` on the Raft driver's loop: the state when it ended, else "more"."""
    outcome: list[StopState | str | None] = []

    def step(now_ms: int) -> None:
        try:
            next(steps)
            outcome.append("more")
        except StopIteration as done:
            outcome.append(done.value)

    await node.raft.run_persisted(step)
    return outcome[0]


def parts_taken_at_ticks(
    monkeypatch: pytest.MonkeyPatch, *, partitions_a_step: int
) -> tuple[list[int], list[int]]:
    """A tick counter (its one item, for a ticker to raise) and the count it stood at as each
    part of a snapshot's state was taken, `partitions_a_step` partitions a part."""
    monkeypatch.setattr(controller_module, "SNAPSHOT_STEP_PARTITIONS", partitions_a_step)
    ticks = [0]
    parts_at: list[int] = []
    real = ReplicationControl.deferred_snapshot_parts

    def recorded(self: ReplicationControl, offset: int | None, *, parts_of: int):  # type: ignore[no-untyped-def]
        for part in real(self, offset, parts_of=parts_of):
            parts_at.append(ticks[0])
            yield part

    monkeypatch.setattr(ReplicationControl, "deferred_snapshot_parts", recorded)
    return ticks, parts_at


@pytest.mark.parametrize("ending", ["finished", "closed half way"])
def test_the_stop_state_is_taken_in_steps_at_the_offset_of_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    # Commits between the steps: the held snapshot stays and the state taken does not move;
    # the hold goes with the last step, or with the steps closed half way.
    monkeypatch.setattr(controller_module, "SNAPSHOT_STEP_PARTITIONS", 6)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_topics(node, "a", "b", "c", "d", "e", first=True)
            controller = node.driver.controller
            offset = controller.last_stable_offset
            expected = controller.snapshot_records(offset)
            registry = controller.offset_control.registry
            steps = node.driver.state_at_stop_in_steps()
            assert await on_loop(node, steps) == "more"  # topics a and b taken
            await create_topics(node, "f")
            assert controller.last_stable_offset > offset
            assert registry.snapshot_offsets()[0] == offset
            if ending == "finished":
                assert await on_loop(node, steps) == "more"  # c and d
                assert await on_loop(node, steps) == "more"  # e
                state = await on_loop(node, steps)  # the records after the topics
                assert isinstance(state, StopState)
                assert list(state.records) == expected
                assert state.end_offset == offset + 1
            else:
                await node.raft.run_persisted(lambda now_ms: steps.close())
            assert registry.snapshot_offsets() == [controller.last_stable_offset]

    asyncio.run(scenario())


def test_a_stop_takes_its_state_a_step_a_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each part of the state is taken in a loop turn of its own: a ticker runs between them.
    ticks, parts_at = parts_taken_at_ticks(monkeypatch, partitions_a_step=3)

    async def scenario() -> None:
        async with lone_controller(tmp_path, metadata_max_idle_interval_ms=0) as node:
            await create_topics(node, "a", "b", "c", "d", first=True)
            parts_at.clear()

            def tick() -> None:
                ticks[0] += 1

            taken = await snapshot_before_stop_ticking(node, tick)
            assert taken is not None
            assert len(parts_at) == 4 and len(set(parts_at)) == 4, parts_at
            assert node.raft.storage.snapshot_ids() == (taken,)

    asyncio.run(scenario())
