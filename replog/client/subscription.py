"""What a consumer reads: its assignment or subscription and, per partition, its position.

The consumer's bookkeeping, shared by the fetcher (which reads from positions and moves them
as `poll` hands records out) and the consumer facade (assign, seek, pause, commit).

Rules (Kafka's `SubscriptionState`):
- A consumer either assigns partitions by hand (`assign`) or subscribes to topics
  (`subscribe`; the partitions then follow the topics' metadata); mixing the two is an
  `IllegalStateError`. `unsubscribe` ends either. Subscribing to no topics is unsubscribing.
- A pattern subscription (`subscribe_pattern`, Kafka's `subscribe(Pattern)`) subscribes to the
  topics whose whole name the pattern matches (`re.fullmatch`, as Java's `Matcher.matches`),
  internal topics excepted, among those `match` is given (the metadata's topic list, each time
  it changes); until then it reads nothing. A pattern the coordinator matches (KIP-848's
  regex, `internal=True`) takes internal topics too, as the coordinator does.
- A partition's `position` is the offset of the next record `poll` will return, so it only
  moves when records are handed to the user (or a seek / reset sets it): committing positions
  commits exactly what `poll` returned. None means "not known yet": the consumer asks the
  group's committed offset or applies `auto.offset.reset`.
- A pending reset (`seek_to_beginning`, `seek_to_end`, an OFFSET_OUT_OF_RANGE answer) is a
  strategy, not an offset: the offset is looked up (ListOffsets) before the next fetch. A seek
  cancels a pending reset.
- A paused partition keeps its position and is not fetched; its buffered records are kept
  until it is resumed.
- Partitions that stay assigned across `assign` / a subscription change keep their state. One
  that leaves loses it (Kafka drops a revoked partition's position); assigned again, it starts
  with a new `AssignedPartition`, so an answer asked for the earlier one (a committed offset
  fetched while it moved) is not applied to it (`awaits_position`).
- Partitions are fetched in this state's order; one whose fetch brought records or an error
  moves to the back (`move_to_end`, Kafka's `movePartitionToEnd`), so that when a broker
  spends a fetch's `fetch.max.bytes` on the partitions asked first, the others come first
  next time instead of waiting until those run dry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.errors import IllegalStateError, InvalidRegularExpressionError
from replog.record.varint import INT64_MAX
from replog.topic_names import is_internal_topic

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
RESET_STRATEGIES = (EARLIEST, LATEST, NONE)


class Mode(Enum):
    NONE = "none"
    ASSIGNED = "assigned"
    SUBSCRIBED = "subscribed"


@dataclass(slots=True)
class AssignedPartition:
    """One assigned partition's reading state."""

    position: int | None = None
    reset: str | None = None  # EARLIEST / LATEST pending, None: none pending
    paused: bool = False
    last_epoch: int = -1  # leader epoch of the last record returned (committed with the offset)
    high_watermark: int = -1  # as of the last fetch answer (-1: not known)
    log_start_offset: int = -1

    @property
    def fetchable(self) -> bool:
        return self.position is not None and self.reset is None and not self.paused


class SubscriptionState:
    def __init__(self) -> None:
        self.mode = Mode.NONE
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._pattern_internal = False
        self._partitions: dict[TopicPartition, AssignedPartition] = {}

    # --- assignment ---------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.mode is Mode.SUBSCRIBED:
            raise IllegalStateError(
                "assign() after subscribe(): a consumer either subscribes to topics or is "
                "assigned partitions; call unsubscribe() first"
            )
        given = list(partitions)
        for tp in given:
            _check_partition(tp)
        wanted = list(dict.fromkeys(TopicPartition(tp[0], tp[1]) for tp in given))
        self._replace_partitions(wanted)
        self.mode = Mode.ASSIGNED if wanted else Mode.NONE

    def subscribe(self, topics: Iterable[str]) -> None:
        if self.mode is Mode.ASSIGNED:
            raise IllegalStateError(
                "subscribe() after assign(): a consumer either subscribes to topics or is "
                "assigned partitions; call unsubscribe() first"
            )
        names = frozenset(topics)
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"subscribe(): topic names must be non-empty strings, got {name!r}")
        if not names:
            self.unsubscribe()
            return
        self._pattern = None
        self._set_topics(names)

    def subscribe_pattern(self, pattern: re.Pattern[str], *, internal: bool = False) -> None:
        """Subscribe to the topics `pattern` matches (module docstring; `internal`: internal
        topics too): those already subscribed to that it matches stay, the others wait for
        `match`."""
        if self.mode is Mode.ASSIGNED:
            raise IllegalStateError(
                "subscribe(pattern=...) after assign(): a consumer either subscribes or is "
                "assigned partitions; call unsubscribe() first"
            )
        self._pattern = pattern
        self._pattern_internal = internal
        self._set_topics(frozenset(t for t in self._topics if pattern.fullmatch(t)))

    def match(self, topics: Iterable[str]) -> bool:
        """With a pattern subscription, subscribe to the topics of `topics` it matches (the
        cluster's, internal ones excepted unless the pattern takes them); whether the subscribed
        topics changed."""
        pattern = self._pattern
        if pattern is None or self.mode is not Mode.SUBSCRIBED:
            return False
        internal = self._pattern_internal
        matched = frozenset(
            t for t in topics if (internal or not is_internal_topic(t)) and pattern.fullmatch(t)
        )
        if matched == self._topics:
            return False
        self._set_topics(matched)
        return True

    def _set_topics(self, names: frozenset[str]) -> None:
        self._topics = names
        self.mode = Mode.SUBSCRIBED
        self._replace_partitions([tp for tp in self._partitions if tp.topic in names])

    def unsubscribe(self) -> None:
        self.mode = Mode.NONE
        self._topics = frozenset()
        self._pattern = None
        self._partitions = {}

    def set_subscribed_partitions(self, partitions: Iterable[TopicPartition]) -> bool:
        """The partitions of the subscribed topics, from metadata; True if they changed."""
        if self.mode is not Mode.SUBSCRIBED:
            return False
        wanted = sorted(tp for tp in set(partitions) if tp.topic in self._topics)
        if set(wanted) == set(self._partitions):
            return False
        self._replace_partitions(wanted)
        return True

    def _replace_partitions(self, wanted: list[TopicPartition]) -> None:
        old = self._partitions
        self._partitions = {tp: old.get(tp) or AssignedPartition() for tp in wanted}

    @property
    def subscription(self) -> frozenset[str]:
        return self._topics

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The pattern subscribed to, or None (topics by name, or not subscribed)."""
        return self._pattern

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions)

    def topics(self) -> frozenset[str]:
        """Every topic the consumer needs metadata for."""
        if self.mode is Mode.SUBSCRIBED:
            return self._topics
        return frozenset(tp.topic for tp in self._partitions)

    def get(self, tp: TopicPartition) -> AssignedPartition | None:
        return self._partitions.get(tp)

    def state(self, tp: TopicPartition, operation: str) -> AssignedPartition:
        found = self._partitions.get(tp)
        if found is None:
            raise IllegalStateError(
                f"{operation}: partition {tp.topic}-{tp.partition} is not assigned to this "
                f"consumer (assigned: {_names(self._partitions)})"
            )
        return found

    def items(self) -> Iterator[tuple[TopicPartition, AssignedPartition]]:
        return iter(list(self._partitions.items()))

    def move_to_end(self, tp: TopicPartition) -> None:
        """Fetch `tp` after every other partition from now on (module Rules)."""
        state = self._partitions.pop(tp, None)
        if state is not None:
            self._partitions[tp] = state

    # --- positions ----------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= INT64_MAX:
            raise ValueError(
                f"seek(): offset for {tp.topic}-{tp.partition} must be an int in [0, "
                f"{INT64_MAX}], got {offset!r}"
            )
        state = self.state(tp, "seek")
        state.position = offset
        state.reset = None

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        assert strategy in (EARLIEST, LATEST), strategy
        state = self.state(tp, f"seek to {strategy}")
        state.reset = strategy

    def pause(self, tp: TopicPartition) -> None:
        self.state(tp, "pause").paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp, "resume").paused = False

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, state in self._partitions.items() if state.paused)

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a pending reset: committed offset or policy."""
        return [tp for tp, s in self._partitions.items() if s.position is None and s.reset is None]

    def awaits_position(self, tp: TopicPartition, state: AssignedPartition) -> bool:
        """Whether `state`, read before an await, is still `tp`'s (not revoked, nor revoked and
        assigned again since) and still has neither a position nor a pending reset."""
        return self._partitions.get(tp) is state and state.position is None and state.reset is None

    def pending_resets(self) -> dict[TopicPartition, str]:
        return {tp: s.reset for tp, s in self._partitions.items() if s.reset is not None}

    def has_all_positions(self) -> bool:
        return all(s.position is not None and s.reset is None for s in self._partitions.values())

    def consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What to commit: every known position (the next offset to read) and its epoch."""
        return {
            tp: OffsetAndMetadata(s.position, "", s.last_epoch)
            for tp, s in self._partitions.items()
            if s.position is not None
        }


def topic_pattern(pattern: object, *, sent: bool) -> re.Pattern[str]:
    """`subscribe(pattern=...)`'s pattern, compiled: a str or a compiled str pattern. `sent`:
    the coordinator matches the pattern's text itself (the consumer protocol), so flags given
    to `re.compile` would be lost: they must be written inline, as ``(?i)``."""
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise InvalidRegularExpressionError(
                f"subscribe(): pattern {pattern!r} does not compile: {error}"
            ) from None
    elif isinstance(pattern, re.Pattern) and isinstance(pattern.pattern, str):
        compiled = pattern
    else:
        raise TypeError(
            "subscribe(): pattern must be a str or a compiled str pattern, not "
            f"{type(pattern).__name__} ({pattern!r})"
        )
    if sent and re.compile(compiled.pattern).flags != compiled.flags:
        raise ValueError(
            f"subscribe(): pattern {compiled.pattern!r} has flags the coordinator would not "
            f"see ({re.RegexFlag(compiled.flags)!r}): with group.protocol=consumer it matches "
            "the pattern's text, so write them inline, as (?i)"
        )
    return compiled


def _check_partition(tp: object) -> None:
    if (
        not isinstance(tp, tuple)
        or len(tp) != 2
        or not isinstance(tp[0], str)
        or not tp[0]
        or not isinstance(tp[1], int)
        or tp[1] < 0
    ):
        raise TypeError(f"assign(): expected TopicPartition(topic, partition >= 0), got {tp!r}")


def _names(partitions: Iterable[TopicPartition]) -> str:
    names = [f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)]
    return ", ".join(names) if names else "none"
