"""Who else commits a group's partitions from outside its membership: the warning.

Two consumers with one `group.id` that do not join the group (`assign()`, or a client that
subscribes without the group protocol) may both read a partition, and both commit it. The
coordinator tells them: per group and partition it remembers the last committer (client.id,
a random id per consumer instance, host), and a commit from another instance for a partition
the first committed within `SHARED_COMMIT_WINDOW_MS` is a shared commit. Commits of members
(with a generation) are not compared: the group splits their partitions.

Rules:
- Commits that name no instance are never compared (nothing tells their senders apart).
- A committer silent for longer than the window is forgotten (a consumer that stopped and was
  replaced), Kafka's default session.timeout.ms: a restarted consumer is a new instance.
- `record` returns every shared commit (the committer is told each time) and, separately,
  those of instance pairs not reported before in this group: the coordinator logs each pair
  once. A group whose committers are all forgotten forgets its reported pairs too.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.common import TopicPartitionKey
from replog.coordinator.messages import Committer, SharedCommit

# Kafka's session.timeout.ms default: how long a consumer that stopped committing is still
# taken to be reading.
SHARED_COMMIT_WINDOW_MS = 45_000


class SharedCommits:
    """The last committer of each group's partitions (module docstring); no I/O."""

    def __init__(self, window_ms: int = SHARED_COMMIT_WINDOW_MS) -> None:
        self.window_ms = window_ms
        self._last: dict[str, dict[TopicPartitionKey, tuple[Committer, int]]] = {}
        self._reported: dict[str, set[frozenset[str]]] = {}

    def record(
        self,
        group_id: str,
        committer: Committer,
        partitions: Iterable[TopicPartitionKey],
        now_ms: int,
    ) -> tuple[tuple[SharedCommit, ...], tuple[SharedCommit, ...]]:
        """Note `committer`'s commit of `partitions` at `now_ms`: (every other instance that
        committed some of them within the window, those of them not reported before)."""
        if not committer.instance_id:
            return (), ()
        last = self._last.setdefault(group_id, {})
        for key in [k for k, (_, at) in last.items() if now_ms - at > self.window_ms]:
            del last[key]
        if not last:
            self._reported.pop(group_id, None)
        others: dict[str, tuple[Committer, list[TopicPartitionKey], int]] = {}
        for tp in partitions:
            seen = last.get(tp)
            if seen is not None and seen[0].instance_id != committer.instance_id:
                other, at = seen
                _, tps, latest = others.setdefault(other.instance_id, (other, [], at))
                tps.append(tp)
                others[other.instance_id] = (other, tps, max(latest, at))
            last[tp] = (committer, now_ms)
        found = tuple(
            SharedCommit(other, tuple(sorted(tps)), now_ms - at)
            for other, tps, at in sorted(others.values(), key=lambda o: o[0].instance_id)
        )
        reported = self._reported.setdefault(group_id, set())
        new = []
        for shared in found:
            pair = frozenset((committer.instance_id, shared.other.instance_id))
            if pair not in reported:
                reported.add(pair)
                new.append(shared)
        return found, tuple(new)
