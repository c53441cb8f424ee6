"""ProducerIdBlocks: a broker's producer ids, handed out of blocks the controller allocates.

The pure core of the broker's producer-id manager (`replog.server.broker.producer_id_manager` is the
shell that sends AllocateProducerIds and keeps the time). Kafka's `RPCProducerIdManager`.

Rules:
- Ids come from the current block, in order, each once. When it is used up, the prefetched
  next block becomes current; with no next block there is no id: `next_id` raises
  COORDINATOR_LOAD_IN_PROGRESS (retriable; Kafka answers that rather than REQUEST_TIMED_OUT,
  which old clients treat as fatal), naming the last failure to get a block, if any.
- A block is wanted (the shell should send one AllocateProducerIds) when the broker starts
  (`want_block`), when the id at 90% of the current block is handed out (Kafka's prefetch
  threshold), and whenever an id is asked for and none is available. At most one request is
  in flight, and none while a next block is already held.
- A failed request (any error: unreachable controller, STALE_BROKER_EPOCH, exhaustion, a
  block that fails the checks below) leaves the block wanted and holds the next request back
  for a backoff growing from `retry_backoff_ms` to `retry_backoff_max_ms`; an answered block
  resets it.
- A block must be sane before it is used (Kafka's checks): first id >= 0, size > 0, no int64
  overflow, and starting after every id of the blocks held, so no id is handed out twice
  even if a controller answered something stale.

Pure: no I/O, no clock (callers pass `now_ms`).
"""

from __future__ import annotations

from replog.errors import CoordinatorLoadInProgressError, KafkaError, UnknownServerError
from replog.quorum.controller.producer_id_control import ProducerIdsBlock

# Kafka's ProducerIdManager.PidPrefetchThreshold: ask for the next block when this share of
# the current one is handed out.
PREFETCH_THRESHOLD = 0.90
RETRY_BACKOFF_MS_DEFAULT = 50  # Kafka's RPCProducerIdManager.RetryBackoffMs
RETRY_BACKOFF_MAX_MS_DEFAULT = 1000
_INT64_MAX = 2**63 - 1


def prefetch_id(block: ProducerIdsBlock) -> int:
    """Handing out this id of `block` asks for the next block."""
    return block.first_producer_id + int(block.size * PREFETCH_THRESHOLD)


class ProducerIdBlocks:
    """The current block, the prefetched next one, and the state of the request for it."""

    def __init__(
        self,
        broker_id: int,
        *,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS_DEFAULT,
    ) -> None:
        self.broker_id = broker_id
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._current: ProducerIdsBlock | None = None
        self._next_id = 0  # the next id of the current block
        self._next_block: ProducerIdsBlock | None = None
        self._wanted = False
        self._in_flight = False
        self._failures = 0  # failed requests in a row
        self._retry_at_ms = 0
        self._last_failure: KafkaError | None = None
        self.blocks_received = 0  # for tests and metrics

    # --- what it holds -----------------------------------------------------------------------

    @property
    def current(self) -> ProducerIdsBlock | None:
        return self._current

    @property
    def next_block(self) -> ProducerIdsBlock | None:
        return self._next_block

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    @property
    def wanted(self) -> bool:
        return self._wanted

    @property
    def last_failure(self) -> KafkaError | None:
        return self._last_failure

    # --- ids -------------------------------------------------------------------------------

    def next_id(self) -> int:
        """A producer id never handed out before; CoordinatorLoadInProgressError if none is
        available yet (the block is then wanted)."""
        current = self._current
        if current is None or self._next_id > current.last_producer_id:
            if self._next_block is None:
                self._wanted = True
                raise CoordinatorLoadInProgressError(self._unavailable_reason())
            current = self._current = self._next_block
            self._next_block = None
            self._next_id = current.first_producer_id
        producer_id = self._next_id
        self._next_id += 1
        if producer_id == prefetch_id(current):
            self._wanted = True
        return producer_id

    def _unavailable_reason(self) -> str:
        reason = (
            f"broker {self.broker_id} has no producer ids to hand out yet: waiting for a block "
            "from the controller"
        )
        failure = self._last_failure
        if failure is not None:
            reason += f" (the last request failed: {failure.error_name}: {failure})"
        return reason

    # --- the request for the next block ------------------------------------------------------

    def want_block(self) -> None:
        """Ask for a block before any id is (the broker starts): the first client need not wait."""
        if self._next_block is None:
            self._wanted = True

    def start_request(self, now_ms: int) -> bool:
        """True if one AllocateProducerIds should go out now (it is then in flight)."""
        if not self._request_due() or now_ms < self._retry_at_ms:
            return False
        self._in_flight = True
        return True

    def retry_at_ms(self) -> int | None:
        """When a wanted block's request, held back by the backoff, may go out (None: not so)."""
        return self._retry_at_ms if self._request_due() else None

    def _request_due(self) -> bool:
        """A block is wanted, none is held in reserve, and no request for it is in flight."""
        return self._wanted and not self._in_flight and self._next_block is None

    def on_block(self, first: int, size: int, now_ms: int) -> KafkaError | None:
        """The controller allocated `size` ids from `first`; the error if the block is refused
        (and counted as a failed request)."""
        problem = self._block_problem(first, size)
        if problem is not None:
            error = UnknownServerError(
                f"broker {self.broker_id}: the controller allocated producer ids "
                f"[{first}, {first + size}): {problem}"
            )
            self.on_failure(error, now_ms)
            return error
        self._in_flight = False
        self._next_block = ProducerIdsBlock(self.broker_id, first, size)
        self._wanted = False
        self._failures = 0
        self._retry_at_ms = 0
        self._last_failure = None
        self.blocks_received += 1
        return None

    def _block_problem(self, first: int, size: int) -> str | None:
        if first < 0 or size <= 0:
            return "not a block of ids (the first must be >= 0, the size > 0)"
        if first > _INT64_MAX - size:
            return "past the largest int64"
        held = [b.last_producer_id for b in (self._current, self._next_block) if b is not None]
        if held and first <= max(held):
            return f"not after the ids this broker already holds (up to {max(held)})"
        return None

    def on_failure(self, error: KafkaError, now_ms: int) -> None:
        """The request failed; the block stays wanted, the next request waits a backoff."""
        self._in_flight = False
        self._failures += 1
        self._last_failure = error
        backoff = self._retry_backoff_ms * 2 ** min(self._failures - 1, 20)
        self._retry_at_ms = now_ms + min(self._retry_backoff_max_ms, backoff)
