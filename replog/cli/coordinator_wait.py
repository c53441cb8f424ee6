"""How `replog consumer-groups` waits out a group coordinator that is not ready yet, as Kafka's
admin client retries its retriable errors until the tool's `--timeout`: the decisions, without
I/O.

A fresh cluster creates `__consumer_offsets` at the first FindCoordinator (answered
COORDINATOR_NOT_AVAILABLE meanwhile), then loads each partition (COORDINATOR_LOAD_IN_PROGRESS);
a partition whose leader moved answers NOT_COORDINATOR. Each of these clears by itself.

Rules:
- COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR are asked again
  (the coordinator found anew) after a backoff growing from `BACKOFF_MS` to `BACKOFF_MAX_MS`,
  never past the timeout; any other error ends the command at once.
- When the timeout has passed, the last error ends it, saying it did not clear within the
  timeout.
- Waiting longer than `NOTE_AFTER_MS` says what it waits for (the call and the last error),
  then again every `NOTE_EVERY_MS`.
"""

from __future__ import annotations

from replog.common.backoff import doubling_backoff_ms
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    ReplogError,
)

TIMEOUT_MS_DEFAULT = 30_000  # kafka-consumer-groups.sh's --timeout
BACKOFF_MS = 100  # Kafka's retry.backoff.ms
BACKOFF_MAX_MS = 1000  # Kafka's retry.backoff.max.ms
NOTE_AFTER_MS = 3000
NOTE_EVERY_MS = 10_000
WAITED_OUT = (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError)


class CoordinatorWait:
    """One call of the command, asked again while its coordinator is not ready (module
    docstring)."""

    def __init__(self, what: str, *, now_ms: int, timeout_ms: int = TIMEOUT_MS_DEFAULT) -> None:
        if timeout_ms <= 0:
            raise ValueError(f"--timeout must be positive, not {timeout_ms} ms")
        self.what = what  # the call, in errors and notes ("describing group 'g'")
        self.timeout_ms = timeout_ms
        self._started_ms = now_ms
        self._deadline_ms = now_ms + timeout_ms
        self._failures = 0
        self._next_note_ms = now_ms + NOTE_AFTER_MS
        self.last: KafkaError | None = None

    def failed(self, error: ReplogError, now_ms: int) -> int:
        """How long to wait before asking again after `error`; raises it (with the wait
        named) when it is not to be waited out or the time is up."""
        if not isinstance(error, WAITED_OUT):
            raise error
        self.last = error
        remaining_ms = self._deadline_ms - now_ms
        if remaining_ms <= 0:
            raise type(error)(
                f"{self.what}: the group coordinator was not ready within {self.timeout_ms} ms "
                f"(--timeout): {error}"
            ) from error
        self._failures += 1
        return min(doubling_backoff_ms(self._failures, BACKOFF_MS, BACKOFF_MAX_MS), remaining_ms)

    def note(self, now_ms: int) -> str | None:
        """What the call waits for, when it has waited long enough to say so; else None."""
        if self.last is None or now_ms < self._next_note_ms:
            return None
        self._next_note_ms = now_ms + NOTE_EVERY_MS
        waited_s = (now_ms - self._started_ms) / 1000
        left_s = max(0, self._deadline_ms - now_ms) / 1000
        return (
            f"{self.what}: waiting for the group coordinator ({waited_s:.1f} s so far, "
            f"{left_s:.1f} s left of --timeout {self.timeout_ms} ms): {self.last}"
        )
