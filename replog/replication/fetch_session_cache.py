"""Kafka's broker-wide cache of incremental fetch sessions (KIP-227), for fetchers that speak
Kafka's protocol: sessions live across requests under a session id, not on one call.

Each cached session's partitions, epochs and choice of what to answer are the pure session of
`fetch_session` (`LeaderFetchSession`); this module adds what Kafka's `FetchManager` and
`FetchSessionCache` add around it: ids, the request's session metadata, and eviction.

Rules (Kafka's `FetchManager.newContext`, `FetchSessionCache`):
- (id 0, epoch -1) is a sessionless fetch; (id > 0, epoch -1) closes that session and is
  sessionless. Epoch 0 is a full fetch opening a new session (closing the named one first);
  the answer carries the new id, or 0 when the cache has no slot for it.
- (id > 0, epoch > 0) is incremental: an id not cached is FETCH_SESSION_ID_NOT_FOUND, an
  epoch other than the session's next INVALID_FETCH_SESSION_EPOCH, a session opened with
  topic names used with topic ids (or back) FETCH_SESSION_TOPIC_ID_ERROR; the session is left
  as it was. Otherwise it is updated (added, changed, forgotten partitions) and touched.
- A new session id is a random positive int32 not in use (`new_id` supplies candidates).
- The cache holds at most `max_slots` sessions (`max.incremental.fetch.session.cache.slots`,
  1000). When it is full, a new session first evicts the least recently used session if it
  went unused for more than `eviction_ms` (`min.incremental.fetch.session.eviction.ms`,
  120 s); else the least valuable evictable session, ordered by (privileged, partitions, id),
  if the new one is at least as valuable by (privileged, partitions) and larger than it or
  of a higher privilege; else there is no session. A session is evictable by anyone once older
  than `eviction_ms`; a non-privileged one (a consumer's) is also evictable at once by a
  privileged (follower's) new session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from replog.errors import (
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    InvalidFetchSessionEpochError,
    KafkaError,
)
from replog.replication.fetch_session import FULL_FETCH_EPOCH, LeaderFetchSession
from replog.replication.messages import NO_SESSION, FetchRequest, FetchResponse

NO_SESSION_ID = 0
SESSION_ID_MAX = 2**31 - 1
CACHE_SLOTS_DEFAULT = 1000  # max.incremental.fetch.session.cache.slots
EVICTION_MS_DEFAULT = 120_000  # min.incremental.fetch.session.eviction.ms


@dataclass(eq=False)
class CachedSession:
    """One cached session: its id, what its owner is, and its partitions (`session`)."""

    session_id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    session: LeaderFetchSession = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.session)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.size, self.session_id)


class FetchSessionCache:
    """The sessions of one broker (module Rules). Not thread-safe: one event loop uses it."""

    def __init__(
        self,
        new_id: Callable[[], int],
        *,
        max_slots: int = CACHE_SLOTS_DEFAULT,
        eviction_ms: int = EVICTION_MS_DEFAULT,
    ) -> None:
        if max_slots < 0 or eviction_ms < 0:
            raise ValueError(
                f"a fetch session cache needs max_slots >= 0 and eviction_ms >= 0, got "
                f"{max_slots} and {eviction_ms}"
            )
        self._new_id = new_id
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._sessions: dict[int, CachedSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[CachedSession]:
        return iter(list(self._sessions.values()))

    def get(self, session_id: int) -> CachedSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> CachedSession | None:
        return self._sessions.pop(session_id, None)

    def touch(self, session: CachedSession, now_ms: int) -> None:
        session.last_used_ms = max(session.last_used_ms, now_ms)

    def try_create(
        self,
        now_ms: int,
        *,
        privileged: bool,
        uses_topic_ids: bool,
        session: LeaderFetchSession,
    ) -> int:
        """Cache `session` under a new id and return the id; NO_SESSION_ID when there is no
        slot and no session may be evicted for it."""
        if len(self._sessions) >= self.max_slots and not self._try_evict(
            privileged, len(session), now_ms
        ):
            return NO_SESSION_ID
        session_id = self._new_id()
        while session_id <= NO_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        if session_id > SESSION_ID_MAX:
            raise ValueError(f"fetch session id {session_id} is not an int32")
        self._sessions[session_id] = CachedSession(
            session_id, privileged, uses_topic_ids, now_ms, now_ms, session
        )
        return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self._sessions:
            return False
        oldest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.session_id))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        candidates = [s for s in self._sessions.values() if self._evictable(s, privileged, now_ms)]
        if not candidates:
            return False
        weakest = min(candidates, key=CachedSession.evictable_key)
        # Kafka compares (privileged, size, 0) with the candidate's key: an equal
        # (privileged, size) loses to the candidate's positive id.
        if (privileged, size) <= (weakest.privileged, weakest.size):
            return False
        self._evict(weakest)
        return True

    def _evictable(self, session: CachedSession, privileged: bool, now_ms: int) -> bool:
        aged = now_ms - session.creation_ms > self.eviction_ms
        return aged or (privileged and not session.privileged)

    def _evict(self, session: CachedSession) -> None:
        del self._sessions[session.session_id]
        self.evictions += 1


@dataclass(frozen=True, slots=True)
class SessionRefusal:
    """A fetch refused as a whole by its session metadata: the error, no session id."""

    error: KafkaError


@dataclass(eq=False)
class FetchContext:
    """One fetch inside its session (or none): `request` is what to read, `answer` turns the
    read into what to send and the session id to send with it."""

    sent: FetchRequest
    request: FetchRequest
    _cache: FetchSessionCache
    _session: LeaderFetchSession | None
    _cached: CachedSession | None
    _privileged: bool
    _uses_topic_ids: bool

    def answer(self, response: FetchResponse, now_ms: int) -> tuple[int, FetchResponse]:
        """(session id, the answer) for `response`, the read of `request`."""
        session = self._session
        if session is None:
            return NO_SESSION_ID, response
        answered = session.answer(self.sent, response)
        if self._cached is not None:
            return self._cached.session_id, answered
        session_id = self._cache.try_create(
            now_ms,
            privileged=self._privileged,
            uses_topic_ids=self._uses_topic_ids,
            session=session,
        )
        return session_id, answered


def new_context(
    cache: FetchSessionCache,
    session_id: int,
    request: FetchRequest,
    now_ms: int,
    *,
    uses_topic_ids: bool,
    privileged: bool = False,
) -> FetchContext | SessionRefusal:
    """The context of `request` (its `session_epoch` is the wire's, `forgotten` the forgotten
    topics' partitions) sent with `session_id` (module Rules)."""
    epoch = request.session_epoch
    if epoch in (NO_SESSION, FULL_FETCH_EPOCH):
        if session_id != NO_SESSION_ID:
            cache.remove(session_id)
        if epoch == NO_SESSION:
            return FetchContext(request, request, cache, None, None, privileged, uses_topic_ids)
        session = LeaderFetchSession()
        full = session.full_request(request)
        return FetchContext(request, _unary(full), cache, session, None, privileged, uses_topic_ids)
    cached = cache.get(session_id)
    if cached is None:
        return SessionRefusal(
            FetchSessionIdNotFoundError(f"fetch session {session_id} is not in the cache")
        )
    if cached.uses_topic_ids != uses_topic_ids:
        opened, now = ("topic ids", "names") if cached.uses_topic_ids else ("names", "topic ids")
        return SessionRefusal(
            FetchSessionTopicIdError(
                f"fetch session {session_id} was opened with topic {opened}, this request "
                f"uses topic {now}"
            )
        )
    expected = cached.session.expected_epoch
    if epoch != expected:
        return SessionRefusal(
            InvalidFetchSessionEpochError(
                f"fetch session {session_id} expects epoch {expected}, got {epoch}"
            )
        )
    full = cached.session.full_request(request)
    cache.touch(cached, now_ms)
    return FetchContext(
        request, _unary(full), cache, cached.session, cached, privileged, uses_topic_ids
    )


def _unary(full: FetchRequest) -> FetchRequest:
    """The session's whole request as a sessionless read."""
    return replace(full, session_epoch=NO_SESSION, forgotten=())
