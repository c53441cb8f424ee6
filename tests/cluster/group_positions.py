"""What a consumer group's members were given of one topic, checked as Kafka's group semantics
allow (the soak's consumer group, tests/cluster/test_cluster_soak.py).

A *holding* is one session's hold of one partition: from the group giving it the partition
(or the session opening) to the group taking it back (revoked, lost) or the session closing.
The session's consumer reads it from one position on: the group's committed offset, or the
log start when there is none or it fell below the log start.

Rules:
- Within a holding, offsets follow one another; forward past records only to an offset
  DeleteRecords asked for (the consumer's reset once its position fell below the log start);
  never back.
- A holding starts where the group may have put its position: offset 0, an offset
  DeleteRecords asked for, or the offsets a commit of the partition covered, attempted before
  the holding's first record (a commit that timed out may have been applied). A commit covers
  only records its session was given, so by induction every record below a holding's start
  was given to some session: nothing was skipped.
- No holding starts below the last commit that succeeded before its first record: that would
  mean committed offsets were lost.
- Every offset given twice has one value.
- Two holdings of one partition may overlap in time. A member whose session expired while it
  could not reach its coordinator goes on fetching until it learns so, as Kafka's consumers
  do (its commits then fail): the group's next owner reads from the committed offset while the
  old one goes on from its own position. Such overlaps are counted, not failed; a single
  position per partition across members would take the old owner's next record for a jump.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Holding:
    start: int
    next: int


@dataclass(frozen=True)
class _Start:
    partition: int
    offset: int
    at_commit: bool  # an attempted commit covered its offset before it began
    who: str


@dataclass
class GroupPositions:
    """Fed under one lock by the members' threads: `take` for each record given, `attempt` and
    `committed` for commits, `release` when holdings end; `problems` at the end."""

    given: dict[int, dict[int, bytes]] = field(default_factory=dict)  # first value per offset
    handoffs: int = 0  # holdings started by another member than the partition's one before
    overlaps: int = 0  # records given while another session held the partition too
    redelivered: int = 0  # records given again
    rewinds: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    # partition -> (session, member, offset) of its successful commits
    commit_log: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._holdings: dict[int, dict[int, _Holding]] = {}  # partition -> session -> holding
        self._last_member: dict[int, int] = {}  # partition -> member of its latest holding
        self._attempted: dict[int, set[int]] = {}  # partition -> offsets commits covered
        self._committed: dict[int, int] = {}  # partition -> last successful commit's offset
        self._starts: list[_Start] = []
        self._moves: list[tuple[int, int, int, str]] = []  # partition, expected, given, who
        self._highest_next: dict[int, int] = {}

    def highest_next(self, partition: int) -> int:
        """The offset after the highest one given of `partition` (0: none); safe without the
        lock (one dict read)."""
        return self._highest_next.get(partition, 0)

    def take(self, session: int, member: int, partition: int, offset: int, value: bytes) -> bool:
        """One record given to `member` in `session`; True if it did not follow the session's
        record before (a problem unless DeleteRecords explains it: `problems`)."""
        offsets = self.given.setdefault(partition, {})
        self._highest_next[partition] = max(self._highest_next.get(partition, 0), offset + 1)
        if offset in offsets:
            self.redelivered += 1
        first = offsets.setdefault(offset, value)
        if first != value:
            self.changed.append(f"{partition}@{offset}: {first!r}, then {value!r}")
        holdings = self._holdings.setdefault(partition, {})
        if len(holdings) > (session in holdings):
            self.overlaps += 1
        who = f"session {session} of member {member}"
        holding = holdings.get(session)
        if holding is None:
            holdings[session] = _Holding(offset, offset + 1)
            if self._last_member.get(partition, member) != member:
                self.handoffs += 1
            self._last_member[partition] = member
            at_commit = offset in self._attempted.get(partition, ())
            self._starts.append(_Start(partition, offset, at_commit, who))
            committed = self._committed.get(partition, 0)
            if offset < committed:
                self.rewinds.append(
                    f"{partition}@{offset}: {who} started below the last successful commit, "
                    f"{committed}"
                )
            return not at_commit and offset != 0
        if offset == holding.next:
            holding.next += 1
            return False
        self._moves.append(
            (partition, holding.next, offset, f"{who}, its holding started at {holding.start}")
        )
        holding.next = max(holding.next, offset + 1)
        return True

    def session_next(self, session: int) -> dict[int, int]:
        """Partition -> the offset after `session`'s last record of it, for the partitions it
        holds (what a commit of that session covers)."""
        return {p: held[session].next for p, held in self._holdings.items() if session in held}

    def release(self, session: int, partitions: set[int] | None = None) -> None:
        """`session`'s holdings of `partitions` (all: None) end: revoked, lost or closed."""
        for partition, holdings in self._holdings.items():
            if partitions is None or partition in partitions:
                holdings.pop(session, None)

    def attempt(self, covered: dict[int, int]) -> None:
        """A commit of these offsets is being sent: whatever its answer, it may apply."""
        for partition, offset in covered.items():
            self._attempted.setdefault(partition, set()).add(offset)

    def committed(self, session: int, member: int, covered: dict[int, int]) -> None:
        """The commit of `covered` succeeded."""
        self._committed.update(covered)
        for partition, offset in covered.items():
            self.commit_log.setdefault(partition, []).append((session, member, offset))

    def problems(self, deleted_before: dict[int, list[int]]) -> list[str]:
        """Moves past records or back within a holding, holdings started where neither a
        commit nor DeleteRecords put a position, starts below a successful commit, offsets
        given with two values."""
        found = []
        for partition, expected, offset, who in self._moves:
            if offset < expected:
                found.append(f"went back: {partition}@{offset} after {expected - 1}, {who}")
            elif offset not in deleted_before.get(partition, ()):
                found.append(f"skipped records: {partition}@{offset} after {expected - 1}, {who}")
        for start in self._starts:
            if (
                not start.at_commit
                and start.offset != 0
                and start.offset not in deleted_before.get(start.partition, ())
            ):
                found.append(
                    f"started past records: {start.partition}@{start.offset}, {start.who}, "
                    f"where no commit was sent; the partition's last commits (session, member, "
                    f"offset): {self.commit_log.get(start.partition, [])[-3:]}"
                )
        found += [f"below a commit: {r}" for r in self.rewinds]
        found += [f"two values: {c}" for c in self.changed]
        return found

    def summary(self) -> str:
        return (
            f"{sum(len(g) for g in self.given.values())} offsets given, {self.redelivered} "
            f"again, in {len(self._starts)} holdings, {self.handoffs} handoffs between "
            f"members, {self.overlaps} records given while two sessions held a partition"
        )
