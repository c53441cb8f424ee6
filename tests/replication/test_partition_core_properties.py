"""Random scripts against one partition's leader core (`partition_core`), through the scenario
interpreter's shell (`partition_scenario.py`), which checks after every command:

- the HW never moves back while this broker leads and never passes the leader's LEO;
- an acks=-1 produce answered with success has its offsets on every member of the maximal
  ISR, and that ISR reaches the effective min ISR (else NOT_ENOUGH_REPLICAS_AFTER_APPEND);
- the committed ISR always holds the leader.

This module adds, per step:
- a DeleteRecords answered with success carries a low watermark at or above its offset, and
  the log start never passes the HW;
- an acks=-1 produce is refused with NOT_ENOUGH_REPLICAS, appending nothing, exactly while
  the committed ISR is below the effective min ISR;
- the HW moves only while the committed ISR reaches the effective min ISR (KIP-966);
- every produce and DeleteRecords gets exactly one answer: at once, or parked and completed
  (or expired) once;
- a parked produce completes with NOT_LEADER_OR_FOLLOWER only once this broker stopped leading;
- the AlterPartition sender's collection hands over the leader's change to send once, and
  again only once it was answered, or the leadership changed (metadata), and nothing when
  there is nothing to send.

Followers fetch at offsets that never go back and never pass the leader's LEO; the controller
answers the change in flight (or refuses it with one of the errors the leader distinguishes),
and its own ISR changes only drop followers (as fencing does). `test_the_checks_catch_*`
show that the checks fail on a broken core.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from partition_scenario import LEADER, PartitionScenario, run_command

from replog.replication import partition_core
from replog.replication.leader_state import IsrChange, PartitionLeaderState
from replog.replication.partition_core import Effects, PartitionCore
from replog.replication.partition_effects import HandOverAlterPartition
from replog.replication.partition_events import AlterPartitionCollected

FOLLOWERS = (2, 3)
ANSWERS = ("ok", "ok", "ok", "INVALID_UPDATE_VERSION", "INELIGIBLE_REPLICA", "NOT_CONTROLLER")


class PartitionCoreMachine(RuleBasedStateMachine):
    """Commands for the interpreter, with the per-step checks of the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.env = PartitionScenario()
        self.names = 0
        self.epoch = 1
        self.answered: set[str] = set()
        self.delete_offsets: dict[str, int] = {}
        self.follower_log_starts: dict[int, int] = {}
        self.handed: IsrChange | None = None  # handed to the sender and not answered since

    def run(self, line: str) -> list[str]:
        command = line.split()[0]
        if command in ("lead", "metadata"):
            self.handed = None  # a new registration: the sender gets the change anew
        elif command == "answer" and self.env.in_flight == self.handed:
            self.handed = None
        leader = self.env.core.leader
        hw_before = leader.high_watermark if leader is not None else None
        committed_ok = leader is not None and len(leader.isr) >= leader.effective_min_isr
        out = run_command(self.env, line)
        leader = self.env.core.leader
        if hw_before is not None and leader is not None and leader.high_watermark != hw_before:
            assert committed_ok or len(leader.isr) >= leader.effective_min_isr, (
                f"{line}: the HW moved while the ISR was below min ISR"
            )
        for text in out:
            words = text.split()
            if (words[0] in ("answer", "complete") and len(words) == 3) or words[0] == "done":
                name = words[1]
                assert name not in self.answered, f"{name} answered twice"
                self.answered.add(name)
            if words[0] == "done" and words[2] == "ok":
                offset = self.delete_offsets[words[1]]
                assert int(words[-1]) >= offset, f"{text}: below the offset {offset}"
        return out

    @initialize(min_isr=st.integers(1, 3))
    def lead(self, min_isr: int) -> None:
        self.run(f"lead replicas=1,2,3 min-isr={min_isr} lag=1000")

    @rule(acks=st.sampled_from((-1, -1, 1, 0)), records=st.integers(1, 3))
    def produce(self, acks: int, records: int) -> None:
        self.names += 1
        name = f"p{self.names}"
        leo_before = self.env.leo
        leader = self.env.core.leader
        below_min = leader is not None and len(leader.isr) < leader.effective_min_isr
        out = self.run(f"produce {name} acks={acks} records={records}")
        if acks == -1 and below_min:
            assert "  refuse NOT_ENOUGH_REPLICAS" in out, "acks=-1 appended below min ISR"
        if "  refuse NOT_ENOUGH_REPLICAS" in out:
            assert self.env.leo == leo_before
            assert leader is not None and len(leader.isr) < leader.effective_min_isr
            self.answered.add(name)
        elif any(line.startswith("  refuse") for line in out):
            self.answered.add(name)

    @rule(follower=st.sampled_from(FOLLOWERS), data=st.data())
    def fetch(self, follower: int, data: st.DataObject) -> None:
        low = self.env.fetched.get(follower, 0)
        if low > self.env.leo:
            return
        offset = data.draw(st.integers(low, self.env.leo))
        log_start = self.follower_log_starts.get(follower, 0)
        log_start = data.draw(
            st.integers(log_start, max(log_start, min(offset, self.env.log_start)))
        )
        self.follower_log_starts[follower] = log_start
        self.run(f"fetch {follower} offset={offset} lso={log_start}")

    @precondition(lambda self: self.env.core.leader is not None)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        leader = self.env.core.leader
        assert leader is not None
        offset = data.draw(st.integers(-1, leader.high_watermark + 1))
        self.names += 1
        name = f"d{self.names}"
        hw = leader.high_watermark
        self.delete_offsets[name] = hw if offset == -1 else offset
        out = self.run(f"delete {name} offset={offset}")
        if any(line.startswith("  refuse") for line in out):
            self.answered.add(name)
        assert self.env.log_start <= max(hw, 0), "the log start passed the HW"

    @precondition(lambda self: bool(self.env.parked or self.env.parked_deletes))
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted({*self.env.parked, *self.env.parked_deletes})))
        self.run(f"expire {name}")

    @rule(ms=st.sampled_from((100, 600, 1100)))
    def tick(self, ms: int) -> None:
        self.run(f"tick {ms}")

    @rule()
    def isr_check(self) -> None:
        self.run("isr-check")

    @rule()
    def collect(self) -> None:
        leader = self.env.core.leader
        change = None if leader is None else leader.isr_change_to_send
        handed = [line for line in self.run("collect") if line.startswith("  hand over")]
        if change is None:
            assert not handed, "handed over with nothing to send"
            self.handed = None
        elif change == self.handed:
            assert not handed, f"{change} handed over twice before its answer"
        else:
            assert handed, f"{change} not handed over"
            self.handed = change

    @precondition(lambda self: self.env.in_flight is not None)
    @rule(answer=st.sampled_from(ANSWERS))
    def answer(self, answer: str) -> None:
        self.run(f"answer {answer}")

    @precondition(lambda self: self.env.core.leader is not None)
    @rule(data=st.data())
    def controller_drops_followers(self, data: st.DataObject) -> None:
        leader = self.env.core.leader
        assert leader is not None
        kept = [r for r in leader.isr if r == LEADER or data.draw(st.booleans())]
        self.run(f"metadata isr={','.join(map(str, kept))}")

    @rule(min_isr=st.integers(1, 3))
    def config(self, min_isr: int) -> None:
        self.run(f"config min-isr={min_isr}")

    @rule(broker=st.sampled_from(FOLLOWERS), fence=st.booleans())
    def fencing(self, broker: int, fence: bool) -> None:
        self.run(f"{'fence' if fence else 'unfence'} {broker}")

    @precondition(lambda self: self.env.core.leader is not None)
    @rule()
    def lose_leadership(self) -> None:
        parked = set(self.env.parked)
        self.epoch += 1
        out = self.run(f"metadata leader=2 epoch={self.epoch}")
        completed = {line.split()[1] for line in out if line.startswith("  complete")}
        assert completed == parked, "every parked produce completes when leadership is lost"
        assert all("NOT_LEADER_OR_FOLLOWER" in line for line in out if "complete" in line)
        assert all("NOT_LEADER_OR_FOLLOWER" in line for line in out if "done" in line)

    @precondition(lambda self: self.env.core.leader is None)
    @rule()
    def lead_again(self) -> None:
        self.epoch += 1
        self.run(f"metadata leader=1 isr=1,2,3 epoch={self.epoch}")

    @invariant()
    def parked_only_while_leading(self) -> None:
        if self.env.core.leader is None:
            assert not self.env.parked
            assert not self.env.parked_deletes


PartitionCoreMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_partition_core_properties = PartitionCoreMachine.TestCase


def test_the_checks_catch_an_acks_answer_that_ignores_the_hw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        PartitionLeaderState, "acks_all_outcome", lambda self, required_offset: (True, None)
    )
    env = PartitionScenario()
    run_command(env, "lead replicas=1,2,3")
    with pytest.raises(AssertionError, match="acknowledged up to 1"):
        run_command(env, "produce a acks=-1")


def test_the_checks_catch_a_hw_that_moves_back(monkeypatch: pytest.MonkeyPatch) -> None:
    env = PartitionScenario()
    run_command(env, "lead replicas=1")
    run_command(env, "produce a acks=1")
    leader = env.core.leader
    assert leader is not None and leader.high_watermark == 1
    monkeypatch.setattr(PartitionLeaderState, "high_watermark", property(lambda self: 0))
    with pytest.raises(AssertionError, match="moved back"):
        run_command(env, "status")


def test_the_checks_catch_a_shrink_that_drops_the_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    env = PartitionScenario()
    run_command(env, "lead replicas=1,2")
    monkeypatch.setattr(PartitionLeaderState, "isr", property(lambda self: (2,)))
    with pytest.raises(AssertionError, match="lost the leader"):
        run_command(env, "status")


def test_the_random_scripts_catch_a_hw_advanced_before_the_isr_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def to_the_log_end(self: PartitionLeaderState, leader_log_end_offset: int, now_ms: int) -> bool:
        if leader_log_end_offset <= self.high_watermark:
            return False
        self._high_watermark = leader_log_end_offset
        return True

    monkeypatch.setattr(PartitionLeaderState, "_maybe_increment_high_watermark", to_the_log_end)
    # Caught is all this asks: no shrinking of the script that caught it (40 s of CI's time),
    # and no script a previous run saved, which would catch it without a search.
    unshrunk = settings(
        PartitionCoreMachine.TestCase.settings, phases=[Phase.generate], database=None
    )
    monkeypatch.setattr(PartitionCoreMachine.TestCase, "settings", unshrunk)
    with pytest.raises(BaseException) as caught:
        PartitionCoreMachine.TestCase("runTest").runTest()
    failures = getattr(caught.value, "exceptions", (caught.value,))
    assert any("acknowledged up to" in str(failure) for failure in failures), failures


def test_the_checks_catch_a_change_handed_over_at_every_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def every_time(self: PartitionCore, event: AlterPartitionCollected, now_ms: int) -> Effects:
        leader = self.leader
        change = None if leader is None else leader.isr_change_to_send
        return () if change is None else (HandOverAlterPartition(change),)

    monkeypatch.setitem(partition_core._HANDLERS, AlterPartitionCollected, every_time)
    machine = PartitionCoreMachine()
    machine.lead(min_isr=1)
    machine.run("metadata isr=1")
    machine.run("fetch 2 offset=0")  # an expansion to send
    machine.collect()
    with pytest.raises(AssertionError, match="handed over twice"):
        machine.collect()
