"""Replog's tagged field on Kafka's MetadataResponse (v9 and up): how current the answering
node's metadata is, for `replog topics describe`.

Kafka's Metadata cannot say that the metadata quorum is lost: a node then answers with its last
committed metadata, whose leaders and ISRs nothing has updated since. A replog node that is a
controller adds this tagged field to its answer; Kafka's clients skip a tag they do not know
(KIP-482), so the answer stays Kafka's.

Rules:
- Tag `STALENESS_TAG` (far above the small tags Kafka gives its own fields). Its value:
  stale (int8, 0 or 1), whether the node knows a quorum leader (int8), metadata age in ms
  (int64), the wall-clock time the node last heard from the quorum's leader (int64, -1: never
  since it started), the answering node's id (int32), then the ids of the brokers it has not
  heard from (int32 count, int32 each).
- A value that does not decode is ignored, as an unknown tag would be.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STALENESS_TAG = 10_000
_HEAD = struct.Struct(">bbqqii")
_ID = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class MetadataStaleness:
    stale: bool
    leader_known: bool  # the node knows the quorum's leader, the active controller
    age_ms: int
    quorum_contact_time_ms: int | None  # wall clock; None: never since the node started
    node_id: int
    unreachable_brokers: frozenset[int]


def encode(staleness: MetadataStaleness) -> tuple[int, bytes]:
    """The (tag, value) to add to a MetadataResponse's `unknown_tagged_fields`."""
    contact = -1 if staleness.quorum_contact_time_ms is None else staleness.quorum_contact_time_ms
    ids = sorted(staleness.unreachable_brokers)
    head = _HEAD.pack(
        int(staleness.stale),
        int(staleness.leader_known),
        staleness.age_ms,
        contact,
        staleness.node_id,
        len(ids),
    )
    return STALENESS_TAG, head + b"".join(_ID.pack(i) for i in ids)


def decode(tagged: Iterable[tuple[int, bytes]]) -> MetadataStaleness | None:
    """The staleness a response's `unknown_tagged_fields` carry, or None."""
    for tag, value in tagged:
        if tag != STALENESS_TAG:
            continue
        try:
            stale, leader_known, age_ms, contact, node_id, count = _HEAD.unpack_from(value)
            ids: Sequence[int] = [
                _ID.unpack_from(value, _HEAD.size + 4 * i)[0] for i in range(count)
            ]
        except struct.error:
            return None
        if len(value) != _HEAD.size + 4 * count:
            return None
        return MetadataStaleness(
            bool(stale),
            bool(leader_known),
            age_ms,
            None if contact < 0 else contact,
            node_id,
            frozenset(ids),
        )
    return None
