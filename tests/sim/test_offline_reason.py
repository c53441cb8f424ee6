"""`replog.sim.offline_reason.offline_reasons`: a leaderless partition counts as offline by
KIP-966 only when the committed metadata log shows every replica of its last-known ELR put
there by a registration after an unclean shutdown; anything else is named."""

from __future__ import annotations

import uuid

from replog.quorum.metadata.record_codec import encode_record
from replog.quorum.metadata.records import (
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.record import build_batch
from replog.sim.offline_reason import KIP966, offline_reasons

TOPIC_ID = uuid.UUID(int=7)
DATA = ("data", 0)
FIRST = uuid.UUID(int=21)  # broker 2's incarnation registering after its unclean shutdown
SECOND = uuid.UUID(int=31)  # broker 3's


def _log(*batches: tuple[MetadataRecord, ...]) -> bytes:
    log, offset = b"", 0
    for records in batches:
        values = [(0, None, encode_record(record), ()) for record in records]
        log += build_batch(values, producer_id=-1, base_offset=offset)
        offset += len(records)
    return log


def _change(**fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(TOPIC_ID, 0, **fields)  # type: ignore[arg-type]


# ISR [1, 2, 3] with min ISR 2 shrinks to nothing as 1, 2 and 3 are fenced; 2 and 3 leave the
# ELR as each registers again after an unclean shutdown.
CREATED = (
    TopicRecord("data", TOPIC_ID),
    PartitionRecord(TOPIC_ID, 0, (1, 2, 3), (1, 2, 3), leader=1),
)
EMPTIED = (
    _change(isr=(2, 3), leader=2),
    _change(isr=(3,), leader=3, elr=(2,)),
    _change(isr=(), leader=-1, elr=(2, 3)),
)
TWO_BACK = (_change(elr=(3,), last_known_elr=(2,)), RegisterBrokerRecord(2, FIRST, 10))
THREE_BACK = (_change(elr=(), last_known_elr=(2, 3)), RegisterBrokerRecord(3, SECOND, 12))


def test_every_last_known_member_back_from_an_unclean_shutdown_is_kip966() -> None:
    log = _log(CREATED, EMPTIED, TWO_BACK, THREE_BACK)
    assert offline_reasons(log, [DATA], {FIRST, SECOND}) == {DATA: KIP966}


def test_a_member_registered_after_a_clean_shutdown_is_named() -> None:
    reason = offline_reasons(_log(CREATED, EMPTIED, TWO_BACK, THREE_BACK), [DATA], {FIRST})[DATA]
    assert "broker 3" in reason and "clean shutdown" in reason, reason


def test_a_member_never_registered_after_entering_the_last_known_elr_is_named() -> None:
    log = _log(CREATED, EMPTIED, TWO_BACK, THREE_BACK[:1])
    reason = offline_reasons(log, [DATA], {FIRST, SECOND})[DATA]
    assert "broker 3" in reason and "no registration" in reason, reason


def test_an_elr_member_left_or_a_leader_is_not_kip966() -> None:
    with_elr = offline_reasons(_log(CREATED, EMPTIED, TWO_BACK), [DATA], {FIRST})[DATA]
    assert "clean election may lead it" in with_elr, with_elr
    led = offline_reasons(_log(CREATED), [DATA], set())[DATA]
    assert led == "led by 1 in the committed state"


def test_emptied_without_a_last_known_elr_or_absent_is_not_kip966() -> None:
    emptied = (_change(isr=(), leader=-1),)
    reason = offline_reasons(_log(CREATED, emptied), [DATA], set())[DATA]
    assert "no unclean shutdown" in reason, reason
    absent = offline_reasons(_log(CREATED), [("data", 1), ("other", 0)], set())
    assert set(absent.values()) == {"absent from the committed state"}
