"""One request to the active controller, sent again until a controller answers or its time runs
out: which controller next, after how long, when to give up and what to say while waiting (the
decisions of Kafka's `NodeToControllerRequestThread`, without I/O).

Rules:
- `ActiveController` picks the target: first the Raft leader the broker knows of, else the first
  voter; after a NOT_CONTROLLER answer naming another controller, that one; after a failure
  naming none (unreachable, timed out, NOT_CONTROLLER without a name), the Raft leader if it is
  another node, else the next voter.
- A NOT_CONTROLLER answer goes to the next target at once, at most once per voter in a row; a
  failure and further redirects wait a backoff growing from `retry_backoff_ms` to
  `retry_backoff_max_ms` first.
  An election after the active controller died is only failures and redirects: the request
  keeps going round the voters until one of them is elected and answers.
- A client's request forwarded by a broker may take its own `timeout_ms` (CreateTopics,
  AlterPartitionReassignments, ...) or, carrying none, Kafka's `request.timeout.ms` (30 s):
  longer than an election takes, as Kafka's forwarding channel retries for 60 s.
- The request gives up when its `timeout_ms` has passed: `RequestTimedOutError` (retriable),
  naming the request, its timeout and the last failure. A backoff never sleeps past it.
- An attempt that timed out with the request says only that the time ran out: an earlier
  failure (a redirect, a refused connection) stays the one named.
- Waiting longer than `NOTE_AFTER_MS` says what it waits for, then again every
  `NOTE_EVERY_MS`: the request, how long it has waited, its last failure and the time left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from replog.common.backoff import doubling_backoff_ms
from replog.errors import KafkaError, RequestTimedOutError

NOTE_AFTER_MS = 5000
NOTE_EVERY_MS = 10_000
# Kafka's request.timeout.ms default: how long a forwarded client request that carries no
# timeout of its own may wait for a controller.
FORWARD_TIMEOUT_MS_DEFAULT = 30_000


def forward_timeout_ms(client_timeout_ms: int | None) -> int:
    """How long a client's request forwarded to the controller may take in all: its own
    `timeout_ms` where it has a positive one, else `FORWARD_TIMEOUT_MS_DEFAULT`."""
    if client_timeout_ms is not None and client_timeout_ms > 0:
        return client_timeout_ms
    return FORWARD_TIMEOUT_MS_DEFAULT


class ActiveController:
    """The controller a broker's next request goes to: first the Raft leader the broker knows
    of (`hint`), else the first voter of `controller.quorum.voters`. After a NOT_CONTROLLER
    answer naming another controller, that one; after a failure naming none, the Raft leader if
    it is another node, else the next voter."""

    def __init__(self, voters: Sequence[int], hint: Callable[[], int | None]) -> None:
        if not voters:
            raise ValueError("ActiveController needs at least one controller")
        self._voters = list(voters)  # controller.quorum.voters order
        self._hint = hint
        self._controller_id: int | None = None

    def target(self) -> int:
        if self._controller_id is None:
            hint = self._hint()
            self._controller_id = hint if hint in self._voters else self._voters[0]
        return self._controller_id

    def move_on_from(self, failed_id: int, named_id: int | None = None) -> None:
        """The next target after `failed_id` failed: the one named, the Raft leader if it is
        another, else the next voter."""
        if named_id is not None and named_id in self._voters and named_id != failed_id:
            self._controller_id = named_id
            return
        hint = self._hint()
        if hint is not None and hint in self._voters and hint != failed_id:
            self._controller_id = hint
            return
        index = self._voters.index(failed_id) if failed_id in self._voters else -1
        self._controller_id = self._voters[(index + 1) % len(self._voters)]

    def __len__(self) -> int:
        return len(self._voters)


@dataclass(frozen=True, slots=True)
class Attempt:
    """Send the request to `controller_id` after waiting `delay_ms`, with `timeout_ms` left."""

    controller_id: int
    delay_ms: int
    timeout_ms: int


class ControllerRetry:
    """The retry decisions of one request to the active controller (module docstring)."""

    def __init__(
        self,
        what: str,
        active: ActiveController,
        *,
        now_ms: int,
        timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
    ) -> None:
        if timeout_ms <= 0:
            raise ValueError(f"{what}: timeout_ms must be positive, not {timeout_ms}")
        self.what = what  # names the request in errors and notes
        self.active = active
        self.timeout_ms = timeout_ms
        self._started_ms = now_ms
        self._deadline_ms = now_ms + timeout_ms
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._failures = 0
        self._redirects = 0
        self._delay_ms = 0
        self._next_note_ms = now_ms + NOTE_AFTER_MS
        self.last: KafkaError | None = None  # the last failure, named when giving up

    def next(self, now_ms: int) -> Attempt:
        """The next attempt; `RequestTimedOutError` once the request's time is up."""
        remaining_ms = self._deadline_ms - now_ms
        if remaining_ms <= 0:
            raise RequestTimedOutError(
                f"{self.what}: no controller answered within {self.timeout_ms} ms"
                + ("" if self.last is None else f" (last failure: {self.last})")
            )
        delay_ms = min(self._delay_ms, remaining_ms)
        self._delay_ms = 0
        return Attempt(self.active.target(), delay_ms, remaining_ms - delay_ms)

    def failed(self, controller_id: int, error: KafkaError, *, timed_out: bool = False) -> None:
        """`controller_id` did not answer (unreachable, or `timed_out`: the attempt used up the
        time it was given): the next voter, after a backoff."""
        if not (timed_out and self.last is not None):
            self.last = error
        self.active.move_on_from(controller_id)
        self._failures += 1
        self._delay_ms = self._backoff(self._failures)

    def redirected(self, controller_id: int, error: KafkaError, named_id: int | None) -> None:
        """`controller_id` answered NOT_CONTROLLER (naming `named_id`, if it knows the active
        controller): the next target at once, unless every voter redirected in a row already."""
        self.last = error
        self.active.move_on_from(controller_id, named_id)
        self._redirects += 1
        if self._redirects > len(self.active):
            self._failures += 1
            self._delay_ms = self._backoff(self._failures)

    def note(self, now_ms: int, asking: int) -> str | None:
        """What the request waits for (`asking`: the controller it is sent to), when it has
        waited long enough to say so; else None."""
        if now_ms < self._next_note_ms:
            return None
        self._next_note_ms = now_ms + NOTE_EVERY_MS
        waited_s = (now_ms - self._started_ms) / 1000
        left_s = max(0, self._deadline_ms - now_ms) / 1000
        return (
            f"{self.what}: waiting for an active controller to answer, asking controller "
            f"{asking} ({waited_s:.1f} s so far, {left_s:.1f} s left of {self.timeout_ms} ms)"
            + ("" if self.last is None else f"; last failure: {self.last}")
        )

    def until_note_ms(self, now_ms: int) -> int:
        """How long until the next note is due (0: now)."""
        return max(0, self._next_note_ms - now_ms)

    def _backoff(self, failures: int) -> int:
        return doubling_backoff_ms(failures, self._backoff_ms, self._backoff_max_ms)
