"""Which partitions the cleaner is cleaning, and which it must leave alone (Kafka's
`LogCleaningState` as `LogCleanerManager` keeps it).

Rules:
- A partition is in no state (cleanable), in progress (a pass runs), aborted (a pass runs and
  was asked to stop), or paused n times (no pass may start).
- `start` succeeds only from no state. `done` ends a pass: in progress -> no state, aborted ->
  paused once (whoever aborted it is waiting for that).
- `abort_and_pause` (before a truncation, a deletion, a move of the log): no state -> paused
  once; paused n -> n + 1; in progress -> aborted, and the answer says the caller must wait
  until `done` makes it paused (`is_paused`); aborted -> stays aborted, same answer. The
  running pass sees `is_aborted` and stops at its next check.
- `resume` undoes one pause; resuming a partition that is not paused is a `ValueError`
  naming it (Kafka's IllegalStateException).
- `forget` drops a partition (its log is gone). Pure; one owner orders the calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.common import TopicPartitionKey


@dataclass(frozen=True, slots=True)
class Paused:
    times: int


IN_PROGRESS = "in-progress"
ABORTED = "aborted"
State = str | Paused


class CleaningStates:
    __slots__ = ("_states",)

    def __init__(self) -> None:
        self._states: dict[TopicPartitionKey, State] = {}

    def state(self, partition: TopicPartitionKey) -> State | None:
        return self._states.get(partition)

    def start(self, partition: TopicPartitionKey) -> bool:
        """Mark a pass started; False when the partition is in any state."""
        if partition in self._states:
            return False
        self._states[partition] = IN_PROGRESS
        return True

    def done(self, partition: TopicPartitionKey) -> None:
        state = self._states.get(partition)
        if state == IN_PROGRESS:
            del self._states[partition]
        elif state == ABORTED:
            self._states[partition] = Paused(1)
        else:
            raise ValueError(f"{_name(partition)}: no cleaning in progress to end (state {state})")

    def abort_and_pause(self, partition: TopicPartitionKey) -> bool:
        """Stop cleaning the partition until `resume`; True when a running pass must first
        end (wait for `is_paused`)."""
        state = self._states.get(partition)
        if state is None:
            self._states[partition] = Paused(1)
            return False
        if isinstance(state, Paused):
            self._states[partition] = Paused(state.times + 1)
            return False
        self._states[partition] = ABORTED
        return True

    def is_aborted(self, partition: TopicPartitionKey) -> bool:
        return self._states.get(partition) == ABORTED

    def is_paused(self, partition: TopicPartitionKey) -> bool:
        return isinstance(self._states.get(partition), Paused)

    def resume(self, partition: TopicPartitionKey) -> None:
        state = self._states.get(partition)
        if not isinstance(state, Paused):
            raise ValueError(f"{_name(partition)}: cleaning is not paused (state {state})")
        if state.times > 1:
            self._states[partition] = Paused(state.times - 1)
        else:
            del self._states[partition]

    def forget(self, partition: TopicPartitionKey) -> None:
        self._states.pop(partition, None)


def _name(partition: TopicPartitionKey) -> str:
    return f"{partition[0]}-{partition[1]}"
