"""Records made when read (`deferred_records`): the same records, in the same order, as the
registrations would have made when the state was taken."""

from __future__ import annotations

import uuid

from replog.quorum.metadata.deferred_records import DeferredRecords, PartitionRecordOf
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import TopicRecord


def test_deferred_records_read_as_the_records_they_stand_for() -> None:
    topic_id = uuid.uuid4()
    topic = TopicRecord(name="t", topic_id=topic_id)
    registrations = [
        PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=i)
        for i in range(5)
    ]
    made = [topic] + [r.to_record(topic_id, i) for i, r in enumerate(registrations)]
    deferred = DeferredRecords(
        [topic], (PartitionRecordOf(topic_id, i, r) for i, r in enumerate(registrations))
    )
    assert len(deferred) == 6
    assert list(deferred) == made
    assert deferred[0] == topic and deferred[3] == made[3] and deferred[-1] == made[-1]
    assert deferred[1:4] == made[1:4] and deferred[4:100] == made[4:]
    assert deferred.items()[0] is topic
