"""Incremental fetch sessions (KIP-227) on one ReplicaFetch call: a fetcher sends only the
partitions whose fetch position changed, and the leader answers only the partitions with news.

A fetcher (a follower's, or a consumer's) fetches every partition it reads from a leader in
one request, again and again. Without sessions each round carries every partition both ways,
so the cost of a round grows with the partitions fetched, busy or idle (the idle-partitions
benchmark: produce p50 12.8x slower next to 600 idle partitions). A session makes the messages
grow with what changed instead.

Kafka keeps sessions in a broker-wide cache under a session id; here a follower's session is bound
to one ReplicaFetch call, whose requests arrive in order, one at a time. The call's end is the
session's end, so there is no id, no cache and no eviction, and the two sides cannot disagree
about which session a request belongs to.

Rules:
- Sessions are opt-in per request: `session_epoch` NO_SESSION (-1) is a sessionless fetch,
  answered in full (every unary Fetch, such as the Spark source's).
- The first request of a session has epoch 0 and every partition to fetch (a full fetch); the
  leader keeps its entries, in order. Each later request has the next epoch (1, 2, ..., after
  2**31 - 1 back to 1) and carries only the partitions added or changed since the previous
  request (any field of the entry) and, as `forgotten`, those dropped (a follower backing a
  partition off, a consumer holding a partition's records unread or paused, leaves it out
  until it fetches it again). A changed entry keeps its place; an added one joins the end.
- A full request (epoch 0) may come at any time and starts the session afresh. An incremental
  request whose epoch is not the one the leader expects is refused as a whole
  (INVALID_FETCH_SESSION_EPOCH); the call ends, and the fetcher's next call opens a new session
  with a full request. A fetcher's session is reset whenever its call ends.
- Dirty-only rounds (the leader's side on a ReplicaFetch call; docs/replication.md "Dirty-only
  rounds"): the session keeps the set of its *dirty* partitions, those that may have news, and
  a round reads only those (`round_request`), in the session's order. A partition is dirty from
  the moment its entry arrives (a full request makes all dirty; an incremental one the entries
  it carries) and whenever the leader reports news for it (`mark`: records appended, the high
  watermark or the log start offset moved by the leader, a leadership, leader epoch or ISR
  change, a pending ISR change settled, the leader's eligibility changed; `mark_all`: all
  of them, for a leader that takes new registrations at once). It stops
  being dirty only when a round's initial read of it found nothing to read (the fetch offset at
  or past the bound), with no error and no diverging epoch, and for a follower moved no high
  watermark and parked the follower's progress on the session's clock (`park`). A partition
  that leaves the session (forgotten, or left out of a full request) is handed to
  the leader (`take_left`) to unpark its follower's progress before the round's reads: the
  walking leader stops recording fetches of it from that round on. Likewise a round unparks
  each follower partition it reads before reading it: that read records the fetch, or fails
  and records none, as the walking leader's would. So a clean
  partition is one whose read would find nothing again, answer the same high watermark and log
  start offset (so the answer below would leave it out), and record the same follower progress
  (replica_progress, parked progress), and skipping it changes nothing a fetcher or the ISR and
  high watermark rules can see. (A log start offset that retention moves is no news: it is
  answered with the partition's next news.)
- Bounded rounds: a round reads at most `round_partitions` dirty partitions (250 by default),
  taken in the session's order from where the previous bounded round stopped, wrapping around
  (round-robin, so every dirty partition is read within a few rounds), and answered in the
  session's order; the others stay dirty and are *deferred* (`deferred`: how many), and a
  round that deferred any answers without waiting. A deferred partition is one the fetcher
  left out of that round, so the round hands over (`take_left`) every partition that became
  dirty since the previous round, to stop its parked progress at the latest round before the
  reads, as for one that left; one deferred again was unparked already (only a read parks).
  So a restart or a leadership change, which makes every partition dirty at once, costs a
  round `round_partitions` reads on the leader and as many answers on the follower.
- The clock (`clock`) is moved to each round's time after that round's initial reads; a round
  that finds nothing waits for news (`waiter`, called with each key marked while it waits) or
  its max wait.
- Kafka's cache of sessions (`fetch_session_cache`) serves the whole partition list each
  round, as a full fetch (`full_request`), as Kafka does.
- The answer to a full request has every partition read, which in a bounded round is not
  every partition of the request: the others stay dirty for a later round. The answer to an
  incremental one has a partition only when it carries records, an error or a diverging
  epoch, or a high watermark or log start offset other than the last one this session sent
  for it without an error since the fetcher last sent its entry (so a partition whose entry
  the request carries, new or changed, is answered, and so is the first answer after an
  error). A fetcher reads a partition missing from any answer, the first one's too, as
  "nothing new yet". (The last stable offset is the high watermark here: no transactions.)
- A fetcher may send an unchanged entry again to have it answered (a consumer that lost track
  of the partition's high watermark does).
- A fetcher that knows what changed in its request since the previous one (a follower's
  plans, `server/data_plane/follower_fetch.py`) says so (`FetchChanges`): the session then compares
  only those entries, so building an incremental request costs what changed, not the session's
  size. The hint counts only when it is relative to the request the session last sent.
- A fetcher may bound how many partitions one request adds to the session (`adds_per_request`,
  a follower's `SESSION_ADDS_PER_REQUEST`), full requests included: the others *wait*, in the
  order they were wanted, and join in later requests, oldest first; a partition that stops
  being wanted while it waits is dropped, unsent. A waiting partition is not in the session
  (`holds`), so no answer may carry it, and the leader neither reads it nor records a fetch of
  it, exactly as for a partition the fetcher has not asked for yet. A request that leaves any
  waiting asks for an answer at once (max wait 0), so the next request follows without the
  leader's wait. Why: a session's opening at 33,000 partitions, or tens of thousands joining
  at once in a creation, cost one loop turn each for the request's encoding on the follower
  (66 ms of CPU) and the session's update on the leader (37-41 ms), and the next round's
  `take_left` again; bounded, each costs what one batch of additions does.
- Likewise a fetcher may bound how many *changed* entries one request carries
  (`changes_per_request`, a follower's `SESSION_CHANGES_PER_REQUEST`): the others wait, in the
  order they changed, a waiting one's newer entry keeping its place (a partition's latest
  entry wins; one changed back to what the leader holds, or dropped, stops waiting), and
  go in later requests, oldest first; a request that leaves any waiting asks for an answer
  at once. Meanwhile the leader keeps serving the entry it holds, which is one the fetcher
  sent: older, never ahead of the fetcher's log, because a change that lowers the fetch
  offset (a truncation) never waits; those come from answers, a bounded round's partitions
  at most each, and count in the bound. So the leader records no progress the
  follower's log does not have (a stale entry's offset is at or below the follower's, or
  its leader epoch is fenced and nothing is recorded). The fetcher reads no answer to a
  partition whose change waits (`read_answer`): the leader read it at the entry it holds, not
  the one the fetcher wants; once the change goes, the partition is answered again, as any
  changed entry is. Why: a leader-epoch bump of every partition (a restart) changed 33,000
  entries in one request, about 49 ms of loop CPU on each side.
- A partition whose answer carried records moves to the end of the session's order (Kafka's
  rotation): the leader fills an answer in order until its byte budget is spent, and a fixed
  order would let the first partitions starve the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from itertools import chain, islice

from sortedcontainers import SortedList

from replog.common import TopicPartitionKey
from replog.errors import InvalidFetchSessionEpochError
from replog.replication.messages import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
)
from replog.replication.replica_progress import FetchSessionClock

FULL_FETCH_EPOCH = 0
_EPOCH_MAX = 2**31 - 1
# The most partitions a dirty-only round reads (module Rules, bounded rounds): about 12-25 ms
# of one leader's loop for the reads, the answer's encoding and the follower's processing on
# this machine when every partition has news (50-70 ms at 500 under load at a restart, the
# largest turns left), against 0.3-1.6 s for 6,700 partitions at once.
ROUND_PARTITIONS = 250
# The most partitions a follower's request adds to its session (module Rules): about 2-3 ms
# of a loaded machine's CPU for the request's encoding on the follower and again for its
# decoding and the session's update on the leader; 33,000 joining at once held a loop for
# 40-70 ms each. A session opening at 33,000 then takes 33 requests, each answered at once.
SESSION_ADDS_PER_REQUEST = 1000
# The most changed entries a follower's request carries (module Rules): 33,000 (a leader-epoch
# bump of every partition) cost about 49 ms of loop CPU on each side in one request.
SESSION_CHANGES_PER_REQUEST = 1000


def next_session_epoch(epoch: int) -> int:
    """The epoch after `epoch`: 1, 2, ..., 2**31 - 1, then 1 again (0 opens a session)."""
    return 1 if epoch >= _EPOCH_MAX else epoch + 1


def _key(entry: FetchPartition | FetchPartitionResult) -> TopicPartitionKey:
    return (entry.topic, entry.partition)


@dataclass(frozen=True, slots=True)
class FetchChanges:
    """What changed in a fetcher's request since the request `since`: the entries added or
    changed, and None for those dropped; every other entry is the same (module Rules)."""

    since: FetchRequest | None
    entries: Mapping[TopicPartitionKey, FetchPartition | None]


class FetcherSession:
    """The fetching side of one session (a follower's or a consumer's fetcher): what the
    leader holds, and the next epoch."""

    def __init__(
        self, adds_per_request: int | None = None, changes_per_request: int | None = None
    ) -> None:
        for name, bound in (
            ("adds_per_request", adds_per_request),
            ("changes_per_request", changes_per_request),
        ):
            if bound is not None and bound < 1:
                raise ValueError(f"{name} {bound}: a request must carry at least one partition")
        self._adds_per_request = adds_per_request
        self._changes_per_request = changes_per_request
        self._sent: dict[TopicPartitionKey, FetchPartition] = {}
        # Wanted, not yet sent: beyond a request's `adds_per_request` (module Rules).
        self._waiting: dict[TopicPartitionKey, FetchPartition] = {}
        # Held by the leader at an older entry, the newer one not yet sent: beyond a request's
        # `changes_per_request` (module Rules).
        self._changed: dict[TopicPartitionKey, FetchPartition] = {}
        self._epoch = FULL_FETCH_EPOCH
        self._last: FetchRequest | None = None  # the request `to_send` was last given

    def reset(self) -> None:
        """The call ended: the next request is a full one, opening a new session."""
        self._sent = {}
        self._waiting = {}
        self._changed = {}
        self._epoch = FULL_FETCH_EPOCH
        self._last = None

    @property
    def waiting(self) -> int:
        """How many wanted partitions wait to join the session (module Rules)."""
        return len(self._waiting)

    @property
    def changes_waiting(self) -> int:
        """How many partitions the leader holds at an older entry than the one wanted, their
        change waiting to be sent (module Rules)."""
        return len(self._changed)

    def read_answer(self, response: FetchResponse) -> FetchResponse:
        """`response` without the partitions whose change waits: the leader read them at the
        entry it holds, which this side no longer wants (module Rules)."""
        changed = self._changed
        if not changed or not any(_key(r) in changed for r in response.partitions):
            return response
        return replace(
            response, partitions=tuple(r for r in response.partitions if _key(r) not in changed)
        )

    def holds(self, key: TopicPartitionKey) -> bool:
        """Whether the leader's side of the session holds `key` (as this side sent it)."""
        return key in self._sent

    def to_send(
        self,
        request: FetchRequest,
        resend: Collection[TopicPartitionKey] = (),
        changes: FetchChanges | None = None,
    ) -> FetchRequest:
        """The request to send for `request`, which lists every partition to fetch now: the
        full one at a session's start, else only what changed, what was dropped, and the
        partitions in `resend` (to be answered in full, changed or not). `changes`, if it
        is relative to the request this session last sent, names every entry that may differ
        from it."""
        last, self._last = self._last, request
        if (
            changes is not None
            and self._epoch != FULL_FETCH_EPOCH
            and last is not None
            and changes.since is last
        ):
            return self._send_changes(request, resend, changes)
        cap = self._adds_per_request
        waiting: dict[TopicPartitionKey, FetchPartition] = {}
        if self._epoch == FULL_FETCH_EPOCH:
            partitions = request.partitions
            if cap is not None and len(partitions) > cap:
                waiting = {_key(entry): entry for entry in partitions[cap:]}
                partitions = partitions[:cap]
            wanted = {_key(entry): entry for entry in partitions}
            wire = replace(
                request, partitions=partitions, session_epoch=FULL_FETCH_EPOCH, forgotten=()
            )
            self._changed = {}
        else:
            wanted = {_key(entry): entry for entry in request.partitions}
            sent = self._sent
            room = len(wanted) if cap is None else cap
            bounded_changes = self._changes_per_request is not None
            changed: list[FetchPartition] = []
            may_wait: dict[TopicPartitionKey, FetchPartition] = {}
            urgent = 0  # changed entries that go regardless of the bound
            for k, e in wanted.items():
                old = sent.get(k)
                if old is None:
                    if not room:
                        waiting[k] = e
                        continue
                    room -= 1
                    changed.append(e)
                # Identity first: a follower reuses an unchanged partition's entry object.
                elif old is not e and old != e:
                    if (
                        bounded_changes
                        and e.fetch_offset >= old.fetch_offset
                        and not (resend and k in resend)
                    ):
                        may_wait[k] = e
                    else:
                        urgent += 1
                        changed.append(e)
                elif resend and k in resend:
                    urgent += 1
                    changed.append(e)
            if may_wait:
                changed.extend(self._changes_to_send(may_wait, urgent))
                for k in self._changed:
                    wanted[k] = sent[k]  # the leader keeps the entry it holds
            else:
                self._changed = {}
            wire = replace(
                request,
                partitions=tuple(changed),
                forgotten=tuple(k for k in sent if k not in wanted),
                session_epoch=self._epoch,
            )
            for k in waiting:
                del wanted[k]
        self._sent = wanted
        self._waiting = waiting
        self._epoch = next_session_epoch(self._epoch)
        return self._at_once_if_waiting(wire)

    def _changes_to_send(
        self, may_wait: dict[TopicPartitionKey, FetchPartition], urgent: int
    ) -> list[FetchPartition]:
        """Of the changed entries `may_wait` (those that keep or raise the fetch offset), those
        this request carries beside `urgent` that go regardless, the ones waiting longest
        first; the others wait (module Rules)."""
        queue = {k: may_wait.pop(k) for k in self._changed if k in may_wait}
        queue.update(may_wait)
        room = max(0, self._changes_bound() - urgent)
        self._changed = dict(islice(queue.items(), room, None))
        return list(islice(queue.values(), room))

    def _changes_bound(self) -> int:
        bound = self._changes_per_request
        assert bound is not None
        return bound

    def _at_once_if_waiting(self, wire: FetchRequest) -> FetchRequest:
        """`wire`, asking for an answer at once while partitions wait to be sent (module
        Rules)."""
        if (self._waiting or self._changed) and wire.max_wait_ms:
            return replace(wire, max_wait_ms=0)
        return wire

    def _send_changes(
        self,
        request: FetchRequest,
        resend: Collection[TopicPartitionKey],
        changes: FetchChanges,
    ) -> FetchRequest:
        sent, waiting, changed = self._sent, self._waiting, self._changed
        bounded_changes = self._changes_per_request is not None
        partitions: list[FetchPartition] = []
        forgotten: list[TopicPartitionKey] = []
        for key, entry in changes.entries.items():
            old = sent.get(key)
            if entry is None:
                if old is not None:
                    del sent[key]
                    changed.pop(key, None)
                    forgotten.append(key)
                else:
                    waiting.pop(key, None)
            elif old is None:
                # Joins behind the partitions waiting before it (module Rules); a waiting
                # one's newer entry keeps its place.
                waiting[key] = entry
            elif old is not entry and old != entry:
                if bounded_changes and entry.fetch_offset >= old.fetch_offset and key not in resend:
                    changed[key] = entry  # waits; a waiting one's newer entry keeps its place
                else:
                    changed.pop(key, None)
                    sent[key] = entry
                    partitions.append(entry)
            else:
                changed.pop(key, None)  # back to the entry the leader holds
                if key in resend:
                    partitions.append(entry)
        for key in resend:
            if key not in changes.entries:
                if (entry := changed.pop(key, None)) is not None:
                    sent[key] = entry
                else:
                    entry = sent.get(key)
                if entry is not None:
                    partitions.append(entry)
        if changed:
            partitions.extend(self._send_waiting_changes(len(partitions)))
        if waiting:
            partitions.extend(self._admit())
        wire = replace(
            request,
            partitions=tuple(partitions),
            forgotten=tuple(forgotten),
            session_epoch=self._epoch,
        )
        self._epoch = next_session_epoch(self._epoch)
        return self._at_once_if_waiting(wire)

    def _send_waiting_changes(self, urgent: int) -> list[FetchPartition]:
        """The waiting changes this request carries beside `urgent` changed entries that go
        regardless, the oldest first; they are what the leader holds from now (module Rules)."""
        sent, changed = self._sent, self._changed
        sending = []
        for key in list(islice(changed, max(0, self._changes_bound() - urgent))):
            entry = sent[key] = changed.pop(key)
            sending.append(entry)
        return sending

    def _admit(self) -> list[FetchPartition]:
        """The waiting partitions that join the session now, the oldest first, as many as one
        request adds (module Rules)."""
        sent, waiting = self._sent, self._waiting
        admitted = []
        for key in list(islice(waiting, self._adds_per_request)):
            entry = sent[key] = waiting.pop(key)
            admitted.append(entry)
        return admitted


class LeaderFetchSession:
    """The leader's side of one session (module Rules); one per ReplicaFetch call, or per
    cached Kafka session."""

    def __init__(self, round_partitions: int = ROUND_PARTITIONS) -> None:
        if round_partitions < 1:
            raise ValueError(
                f"round_partitions {round_partitions}: a round must read at least one partition"
            )
        self.round_partitions = round_partitions
        self._entries: dict[TopicPartitionKey, FetchPartition] = {}
        # Per partition, its place in the session's order (rising along `_entries`' order).
        self._rank: dict[TopicPartitionKey, int] = {}
        self._next_rank = 0
        # Per partition, the (high watermark, log start offset) last sent in this session.
        self._sent: dict[TopicPartitionKey, tuple[int, int]] = {}
        self._expected_epoch = FULL_FETCH_EPOCH
        # The partitions that may have news (module Rules, dirty-only rounds); their ranks in
        # order, and the partition at each rank, so that a bounded round finds the next dirty
        # ones from its cursor in O(bound log dirty), not by a walk over every dirty one (a
        # creation keeps tens of thousands dirty while it adds partitions).
        self._dirty: set[TopicPartitionKey] = set()
        self._dirty_ranks: SortedList = SortedList()
        self._at_rank: dict[int, TopicPartitionKey] = {}
        self.clock = FetchSessionClock()
        # Told of each key marked while a round of this session waits for news.
        self.waiter: Callable[[TopicPartitionKey], None] | None = None
        # Partitions that left the session since `take_left` (module Rules).
        self._left: list[TopicPartitionKey] = []
        # The partitions that became dirty since the latest round (their progress may be
        # parked), always within `_dirty`; and how many dirty ones that round deferred, and
        # the rank of the last partition it read (module Rules, bounded rounds).
        self._fresh: set[TopicPartitionKey] = set()
        self._deferred = 0
        self._cursor = -1

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def expected_epoch(self) -> int:
        """The epoch of the next incremental request."""
        return self._expected_epoch

    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    @property
    def deferred(self) -> int:
        """How many dirty partitions the latest round left unread (module Rules)."""
        return self._deferred

    def entry(self, key: TopicPartitionKey) -> FetchPartition | None:
        return self._entries.get(key)

    def mark(self, key: TopicPartitionKey) -> None:
        """The leader has news for `key` (module Rules); nothing if not in the session."""
        if key in self._entries:
            self._make_dirty(key, self._fresh)
            waiter = self.waiter
            if waiter is not None:
                waiter(key)

    def mark_all(self) -> None:
        """Every partition may have news (broker registrations changed): the next round reads
        all. A waiting round is not woken: such a change alters no answer."""
        dirty = self._dirty
        self._fresh.update(key for key in self._entries if key not in dirty)
        dirty.update(self._entries)
        self._dirty_ranks = SortedList(self._rank.values())

    def park(self, key: TopicPartitionKey) -> None:
        """A round's initial read of `key` found it idle (module Rules): clean until news."""
        self._clean(key)
        self._fresh.discard(key)

    def _make_dirty(self, key: TopicPartitionKey, fresh: set[TopicPartitionKey]) -> None:
        """`key` may have news; newly dirty, it is also `fresh` (module Rules)."""
        if key not in self._dirty:
            self._dirty.add(key)
            self._dirty_ranks.add(self._rank[key])
            fresh.add(key)

    def _clean(self, key: TopicPartitionKey) -> None:
        if key in self._dirty:
            self._dirty.remove(key)
            self._dirty_ranks.remove(self._rank[key])

    def is_dirty(self, key: TopicPartitionKey) -> bool:
        return key in self._dirty

    def take_left(self) -> list[TopicPartitionKey]:
        """The partitions that left the session, or that the latest round deferred after they
        became dirty, since the last call (module Rules): a follower's progress may be parked
        on this session's clock (even a dirty one's), and must stop at its latest round."""
        left, self._left = self._left, []
        return left

    def full_request(self, request: FetchRequest) -> FetchRequest:
        """The request `request` stands for in this session: every partition of the session,
        in its order. Raises InvalidFetchSessionEpochError for an epoch out of turn."""
        self._update(request)
        return replace(request, partitions=tuple(self._entries.values()), forgotten=())

    def round_request(self, request: FetchRequest) -> FetchRequest:
        """What to read for `request` in a dirty-only round: the session's dirty partitions
        (those `request` carries among them), at most `round_partitions` of them (module
        Rules, bounded rounds), in the session's order. Raises InvalidFetchSessionEpochError
        for an epoch out of turn."""
        self._update(request)
        entries, dirty, fresh = self._entries, self._dirty, self._fresh
        ranks, at_rank = self._dirty_ranks, self._at_rank
        bound = self.round_partitions
        if len(dirty) <= bound:
            self._deferred = 0
            fresh.clear()  # each is read now, which settles its progress first
            if len(dirty) == len(entries):
                partitions = tuple(entries.values())
            else:
                partitions = tuple(entries[at_rank[r]] for r in ranks)
            return replace(request, partitions=partitions, forgotten=())
        # Round-robin: the lowest ranks after the cursor first, then from the start.
        cursor = self._cursor
        chosen = list(
            islice(
                chain(
                    ranks.irange(minimum=cursor, inclusive=(False, True)),
                    ranks.irange(maximum=cursor),
                ),
                bound,
            )
        )
        self._cursor = chosen[-1]
        chosen.sort()
        self._deferred = len(dirty) - bound
        self._left.extend(fresh)
        fresh.clear()
        return replace(request, partitions=tuple(entries[at_rank[r]] for r in chosen), forgotten=())

    def _update(self, request: FetchRequest) -> None:
        epoch = request.session_epoch
        if epoch != FULL_FETCH_EPOCH and epoch != self._expected_epoch:
            raise InvalidFetchSessionEpochError(
                f"fetch session epoch {epoch} on this ReplicaFetch call, which expects "
                f"{self._expected_epoch}"
                + (" (a new call starts with a full fetch, epoch 0)" if epoch > 0 else "")
            )
        entries, rank, sent, dirty = self._entries, self._rank, self._sent, self._dirty
        ranks, at_rank = self._dirty_ranks, self._at_rank
        # After a full request every partition parked on this session was handed over
        # (`_left`): none of its entries is fresh.
        fresh = self._fresh if epoch != FULL_FETCH_EPOCH else set()
        if epoch == FULL_FETCH_EPOCH:
            self._left.extend(entries)
            entries.clear()
            rank.clear()
            at_rank.clear()
            sent.clear()
            dirty.clear()
            ranks.clear()
            self._fresh.clear()
        for key in request.forgotten:
            if key in entries:
                self._clean(key)
                del entries[key]
                del at_rank[rank.pop(key)]
                self._left.append(key)
            sent.pop(key, None)
            self._fresh.discard(key)
        for entry in request.partitions:
            key = _key(entry)
            if key not in entries:
                self._give_next_rank(key)
            entries[key] = entry
            self._make_dirty(key, fresh)
            # A sent (new or changed) entry is answered in full next: the fetcher may have
            # started that partition afresh (a consumer re-assigned it) and know nothing.
            sent.pop(key, None)
        self._expected_epoch = next_session_epoch(epoch)

    def answer(self, request: FetchRequest, response: FetchResponse) -> FetchResponse:
        """What to send for `response`, the answer to `full_request(request)` or
        `round_request(request)`: every partition after a full request, else only those with
        news; partitions that got records move to the end of the session's order."""
        full = request.session_epoch == FULL_FETCH_EPOCH
        sent, entries = self._sent, self._entries
        kept: list[FetchPartitionResult] = []
        for result in response.partitions:
            key = _key(result)
            news = (result.high_watermark, result.log_start_offset)
            if (
                full
                or result.records_size
                or result.error is not None
                or result.diverging_epoch is not None
                or sent.get(key) != news
            ):
                kept.append(result)
                if result.error is None:
                    sent[key] = news
                else:
                    # A fetcher may not take an error's high watermark for the partition's;
                    # the first answer without an error carries it again.
                    sent.pop(key, None)
            if result.records_size:
                entry = entries.pop(key, None)
                if entry is not None:
                    entries[key] = entry
                    self._move_to_end(key)
        return FetchResponse(tuple(kept))

    def _give_next_rank(self, key: TopicPartitionKey) -> int:
        """Put `key` at the end of the session's order; its new rank."""
        new = self._next_rank
        self._next_rank += 1
        self._rank[key] = new
        self._at_rank[new] = key
        return new

    def _move_to_end(self, key: TopicPartitionKey) -> None:
        old = self._rank[key]
        del self._at_rank[old]
        new = self._give_next_rank(key)
        if key in self._dirty:
            self._dirty_ranks.remove(old)
            self._dirty_ranks.add(new)
