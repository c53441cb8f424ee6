"""What the driver asks the cluster while planning: which partitions are read, and their bounds.

`ClusterView` wraps one blocking `Admin`, opened on first use (the objects holding a view are
pickled by Spark, so `__getstate__` drops the client; the copy opens its own when needed).
A batch query's planning takes its Admin from the planning worker's kept sessions
(`fetch_sessions`; PySpark reuses that worker for the next planning) and gives it back once
planned: opening one costs a planning about 6 ms of CPU and its first connections. A kept
Admin's leaders may be stale after a leader change: the old leader refuses its ListOffsets
(the leader epoch goes along) and it asks the new one after `retry.backoff.ms`, as any client.
- `partitions(subscription)`: the partitions a subscription reads now, sorted, from one
  metadata request (every non-internal topic and its partitions). `subscribe` and
  `assign` name topics that must exist in a batch query (an error names the missing topic or
  partition); a streaming query may subscribe before the topic exists (Spark's Kafka source
  does the same: the topic's partitions are picked up once it is created).
  `subscribePattern` matches every non-internal topic.
- `bounds(partitions)`: each partition's [log start offset, latest) now.
- `offsets_for_times(times)`: the first offset at or after each time in ms (None: none).

Rules: "latest" is the last stable offset with read_committed (the source's default;
ListOffsets LATEST at isolation level 1) and the high watermark with read_uncommitted, so
nothing planned is above what every in-sync replica holds, nor, read_committed, inside a
transaction not yet ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replog.client.admin_results import OffsetSpec
from replog.client.records import TopicPartition
from replog.client.sync_admin import Admin
from replog.common import TopicPartitionKey
from replog.spark.errors import SourceOptionError
from replog.spark.fetch_sessions import SessionPool, settings_key
from replog.spark.options import Assign, Subscribe, Subscription
from replog.spark.planning import Bounds


class _KeptAdmin:
    """An Admin as a kept session (`fetch_sessions`)."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.admin = Admin(config=settings)
        self.usable = True

    def close(self) -> None:
        self.usable = False
        self.admin.close()


class ClusterView:
    def __init__(
        self,
        settings: Mapping[str, str],
        *,
        strict: bool,
        sessions: SessionPool | None = None,
        isolation_level: str = "read_committed",
    ) -> None:
        self._settings = dict(settings)
        self._isolation_level = isolation_level  # what "latest" is (module docstring)
        self._strict = strict  # batch: subscribed topics and partitions must exist
        self._sessions = sessions  # where the Admin comes from and goes back to (None: its own)
        self._key = ("admin", settings_key(settings))
        self._admin: _KeptAdmin | None = None

    def __getstate__(self) -> dict[str, object]:
        return {
            "_settings": self._settings,
            "_strict": self._strict,
            "_isolation_level": self._isolation_level,
            "_key": self._key,
            "_sessions": None,
            "_admin": None,
        }

    def _client(self) -> Admin:
        if self._admin is None:
            settings, sessions = self._settings, self._sessions
            if sessions is None:
                self._admin = _KeptAdmin(settings)
            else:
                self._admin = sessions.take(self._key, lambda: _KeptAdmin(settings))
        return self._admin.admin

    def close(self, keep: bool = False) -> None:
        """Done: with `keep` (planned without an error) the Admin goes back to the sessions it
        came from; else it is closed."""
        if self._admin is not None:
            admin, self._admin = self._admin, None
            if keep and self._sessions is not None:
                self._sessions.give_back(self._key, admin)
            else:
                admin.close()

    def partitions(self, subscription: Subscription) -> list[TopicPartitionKey]:
        admin = self._client()
        # Every topic with its partitions: what list_topics asks for anyway, in one request.
        described = admin.describe_topics()
        existing = set(described)
        if isinstance(subscription, Subscribe):
            missing = [t for t in subscription.topics if t not in existing]
            if missing and self._strict:
                raise SourceOptionError(
                    f"option 'subscribe': topic {missing[0]!r} does not exist"
                    + (f" (nor {', '.join(repr(t) for t in missing[1:])})" if missing[1:] else "")
                )
            topics = [t for t in subscription.topics if t in existing]
        elif isinstance(subscription, Assign):
            topics = sorted({t for t, _ in subscription.partitions})
            missing = [t for t in topics if t not in existing]
            if missing and self._strict:
                raise SourceOptionError(f"option 'assign': topic {missing[0]!r} does not exist")
            topics = [t for t in topics if t in existing]
        else:
            topics = sorted(t for t in existing if subscription.matches(t))
        if not topics:
            return []
        counts = {name: len(described[name].partitions) for name in topics}
        if isinstance(subscription, Assign):
            chosen = []
            for topic, partition in subscription.partitions:
                if topic not in counts:
                    continue
                if partition >= counts[topic]:
                    if self._strict:
                        raise SourceOptionError(
                            f"option 'assign': partition {topic}-{partition} does not exist "
                            f"(topic {topic!r} has {counts[topic]} partitions)"
                        )
                    continue
                chosen.append((topic, partition))
            return sorted(chosen)
        return sorted((t, p) for t in topics if t in counts for p in range(counts[t]))

    def bounds(self, partitions: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, Bounds]:
        if not partitions:
            return {}
        admin = self._client()
        tps = [TopicPartition(t, p) for t, p in partitions]
        earliest = admin.list_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        latest = admin.list_offsets(
            {tp: OffsetSpec.LATEST for tp in tps}, isolation_level=self._isolation_level
        )
        found: dict[TopicPartitionKey, Bounds] = {}
        for tp in tps:
            low, high = earliest.get(tp), latest.get(tp)
            high_offset = 0 if high is None else high.offset
            low_offset = high_offset if low is None else low.offset
            found[(tp.topic, tp.partition)] = Bounds(low_offset, high_offset)
        return found

    def offsets_for_times(
        self, times: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int | None]:
        if not times:
            return {}
        answers = self._client().list_offsets(
            {TopicPartition(t, p): at for (t, p), at in times.items()}
        )
        result: dict[TopicPartitionKey, int | None] = {}
        for t, p in times:
            answer = answers.get(TopicPartition(t, p))
            result[(t, p)] = None if answer is None else answer.offset
        return result
