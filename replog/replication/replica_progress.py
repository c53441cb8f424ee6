"""What a partition leader knows of one follower: its offsets and when it was last caught up.

Rules (Kafka's `Replica.updateFetchStateOrThrow`, `isCaughtUp` and `resetReplicaState`;
docs/design/replication.md#follower-progress, #caught-up-time):
- A follower's log end offset, as the leader sees it, is the fetch offset of its latest Fetch;
  its log start offset comes from the same request. -1 means "not known yet".
- Per follower the leader keeps P (`last_fetch_leader_log_end_offset`), T
  (`last_fetch_time_ms`) and C (`last_caught_up_time_ms`). On a follower fetch at time t with
  fetch offset f, where L is the leader log end offset captured before the read:

      if   f >= L : C = max(C, t)   # had everything the leader had when this fetch arrived
      elif f >= P : C = max(C, T)   # had everything the leader had at its previous fetch
      else        : C unchanged
      P = max(L, P);  T = t

- `is_caught_up(L, now, max_lag)` = (follower LEO == L) or (now - C <= max_lag).
- Becoming leader (`reset_for_new_leadership`): LEO, log start offset and P become unknown
  (-1), T = 0, the broker epoch is forgotten, and C = now for an ISR member, else 0.
- The next leader epoch while already leader (`reset_for_new_leader_epoch`): LEO, log start
  offset and broker epoch are kept, P = the new epoch's start offset, and T = C = now for an
  ISR member, else 0. (A leader epoch further on resets as for becoming leader: the leader
  state's Rules.)

Theory of operation:
- C answers "when did this follower last have everything the leader had?" without the leader
  remembering its own LEO history: a fetch at f >= P proves the follower held, at time T, all
  the leader had when the previous fetch (at T) arrived. So a follower that keeps fetching
  with short round trips stays caught up even while the leader appends continuously, and a
  stuck or slow one ages out after `replica.lag.time.max.ms`.
- Resetting C to now for ISR members on a new leader epoch gives them one full lag period to
  fetch from the new leader before the ISR shrinks them; C = 0 for the others keeps a stale
  follower from holding back the high watermark (docs/design/replication.md#high-watermark rule 3).
- This is a plain mutable record owned by one `PartitionLeaderState`; the broker-epoch fencing
  of stale fetches needs the cluster's registrations and so lives there.

Parked progress (dirty-only fetch sessions, docs/replication.md "Dirty-only rounds"):
- A leader serving a follower's fetch session reads a partition again only when it has news
  (`fetch_session` Rules). A fetch of an idle partition at the leader's log end offset (f >= L)
  leaves its progress *parked* on the session's `FetchSessionClock`: the time of the session's
  latest fetch round, which the leader moves once per round, after that round's reads.
- While parked, T is read as the clock's time and C as max(C, the clock's time): exactly what
  the walk-everything leader would have recorded by reading the partition again in each of
  those rounds, since each such read is a fetch at f >= L with the same f, log start offset and
  broker epoch (L cannot move without the partition having news, and a partition with news is
  read, which unparks it before recording the fetch: `update_fetch_state` settles first, so
  the f >= P branch sees T as the last round before this one, as the walking leader had it).
- A session that stops fetching stops its clock, so a follower that stopped fetching ages out
  of the ISR exactly as before. A reset sets T and C outright and unparks.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1
UNKNOWN_BROKER_EPOCH = -1


class FetchSessionClock:
    """The time of one fetch session's latest round (module docstring, parked progress)."""

    __slots__ = ("last_fetch_ms",)

    def __init__(self) -> None:
        self.last_fetch_ms = 0

    def advance(self, now_ms: int) -> None:
        """A round of the session was read at `now_ms` (after its reads)."""
        if now_ms > self.last_fetch_ms:
            self.last_fetch_ms = now_ms


@dataclass(slots=True)
class ReplicaProgress:
    """What a partition leader knows of one follower (docs/design/replication.md#follower-progress,
    #caught-up-time)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # the follower's last FetchOffset; -1 unknown
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET  # P
    last_fetch_time_ms: int = 0  # T
    last_caught_up_time_ms: int = 0  # C
    broker_epoch: int = UNKNOWN_BROKER_EPOCH  # from its last fetch
    # The session clock this progress is parked on (module docstring); None: not parked.
    parked_on: FetchSessionClock | None = None

    @property
    def has_fetched(self) -> bool:
        """Whether a fetch was recorded since this broker became leader (the LEO is known)."""
        return self.log_end_offset >= 0

    @property
    def caught_up_time_ms(self) -> int:
        """C, as the walk-everything leader would have it (parked progress included)."""
        clock = self.parked_on
        if clock is None:
            return self.last_caught_up_time_ms
        return max(self.last_caught_up_time_ms, clock.last_fetch_ms)

    def park(self, clock: FetchSessionClock, leader_log_end_offset: int) -> bool:
        """Park on `clock` after a fetch at the leader's log end offset; False (not parked)
        when the follower is not there: only f >= L repeats as "caught up now"."""
        if self.log_end_offset < leader_log_end_offset:
            return False
        self.settle()
        self.parked_on = clock
        return True

    def unpark(self, clock: FetchSessionClock) -> None:
        """The partition left `clock`'s session: T and C stop at its latest round."""
        if self.parked_on is clock:
            self.settle()

    def settle(self) -> None:
        """Write the parked T and C into the record and unpark (module docstring)."""
        clock = self.parked_on
        if clock is not None:
            self.parked_on = None
            self.last_fetch_time_ms = max(self.last_fetch_time_ms, clock.last_fetch_ms)
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, clock.last_fetch_ms)

    def update_fetch_state(
        self,
        *,
        fetch_offset: int,
        log_start_offset: int,
        leader_log_end_offset: int,
        broker_epoch: int,
        now_ms: int,
    ) -> None:
        """Record one follower fetch: the lastCaughtUpTimeMs rule
        (docs/design/replication.md#caught-up-time), then P, T and offsets."""
        if fetch_offset < 0:
            raise ValueError(
                f"replica {self.broker_id}: fetch offset {fetch_offset} must not be negative"
            )
        self.settle()
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.last_fetch_leader_log_end_offset = max(
            leader_log_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = now_ms
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.broker_epoch = broker_epoch

    def is_caught_up(
        self, leader_log_end_offset: int, now_ms: int, replica_lag_time_ms_max: int
    ) -> bool:
        """Kafka's `isCaughtUp`: at the leader's LEO, or caught up within the lag limit."""
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.caught_up_time_ms <= replica_lag_time_ms_max
        )

    def reset_for_new_leadership(self, *, in_isr: bool, now_ms: int) -> None:
        """This broker just became leader: forget the follower's offsets
        (docs/design/replication.md#caught-up-time)."""
        self.parked_on = None
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0
        self.broker_epoch = UNKNOWN_BROKER_EPOCH

    def reset_for_new_leader_epoch(
        self, *, in_isr: bool, leader_epoch_start_offset: int, now_ms: int
    ) -> None:
        """This broker was leader already and only the leader epoch changed
        (docs/design/replication.md#caught-up-time)."""
        self.parked_on = None
        self.last_fetch_leader_log_end_offset = leader_epoch_start_offset
        # T = 0 for a non-ISR follower so that its next fetch cannot claim it was caught up
        # at a time before it fetched from this leader epoch (the f >= P branch uses T).
        self.last_fetch_time_ms = now_ms if in_isr else 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0
