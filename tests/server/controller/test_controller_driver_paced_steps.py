"""The steps a stepped write leaves, posted to the Raft driver (`ControllerDriver._pace_steps`),
when the node stops or its controller loses leadership between them (issue #50's review).

The posted input must not run steps on a controller that renounced, must not raise on the
loop, and must leave no future unretrieved; the write's caller gets an answer, not a hang.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

from replog.pb import controller_pb2 as pb
from tests.server.controller.test_controller_driver import active, lone_controller, start_brokers

WIDE = pb.CreateTopicsRequest(
    topics=[
        pb.CreatableTopic(name=f"wide{i}", num_partitions=200, replication_factor=1)
        for i in range(6)
    ],
    timeout_ms=5_000,
)


def test_steps_left_when_the_controller_resigns_are_dropped_and_the_caller_answered(
    tmp_path: Path,
) -> None:
    problems: list[dict[str, Any]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: problems.append(ctx))
        async with lone_controller(tmp_path) as node:
            await active(node)
            await start_brokers(node, (1,))
            controller = node.driver.controller
            node.driver.tick = lambda now_ms: None  # type: ignore[method-assign]
            # The controller fails over (as an unexpected error in a write makes it) with the
            # second posted input in the queue: that input runs on a renounced controller.
            real_run_steps = controller.run_steps
            calls: list[tuple[int | None, int | None, int]] = []

            def run_steps(now_ms: int) -> None:
                if len(calls) == 1 and controller.is_active:
                    controller._fail_over("injected between two steps")
                before = controller.offset_control.next_write_offset
                real_run_steps(now_ms)
                after = controller.offset_control.next_write_offset
                calls.append((before, after, len(controller._steps)))

            controller.run_steps = run_steps  # type: ignore[method-assign]
            created = await asyncio.wait_for(node.service.CreateTopics(WIDE, None), 10)
            assert created.error.error_name == "NOT_CONTROLLER", created
            assert len(calls) >= 2 and calls[0][0] != calls[0][1]  # the first input wrote
            before, after, left = calls[1]
            assert before == after is None and left == 0  # the one after the loss did not
            # The same node leads again: what the steps before the loss wrote may commit,
            # each topic whole or not at all; nothing the lost steps would have written.
            await active(node)
            names = [t.name for t in WIDE.topics]
            metadata = await node.service.Metadata(pb.MetadataRequest(topics=names), None)
            sizes = {t.name: len(t.partitions) for t in metadata.topics if t.partitions}
            assert set(sizes.values()) <= {200} and len(sizes) < 6, sizes
        gc.collect()

    asyncio.run(scenario())
    gc.collect()
    assert not problems, problems
