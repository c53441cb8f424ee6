"""Loop timers of the Raft driver: ticked on the driver's loop when due, and a timer that stays
due is retried every TIMER_RETICK_MS instead of spinning the loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.quorum.raft import RaftConfig, VoterAddress
from replog.quorum.raft.messages import DescribeQuorumRequest, DescribeQuorumResponse, Message
from replog.quorum.raft.ready import ApplyItem, CommittedBatch
from replog.server.raft.raft_driver import TIMER_RETICK_MS, RaftDriver
from replog.server.raft.raft_storage import RaftStorage
from replog.testing import LoopTasks, ManualClock
from tests.eventually import eventually


class AlwaysDue:
    def __init__(self) -> None:
        self.ticks: list[int] = []

    def next_wake_ms(self, now_ms: int) -> int | None:
        return now_ms  # work it can never finish

    def tick(self, now_ms: int) -> None:
        self.ticks.append(now_ms)


class Once:
    def __init__(self, at_ms: int) -> None:
        self.at_ms: int | None = at_ms
        self.ticked_at: int | None = None

    def next_wake_ms(self, now_ms: int) -> int | None:
        return self.at_ms

    def tick(self, now_ms: int) -> None:
        assert self.at_ms is not None and now_ms >= self.at_ms
        self.ticked_at, self.at_ms = now_ms, None


async def stopped(driver: RaftDriver, loop: asyncio.Task[None]) -> None:
    """Stop `driver` and its `loop`, and close what it holds."""
    await driver.stop(graceful=False)
    await asyncio.wait_for(loop, 5)
    await driver.transport.close()
    driver.storage.close()


async def started_leading(driver: RaftDriver) -> asyncio.Task[None]:
    """`driver`'s loop, started and run until its single node leads."""
    loop = asyncio.create_task(driver.run())
    while driver.status().leader_id != 1:
        await asyncio.sleep(0.01)
    return loop


async def probed_big_append(driver: RaftDriver, seen: list[str]) -> None:
    """Start `driver`, append one batch and wait until it is answered, a probe task adding
    "probe" to `seen` at each of its runs meanwhile; then stop the driver."""
    loop = await started_leading(driver)
    try:
        wait = asyncio.ensure_future(driver.append_and_wait([b"big"]))

        async def probe() -> None:
            while not wait.done():
                seen.append("probe")
                await asyncio.sleep(0)

        await asyncio.wait_for(asyncio.gather(probe(), wait), 10)
    finally:
        await stopped(driver, loop)


def test_timers_are_ticked_when_due_and_never_spin(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        busy, once = AlwaysDue(), Once(driver.clock() + 50)
        driver.add_timer(busy)
        driver.add_timer(once)
        loop = asyncio.create_task(driver.run())
        try:
            await asyncio.sleep(0.3)
        finally:
            await stopped(driver, loop)
        assert once.ticked_at is not None
        gaps = [b - a for a, b in zip(busy.ticks, busy.ticks[1:], strict=False)]
        assert gaps and min(gaps) >= TIMER_RETICK_MS
        assert len(busy.ticks) <= 300 // TIMER_RETICK_MS + 2

    asyncio.run(scenario())


def test_a_long_delivery_of_committed_batches_lets_other_tasks_run(tmp_path: Path) -> None:
    """A listener slow on each committed batch (a restart replaying the metadata log) does not
    hold the loop for the whole Ready: other tasks run between two batches, and the batches
    still reach the listener in order."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.01
        seen: list[tuple[str, int]] = []

        def slow_listener(item: ApplyItem) -> None:
            if isinstance(item, CommittedBatch) and not item.is_control:
                time.sleep(0.03)  # replaying a big batch
                seen.append(("batch", item.base_offset))

        driver.add_listener(slow_listener)
        loop = await started_leading(driver)
        try:
            # Queued before the loop runs again: one Ready appends and commits all six.
            waits = [asyncio.ensure_future(driver.append_and_wait([b"%d" % i])) for i in range(6)]

            async def probe() -> None:
                while not all(wait.done() for wait in waits):
                    seen.append(("probe", len(seen)))
                    await asyncio.sleep(0)

            await asyncio.wait_for(asyncio.gather(probe(), *waits), 10)
        finally:
            await stopped(driver, loop)
        batches = [offset for kind, offset in seen if kind == "batch"]
        assert batches == sorted(batches) and len(batches) >= 2, batches
        kinds = [kind for kind, _ in seen]
        first, last = kinds.index("batch"), len(kinds) - 1 - kinds[::-1].index("batch")
        assert "probe" in kinds[first:last], kinds  # the probe ran between two batches

    asyncio.run(scenario())


def test_a_stepped_listener_lets_other_tasks_run_between_the_steps_of_one_batch(
    tmp_path: Path,
) -> None:
    """One committed batch whose work is long (a controlled shutdown's thousands of records)
    does not hold the loop for all of it when its listener works in steps; the listeners after
    it hear of the batch only once its last step ran."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.01
        seen: list[str] = []

        def stepped(item: ApplyItem) -> Iterator[None]:
            if isinstance(item, CommittedBatch) and not item.is_control:
                for step in range(4):
                    time.sleep(0.015)  # a slice of the batch's records
                    seen.append(f"step {step}")
                    yield

        driver.add_stepped_listener(stepped)
        driver.add_listener(
            lambda item: (
                seen.append("after")
                if isinstance(item, CommittedBatch) and not item.is_control
                else None
            )
        )
        await probed_big_append(driver, seen)
        work = [entry for entry in seen if entry != "probe"]
        assert work == ["step 0", "step 1", "step 2", "step 3", "after"], seen
        between = seen[seen.index("step 0") : seen.index("step 3")]
        assert "probe" in between, seen  # the loop ran other tasks inside the batch

    asyncio.run(scenario())


def test_a_turn_of_applying_holds_the_loop_for_at_most_10_ms_of_steps(tmp_path: Path) -> None:
    """The driver's default turn is 10 ms: creating 10,000 partitions, its turns were the
    largest work on the nodes' loops (20-23 ms of CPU at 20 ms), and three nodes share two
    cores, so a due timer (a Raft fetch deadline, the stall monitor's tick) waits for a
    multiple of that (docs/benchmarks.md, "The stalls: waits for a core"). Steps
    of at least 2 ms: at most six between two runs of another task (five fill the turn; a
    slower machine only makes them fewer)."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        seen: list[str] = []

        def stepped(item: ApplyItem) -> Iterator[None]:
            if isinstance(item, CommittedBatch) and not item.is_control:
                for _ in range(20):
                    time.sleep(0.002)  # a step of 2 ms or more
                    seen.append("step")
                    yield

        driver.add_stepped_listener(stepped)
        await probed_big_append(driver, seen)
        # The steps between two runs of the probe (it stops once the append is answered).
        runs = "".join("s" if entry == "step" else "|" for entry in seen).split("|")[:-1]
        assert any(runs) and max(len(run) for run in runs) <= 6, [run for run in runs if run]

    asyncio.run(scenario())


def test_a_timer_that_fell_due_during_an_apply_turn_runs_before_the_next_turn(
    tmp_path: Path,
) -> None:
    """What became ready during a turn of applying (a socket, a deadline: here a timer of the
    loop) runs before the driver's next turn, not after it: no other work waits for two turns
    (the stall monitor's tick saw two of them as one stall)."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.01
        loop_ = asyncio.get_running_loop()
        seen: list[str] = []

        def stepped(item: ApplyItem) -> Iterator[None]:
            if isinstance(item, CommittedBatch) and not item.is_control:
                for step in range(4):
                    if step == 0:
                        loop_.call_later(0.002, seen.append, "timer")
                    time.sleep(0.015)  # longer than the turn: the timer falls due meanwhile
                    seen.append(f"step {step}")
                    yield

        driver.add_stepped_listener(stepped)
        loop = await started_leading(driver)
        try:
            await asyncio.wait_for(driver.append_and_wait([b"big"]), 10)
        finally:
            await stopped(driver, loop)
        assert seen.index("timer") == seen.index("step 0") + 1, seen

    asyncio.run(scenario())


def test_the_core_answers_its_peers_while_the_listeners_apply_and_the_state_machine_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long apply of committed items (a restart replaying the metadata log: seconds) does
    not stop the core: a peer's request that arrives meanwhile is answered before the apply
    ends, so the peers never take a busy leader for lost; an input for the state machine
    waits until the apply ends, so it still sees every committed item first."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.01
        sent: list[Message] = []
        monkeypatch.setattr(driver.transport, "send", sent.append)
        seen: list[str] = []
        applying = asyncio.Event()

        def stepped(item: ApplyItem) -> Iterator[None]:
            if isinstance(item, CommittedBatch) and not item.is_control:
                applying.set()
                for _ in range(20):
                    time.sleep(0.01)  # a slice of a long replay
                    seen.append("step")
                    yield

        driver.add_stepped_listener(stepped)
        loop = await started_leading(driver)
        try:
            wait = asyncio.ensure_future(driver.append_and_wait([b"big"]))
            await asyncio.wait_for(applying.wait(), 5)
            driver._post_message(Message(9, 1, DescribeQuorumRequest(7)))
            driver.post(lambda now: seen.append("state machine input"))

            async def answered() -> None:
                while not any(isinstance(m.body, DescribeQuorumResponse) for m in sent):
                    await asyncio.sleep(0)
                seen.append("answered")

            await asyncio.wait_for(asyncio.gather(answered(), wait), 10)
            while "state machine input" not in seen:
                await asyncio.sleep(0.01)
        finally:
            await stopped(driver, loop)
        last_step = len(seen) - 1 - seen[::-1].index("step")
        assert seen.index("answered") < last_step, seen  # answered inside the apply
        assert seen.index("state machine input") > last_step, seen  # after all of it

    asyncio.run(scenario())


class _AlwaysDue:
    """A state machine's timer with work at every turn: says when it was ticked."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def next_wake_ms(self, now_ms: int) -> int | None:
        return now_ms

    def tick(self, now_ms: int) -> None:
        self.seen.append("tick")


def test_between_two_steps_of_a_batch_only_other_tasks_run_never_the_state_machine(
    tmp_path: Path,
) -> None:
    """A standby controller refuses a Raft event, a posted input or a tick between two steps of
    one batch (quorum/controller/controller.py): the turns between steps (`yield_turn`, the
    core served) run the loop's other tasks only. Two stepped batches committed together are
    applied one after the other, the state machine's timer and a closure posted meanwhile
    run after both."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.005
        seen: list[str] = []

        def stepped(item: ApplyItem) -> Iterator[None]:
            if isinstance(item, CommittedBatch) and not item.is_control:
                for step in range(3):
                    time.sleep(0.01)  # each step ends its turn
                    seen.append(f"{item.base_offset} step {step}")
                    if step == 0:
                        driver.post(lambda now: seen.append("posted"))
                    yield

        driver.add_stepped_listener(stepped)
        driver.add_timer(_AlwaysDue(seen))
        loop = await started_leading(driver)
        try:
            # Queued before the loop runs again: one Ready appends and commits both.
            waits = [asyncio.ensure_future(driver.append_and_wait([b"big"])) for _ in range(2)]

            async def probe() -> None:
                while not all(wait.done() for wait in waits):
                    seen.append("probe")
                    await asyncio.sleep(0)

            await asyncio.wait_for(asyncio.gather(probe(), *waits), 10)
            # Before the stop: from then on the loop runs no queued input.
            await eventually(lambda: seen.count("posted") == 2, "the posted inputs ran")
        finally:
            await stopped(driver, loop)
        steps = [i for i, entry in enumerate(seen) if "step" in entry]
        inside = seen[steps[0] : steps[-1]]
        assert [entry for entry in inside if "step" in entry] == sorted(
            (entry for entry in inside if "step" in entry), key=lambda e: int(e.split()[0])
        ), seen
        assert "probe" in inside, seen  # other tasks ran between the steps
        assert "tick" not in inside and "posted" not in inside, seen
        assert "posted" in seen[steps[-1] :], seen

    asyncio.run(scenario())


def test_queued_inputs_are_taken_in_order_with_other_tasks_run_between_long_turns(
    tmp_path: Path,
) -> None:
    """Inputs queued together (a restart's heartbeats, each unfencing with its elections, and
    AlterPartition batches) run in the order posted, but not all in one turn: once a turn's
    time is over, the loop's other tasks run before the rest."""

    async def scenario() -> None:
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks())
        driver.apply_turn_s = 0.01
        seen: list[str] = []
        loop = await started_leading(driver)
        try:
            done = asyncio.Event()

            def slow(index: int) -> None:
                time.sleep(0.006)  # a write of hundreds of partition changes
                seen.append(f"input {index}")
                if index == 5:
                    done.set()

            for index in range(6):  # queued before the driver's loop runs again
                driver.post(lambda now, index=index: slow(index))

            async def probe() -> None:
                while not done.is_set():
                    seen.append("probe")
                    await asyncio.sleep(0)

            await asyncio.wait_for(asyncio.gather(probe(), done.wait()), 10)
        finally:
            await stopped(driver, loop)
        inputs = [entry for entry in seen if entry != "probe"]
        assert inputs == [f"input {index}" for index in range(6)], seen
        between = seen[seen.index("input 0") : seen.index("input 5")]
        assert "probe" in between, seen  # not one turn for all six
        runs = "".join("i" if entry != "probe" else "p" for entry in between)
        assert "iii" not in runs, seen  # two inputs of 6 ms fill a turn of 10 ms

    asyncio.run(scenario())


class Session:
    """A broker session on the loop: expires at its deadline unless a heartbeat (a posted
    input) moves it first."""

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self.expired_at: int | None = None

    def next_wake_ms(self, now_ms: int) -> int | None:
        return None if self.expired_at is not None else self.deadline_ms

    def tick(self, now_ms: int) -> None:
        if now_ms >= self.deadline_ms:
            self.expired_at = now_ms


def test_a_timer_never_acts_ahead_of_an_input_queued_before_its_deadline(tmp_path: Path) -> None:
    """A backlog (an input longer than a turn) leaves a heartbeat queued that arrived before
    the session's deadline; the deadline passes while it waits. The heartbeat runs first and
    moves the deadline: the session never expires on the deadline it would have moved."""

    async def scenario() -> None:
        clock = ManualClock(1_000)
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(
            1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks(), clock=clock
        )
        session = Session(1_100)
        driver.add_timer(session)
        beats: list[int] = []

        def beat(now: int) -> None:
            session.deadline_ms = now + 100
            beats.append(now)

        loop = asyncio.create_task(driver.run())
        try:
            await asyncio.sleep(0.1)  # the loop starts and waits for inputs
            # Posted with no await in between: the loop takes them only after.
            driver.post(lambda now: time.sleep(driver.apply_turn_s * 2))  # the backlog's head
            clock.advance(50)
            driver.post(beat)  # arrives at 1_050, before the deadline
            clock.advance(100)  # 1_150: past the deadline while the heartbeat waits
            await eventually(lambda: beats, "the heartbeat ran")
            await asyncio.sleep(0.05)  # the loop checks its timers again
        finally:
            await stopped(driver, loop)
        assert session.expired_at is None
        assert beats == [1_150] and session.deadline_ms == 1_250

    asyncio.run(scenario())


def test_one_timer_waiting_for_the_backlog_does_not_let_another_act_ahead_of_its_input(
    tmp_path: Path,
) -> None:
    """Timer A falls due (1_010) and waits behind the backlog from 1_070. A heartbeat for
    session B arrives at 1_080, before B's deadline (1_100); at 1_110 it is still queued.
    B must wait for it too: A's wait (since 1_070) says nothing of B's deadline."""

    async def scenario() -> None:
        clock = ManualClock(1_000)
        config = RaftConfig(voters=(VoterAddress(1, "127.0.0.1", 1),))
        driver = RaftDriver(
            1, config, RaftStorage(str(tmp_path), [1]), tasks=LoopTasks(), clock=clock
        )
        first, second = Session(1_010), Session(1_100)
        driver.add_timer(first)
        driver.add_timer(second)
        beats: list[int] = []

        def beat(now: int) -> None:
            second.deadline_ms = now + 100
            beats.append(now)

        def slow_then(advance_ms: int, post_beat: bool) -> None:
            time.sleep(driver.apply_turn_s * 2)  # fills the turn: the rest wait for the next
            if post_beat:
                clock.advance(10)
                driver.post(beat)  # arrives at 1_080, after A began to wait
            clock.advance(advance_ms)

        loop = asyncio.create_task(driver.run())
        try:
            await asyncio.sleep(0.1)  # the loop starts and waits for inputs
            driver.post(lambda now: slow_then(70, False))  # to 1_070: A is due and waits
            driver.post(lambda now: slow_then(30, True))  # beat at 1_080, then 1_110
            await eventually(lambda: beats, "the heartbeat ran")
            await asyncio.sleep(0.05)  # the loop checks its timers again
        finally:
            await stopped(driver, loop)
        assert second.expired_at is None, (second.expired_at, beats)
        assert beats == [1_110]

    asyncio.run(scenario())
