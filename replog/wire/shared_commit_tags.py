"""Replog's tagged fields on Kafka's OffsetCommit: who commits, and who else commits the same
partitions of the group (`replog/coordinator/shared_commits.py`).

A commit from outside a group's membership (`assign()` consumers of one group.id) names its
committer's instance in `COMMITTER_TAG` of the request; a replog coordinator answers the
other instances that committed some of the same partitions within its window in
`SHARED_COMMITS_TAG` of the response. Both are top-level tagged fields of OffsetCommit v8+
(flexible versions): Kafka's brokers and clients skip tags they do not know, so a replog client
talks to Apache Kafka, and a Kafka client to replog, unchanged.

Rules:
- The committer tag is the instance id in UTF-8; none is sent for a committer without one.
- The shared-commits tag is JSON (a commit is no hot path): a list of
  {"client_id", "instance_id", "host", "partitions": [[topic, partition], ...], "age_ms"}.
- A tag whose bytes do not decode is a MalformedResponseError (client) or InvalidRequestError
  (broker) naming it, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from replog.coordinator import messages as cm
from replog.errors import InvalidRequestError, MalformedResponseError

# Far above Kafka's own tags (which count up from 0 per message).
COMMITTER_TAG = 27_001
SHARED_COMMITS_TAG = 27_002

Tags = tuple[tuple[int, bytes], ...]


def committer_tags(committer: cm.Committer) -> Tags:
    """The request's tagged fields naming `committer` (none without an instance id)."""
    if not committer.instance_id:
        return ()
    return ((COMMITTER_TAG, committer.instance_id.encode()),)


def committer_from_tags(
    tags: Sequence[tuple[int, bytes]], client_id: str, host: str
) -> cm.Committer:
    """The committer a request names: its client id (the request header's), the instance its
    tag names ("" without one) and the host the commit came from."""
    for tag, data in tags:
        if tag == COMMITTER_TAG:
            try:
                instance_id = bytes(data).decode()
            except UnicodeDecodeError:
                raise InvalidRequestError(
                    f"OffsetCommit's committer tag ({COMMITTER_TAG}) is not UTF-8: {bytes(data)!r}"
                ) from None
            return cm.Committer(client_id, instance_id, host)
    return cm.Committer(client_id, "", host)


def shared_tags(shared: Sequence[cm.SharedCommit]) -> Tags:
    """The response's tagged fields naming the other committers (none when there are none)."""
    if not shared:
        return ()
    entries = [
        {
            "client_id": s.other.client_id,
            "instance_id": s.other.instance_id,
            "host": s.other.host,
            "partitions": [[topic, partition] for topic, partition in s.partitions],
            "age_ms": s.last_commit_age_ms,
        }
        for s in shared
    ]
    return ((SHARED_COMMITS_TAG, json.dumps(entries, separators=(",", ":")).encode()),)


def shared_from_tags(
    tags: Sequence[tuple[int, bytes]], address: str
) -> tuple[cm.SharedCommit, ...]:
    """The other committers a response from the broker at `address` names (none without the
    tag)."""
    for tag, data in tags:
        if tag != SHARED_COMMITS_TAG:
            continue
        try:
            entries = json.loads(bytes(data))
            return tuple(
                cm.SharedCommit(
                    cm.Committer(str(e["client_id"]), str(e["instance_id"]), str(e["host"])),
                    tuple((str(topic), int(partition)) for topic, partition in e["partitions"]),
                    int(e["age_ms"]),
                )
                for e in entries
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise MalformedResponseError(
                f"the broker at {address} answered OffsetCommit with a shared-commits tag "
                f"({SHARED_COMMITS_TAG}) that does not decode: {exc}"
            ) from None
    return ()
