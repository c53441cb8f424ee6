"""The Kafka listener's handlers (`kafka_apis`) on metadata images built from records:

- ApiVersions advertises exactly the handler table; v3+ with a bad client software name is
  INVALID_REQUEST with no APIs, as Kafka answers; v3+ carries the supported features and the
  image's finalized ones at its last offset;
- Fetch keeps KIP-227 sessions (a full fetch opens one, incremental fetches are answered with
  only the partitions with news, forgotten partitions are no longer read, an epoch out of turn
  or an unknown id is refused, epoch -1 closes), names topics by id from v13 (an unknown id is
  UNKNOWN_TOPIC_ID, answered at once; a session is not switched between names and ids), and a
  fetch from a replica is refused (followers use the gRPC listener);
- a leader hint or diverging epoch is written only into the versions that have the field;
- ListOffsets is answered at once (no awaitable) through the Broker service's core: its
  refusals name the broker, a storage error is reported and refuses the request, another
  error from the replica manager is every partition's;
- Metadata advertises each broker at its endpoint of the listener the client connected through,
  leaves out brokers without one (their partitions: leader -1, LISTENER_NOT_FOUND from v6,
  LEADER_NOT_AVAILABLE before), leaves out fenced brokers, answers UNKNOWN_TOPIC_OR_PARTITION
  for an absent name and UNKNOWN_TOPIC_ID for an absent id, reads topics named by id, and takes
  Kafka's "every topic" forms (v0 empty list, v1+ null); on a controller, v9+ answers carry
  replog's staleness tag (whether the quorum is lost, since when, brokers not heard from,
  whether a quorum leader is known), which still encodes and decodes as Kafka's message.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

import pytest

from replog.errors import (
    IllegalStateError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    RequestRefusedError,
)
from replog.kafka import staleness_tag
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import fetch_response as kf
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from replog.kafka.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from replog.kafka.messages.list_offsets_response import (
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.messages.produce_response import ProduceResponse, TopicProduceResponse
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.protocol.codec import ZERO_UUID
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint, RegisterBrokerRecord
from replog.replication import messages as m
from replog.replication.fetch_session_cache import FetchSessionCache
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import (
    SERVED,
    KafkaApis,
    _fetched,
    _list_offsets_partition,
    _produce_partition,
    fetch_session_cache,
)
from replog.server.raft.metadata_staleness import Staleness
from tests.metadata.metadata_helpers import bootstrapped, create_topic, replayed, topic_id


def broker(broker_id: int, *endpoints: Endpoint, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id, uuid.UUID(int=broker_id), 10, endpoints=endpoints, fenced=fenced
    )


def grpc_and_kafka(broker_id: int) -> tuple[Endpoint, Endpoint]:
    return (
        Endpoint("CONTROLLER", f"b{broker_id}", 19090 + broker_id),
        Endpoint("PLAINTEXT", f"b{broker_id}", 9090 + broker_id),
    )


def image() -> MetadataImage:
    return replayed(
        bootstrapped(),
        broker(1, *grpc_and_kafka(1)),
        broker(2, *grpc_and_kafka(2)),
        broker(3, grpc_and_kafka(3)[0]),  # no Kafka listener
        broker(4, *grpc_and_kafka(4), fenced=True),
        *create_topic("orders", topic_id(1), (1, 2), (2, 1)),
        *create_topic("old", topic_id(2), (3, 1), leader_epoch=4),
    )


def apis(controller: int = -1) -> KafkaApis:
    current = image()
    return KafkaApis(2, cluster_id="c1", image=lambda: current, controller_id=lambda: controller)


def metadata(request: MetadataRequest, version: int = 12) -> MetadataResponse:
    return apis().metadata(request, version, "PLAINTEXT")


def named(*names: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequestTopic(name=n) for n in names])


def test_api_versions_advertises_exactly_the_handler_table() -> None:
    answer = apis().api_versions(ApiVersionsRequest(), 2)
    assert answer.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == sorted(
        (key, low, high) for key, (low, high) in SERVED.items()
    )
    assert SERVED == {
        0: (3, 12),
        1: (4, 18),
        2: (1, 11),
        3: (0, 13),
        18: (0, 4),
        22: (0, 5),
        23: (2, 4),
        75: (0, 0),
    }


@pytest.mark.parametrize(
    ("name", "version", "code"),
    [
        ("librdkafka", "2.16.0", 0),
        ("apache-kafka-java", "4.0.0", 0),
        ("", "1.0", 42),
        ("bad name", "1.0", 42),
        ("ok", "-1.0", 42),
    ],
)
def test_api_versions_v3_checks_the_client_software_name(
    name: str, version: str, code: int
) -> None:
    request = ApiVersionsRequest(client_software_name=name, client_software_version=version)
    answer = apis().api_versions(request, 3)
    assert answer.error_code == code
    assert bool(answer.api_keys) == (code == 0)
    assert apis().api_versions(request, 2).error_code == 0  # not checked before v3


def test_api_versions_v3_carries_the_supported_and_finalized_features() -> None:
    current = image()
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    answer = apis().api_versions(request, 3)
    assert [(f.name, f.min_version, f.max_version) for f in answer.supported_features] == [
        ("metadata.version", 1, 12),
        ("transaction.version", 0, 2),
        ("eligible.leader.replicas.version", 0, 1),
    ]
    assert [
        (f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features
    ] == [("metadata.version", 7, 7)]
    assert answer.finalized_features_epoch == current.provenance.last_offset > 0
    assert answer.api_keys == apis().api_versions(ApiVersionsRequest(), 2).api_keys
    # Before v3 the fields do not exist; an image with nothing finalized has no epoch.
    assert not apis().api_versions(ApiVersionsRequest(), 2).finalized_features
    empty = KafkaApis(2, cluster_id="c1", image=lambda: MetadataImage.EMPTY)
    assert empty.api_versions(request, 3).finalized_features_epoch == -1


def test_brokers_are_advertised_at_the_listener_the_client_connected_through() -> None:
    answer = metadata(named())
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [
        (1, "b1", 9091),
        (2, "b2", 9092),
    ]
    assert answer.cluster_id == "c1" and answer.topics == []
    through_grpc_name = apis().metadata(named(), 12, "CONTROLLER")
    assert [(b.node_id, b.port) for b in through_grpc_name.brokers] == [
        (1, 19091),
        (2, 19092),
        (3, 19093),
    ]


def test_topics_with_leaders_replicas_isr_and_epochs() -> None:
    (orders,) = metadata(named("orders")).topics
    assert (orders.error_code, orders.name, orders.topic_id) == (0, "orders", topic_id(1))
    assert not orders.is_internal
    assert [
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
        for p in orders.partitions
    ] == [(0, 1, 0, [1, 2], [1, 2]), (1, 2, 0, [2, 1], [2, 1])]
    assert all(p.error_code == 0 for p in orders.partitions)


@pytest.mark.parametrize(("version", "code"), [(12, 72), (6, 72), (5, 5), (0, 5)])
def test_a_leader_without_the_listener_is_not_advertised(version: int, code: int) -> None:
    (old,) = metadata(named("old"), version).topics
    (partition,) = old.partitions
    assert (partition.error_code, partition.leader_id) == (code, -1)
    assert partition.leader_epoch == 4 and partition.replica_nodes == [3, 1]


def test_unknown_names_and_ids_are_errors_and_ids_are_read() -> None:
    request = MetadataRequest(
        topics=[
            MetadataRequestTopic(name="nope"),
            MetadataRequestTopic(name=None, topic_id=topic_id(1)),
            MetadataRequestTopic(name=None, topic_id=topic_id(99)),
        ]
    )
    nope, orders, unknown = metadata(request).topics
    assert (nope.name, nope.error_code, nope.partitions) == ("nope", 3, [])
    assert (orders.name, orders.error_code, len(orders.partitions)) == ("orders", 0, 2)
    assert (unknown.name, unknown.error_code, unknown.topic_id) == (None, 100, topic_id(99))


@pytest.mark.parametrize("name", ["", None])
def test_an_id_next_to_an_empty_or_null_name_is_a_lookup_by_id(name: str | None) -> None:
    """The Java admin client's describe by id sends the id with an empty name."""
    request = MetadataRequest(
        topics=[
            MetadataRequestTopic(name=name, topic_id=topic_id(1)),
            MetadataRequestTopic(name=name, topic_id=topic_id(99)),
        ]
    )
    orders, unknown = metadata(request).topics
    assert (orders.name, orders.topic_id, orders.error_code) == ("orders", topic_id(1), 0)
    assert len(orders.partitions) == 2
    assert (unknown.name, unknown.error_code, unknown.topic_id) == (None, 100, topic_id(99))


def test_every_topic_forms() -> None:
    assert [t.name for t in metadata(MetadataRequest(topics=None)).topics] == ["old", "orders"]
    assert [t.name for t in metadata(MetadataRequest(topics=[]), 0).topics] == ["old", "orders"]
    assert metadata(MetadataRequest(topics=[]), 1).topics == []


@pytest.mark.parametrize("raft_leader", [1, 2, 3, 4, -1])
def test_the_controller_id_is_the_answering_broker_whatever_the_raft_leader(
    raft_leader: int,
) -> None:
    # Broker 1 leading the quorum may be dead with no election able to finish (its
    # registration stays unfenced then): clients sent there would wait out their timeout.
    answer = apis(raft_leader).metadata(named(), 12, "PLAINTEXT")
    assert answer.controller_id == 2


@pytest.mark.parametrize("answering", [3, 4])
def test_a_broker_not_listed_names_a_listed_one(answering: int) -> None:
    # 3 registered no Kafka listener, 4 is fenced: neither can take a client's request.
    current = image()
    handlers = KafkaApis(
        answering, cluster_id="c1", image=lambda: current, controller_id=lambda: answering
    )
    for _ in range(20):
        assert handlers.metadata(named(), 12, "PLAINTEXT").controller_id in (1, 2)


@pytest.mark.parametrize("raft_leader", [2, -1])
def test_a_controllers_answer_says_how_current_it_is(raft_leader: int) -> None:
    asked: list[list[int]] = []

    def staleness(brokers: Iterable[int]) -> tuple[Staleness, int]:
        asked.append(sorted(brokers))
        return Staleness(61_000, True, True, frozenset({1})), 1_700_000_000_000

    current = image()
    handlers = KafkaApis(
        2,
        cluster_id="c1",
        image=lambda: current,
        controller_id=lambda: raft_leader,
        metadata_staleness=staleness,
    )
    answer = handlers.metadata(named(), 12, "PLAINTEXT")
    frame = bytearray()
    answer.write(frame, 12)
    decoded = MetadataResponse.decode(memoryview(bytes(frame)), 12)
    assert decoded.controller_id == answer.controller_id
    assert staleness_tag.decode(decoded.unknown_tagged_fields) == staleness_tag.MetadataStaleness(
        True, raft_leader >= 0, 61_000, 1_700_000_000_000, 2, frozenset({1})
    )
    assert asked == [[1, 2]]
    # Before v9 there are no tagged fields; without a controller, no tag.
    assert handlers.metadata(named(), 8, "PLAINTEXT").unknown_tagged_fields == ()
    assert apis(raft_leader).metadata(named(), 12, "PLAINTEXT").unknown_tagged_fields == ()


class FetchLog:
    """A replica manager whose partitions have no records and the high watermarks set here;
    it records what each read asked for."""

    def __init__(self) -> None:
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self.diverging: dict[tuple[str, int], m.EpochEndOffsetResult] = {}
        self.reads: list[m.FetchRequest] = []

    def fetch_or_wait(
        self, request: m.FetchRequest, repeats: object = None, session: object = None
    ) -> m.FetchResponse:
        self.reads.append(request)
        return m.FetchResponse(
            tuple(
                m.FetchPartitionResult(
                    p.topic,
                    p.partition,
                    high_watermark=self.high_watermarks.get((p.topic, p.partition), 0),
                    log_start_offset=0,
                    topic_id=p.topic_id,
                    diverging_epoch=self.diverging.get((p.topic, p.partition)),
                )
                for p in request.partitions
            )
        )


def fetching(sessions: FetchSessionCache | None = None) -> tuple[KafkaApis, FetchLog]:
    current = image()
    log = FetchLog()
    service = BrokerCores(2, replica_manager=log)  # type: ignore[arg-type]
    handlers = KafkaApis(
        2, cluster_id="c1", image=lambda: current, broker_service=service, fetch_sessions=sessions
    )
    return handlers, log


def orders(*partitions: int, by_id: bool = False) -> list[FetchTopic]:
    return [
        FetchTopic(
            topic="" if by_id else "orders",
            topic_id=topic_id(1) if by_id else ZERO_UUID,
            partitions=[FetchPartition(partition=p, partition_max_bytes=100) for p in partitions],
        )
    ]


def fetch_now(handlers: KafkaApis, request: FetchRequest, version: int) -> kf.FetchResponse:
    """`handlers.fetch`'s answer, which must be given at once (the log answers at once)."""
    answer = handlers.fetch(request, version)
    assert isinstance(answer, kf.FetchResponse), answer
    return answer


def answered(answer: kf.FetchResponse) -> list[tuple[str, int, int]]:
    return [
        (t.topic or str(t.topic_id), p.partition_index, p.high_watermark)
        for t in answer.responses
        for p in t.partitions
    ]


@pytest.mark.asyncio
async def test_fetch_sessions_open_answer_only_news_and_close() -> None:
    handlers, log = fetching()
    log.high_watermarks[("orders", 0)] = 3
    full = fetch_now(handlers, FetchRequest(session_epoch=0, topics=orders(0, 1)), 12)
    session = full.session_id
    assert session > 0 and full.error_code == 0
    assert answered(full) == [("orders", 0, 3), ("orders", 1, 0)]
    # Incremental: nothing sent, both partitions read, none with news.
    quiet = fetch_now(handlers, FetchRequest(session_id=session, session_epoch=1), 12)
    assert (quiet.session_id, answered(quiet)) == (session, [])
    assert [p.partition for p in log.reads[-1].partitions] == [0, 1]
    log.high_watermarks[("orders", 1)] = 5
    news = fetch_now(handlers, FetchRequest(session_id=session, session_epoch=2), 12)
    assert answered(news) == [("orders", 1, 5)]
    # Forgetting partition 0: only partition 1 is read.
    forgot = FetchRequest(
        session_id=session,
        session_epoch=3,
        forgotten_topics_data=[ForgottenTopic(topic="orders", partitions=[0])],
    )
    assert answered(fetch_now(handlers, forgot, 12)) == []
    assert [p.partition for p in log.reads[-1].partitions] == [1]
    # An epoch out of turn, then an unknown session: refused as a whole.
    wrong = fetch_now(handlers, FetchRequest(session_id=session, session_epoch=9), 12)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (71, 0, [])
    unknown = fetch_now(handlers, FetchRequest(session_id=session + 1, session_epoch=1), 12)
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (70, 0, [])
    # Epoch -1 closes the session (a sessionless fetch), and it is gone.
    closing = FetchRequest(session_id=session, session_epoch=-1, topics=orders(0))
    closed = fetch_now(handlers, closing, 12)
    assert (closed.session_id, answered(closed)) == (0, [("orders", 0, 3)])
    gone = fetch_now(handlers, FetchRequest(session_id=session, session_epoch=4), 12)
    assert gone.error_code == 70


@pytest.mark.asyncio
async def test_the_broker_uses_the_fetch_session_cache_it_is_given() -> None:
    handlers, _ = fetching(fetch_session_cache(max_slots=0))  # no sessions
    full = fetch_now(handlers, FetchRequest(session_epoch=0, topics=orders(0)), 12)
    assert (full.error_code, full.session_id, answered(full)) == (0, 0, [("orders", 0, 0)])


@pytest.mark.asyncio
async def test_fetch_v13_names_topics_by_id() -> None:
    handlers, log = fetching()
    log.high_watermarks[("orders", 1)] = 4
    missing = uuid.UUID(int=99)
    topics = [*orders(1, by_id=True), FetchTopic(topic_id=missing, partitions=[FetchPartition()])]
    answer = fetch_now(handlers, FetchRequest(session_epoch=0, topics=topics, max_wait_ms=5000), 13)
    answer.encode(13)
    [(known, known_p)], [(unknown, unknown_p)] = [
        [(t.topic_id, p) for p in t.partitions] for t in answer.responses
    ]
    assert (known, known_p.partition_index, known_p.error_code) == (topic_id(1), 1, 0)
    assert known_p.high_watermark == 4 and answer.responses[0].topic == ""
    assert (unknown, unknown_p.error_code) == (missing, 100)
    # The read carried the topic id, and did not wait: a partition had an error.
    (read,) = log.reads
    assert [(p.topic, p.topic_id) for p in read.partitions] == [("orders", topic_id(1))]
    assert read.max_wait_ms == 0
    # A session opened with ids is not used with names.
    switched = fetch_now(handlers, FetchRequest(session_id=answer.session_id, session_epoch=1), 12)
    assert switched.error_code == 106


@pytest.mark.asyncio
async def test_fetch_passes_the_epochs_and_answers_a_diverging_epoch() -> None:
    handlers, log = fetching()
    log.diverging[("orders", 0)] = m.EpochEndOffsetResult(2, 40)
    entry = FetchPartition(
        partition=0, fetch_offset=50, current_leader_epoch=4, last_fetched_epoch=3
    )
    answer = fetch_now(
        handlers, FetchRequest(topics=[FetchTopic(topic="orders", partitions=[entry])]), 12
    )
    (read,) = log.reads[0].partitions
    assert (read.fetch_offset, read.current_leader_epoch, read.last_fetched_epoch) == (50, 4, 3)
    (partition,) = answer.responses[0].partitions
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (2, 40)


@pytest.mark.asyncio
async def test_fetch_serves_no_replica() -> None:
    handlers, _ = fetching()
    with pytest.raises(RequestRefusedError, match="Fetch from replica 3: followers fetch"):
        fetch_now(handlers, FetchRequest(replica_id=3, topics=orders(0)), 12)
    state = ReplicaState(replica_id=3)
    with pytest.raises(RequestRefusedError, match="Fetch from replica 3: followers fetch"):
        fetch_now(handlers, FetchRequest(replica_state=state, topics=orders(0)), 15)


@pytest.mark.parametrize(("version", "carried"), [(9, False), (10, True), (12, True)])
def test_the_produce_leader_hint_is_written_only_where_the_version_has_it(
    version: int, carried: bool
) -> None:
    result = m.ProducePartitionResult(
        "t", 0, NotLeaderOrFollowerError("moved"), current_leader=m.LeaderIdAndEpoch(3, 7)
    )
    partition = _produce_partition(result, version)
    answer = ProduceResponse(
        responses=[TopicProduceResponse(name="t", partition_responses=[partition])]
    )
    answer.encode(version)  # no field the version lacks holds a value
    leader = (partition.current_leader.leader_id, partition.current_leader.leader_epoch)
    assert leader == ((3, 7) if carried else (-1, -1))
    assert partition.error_code == NotLeaderOrFollowerError.code


@pytest.mark.parametrize(("version", "carried"), [(4, False), (11, False), (12, True)])
def test_the_fetch_leader_and_diverging_epoch_are_written_only_where_the_version_has_them(
    version: int, carried: bool
) -> None:
    result = m.FetchPartitionResult(
        "t",
        0,
        diverging_epoch=m.EpochEndOffsetResult(2, 40),
        current_leader=m.LeaderIdAndEpoch(3, 7),
        records=b"",
    )
    partition = _fetched(result, None, version)
    kf.FetchResponse(
        responses=[kf.FetchableTopicResponse(topic="t", partitions=[partition])]
    ).encode(version)
    assert (partition.diverging_epoch.end_offset == 40) == carried
    assert (partition.current_leader.leader_id == 3) == carried


@pytest.mark.parametrize(("version", "carried"), [(1, False), (3, False), (4, True), (7, True)])
def test_the_list_offsets_leader_epoch_is_written_only_where_the_version_has_it(
    version: int, carried: bool
) -> None:
    result = m.ListOffsetsPartitionResult("t", 0, timestamp=5, offset=9, leader_epoch=3)
    partition = _list_offsets_partition(result, version)
    ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name="t", partitions=[partition])]).encode(
        version
    )  # no field the version lacks holds a value (kafkajs sends v2 and v3)
    assert (partition.offset, partition.leader_epoch) == (9, 3 if carried else -1)


class OffsetLog:
    """A replica manager that leads orders-0 (latest offset 42) and nothing else."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure

    def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:
        if self.failure is not None:
            raise self.failure
        return m.ListOffsetsResponse(
            tuple(
                m.ListOffsetsPartitionResult(p.topic, p.partition, offset=42, leader_epoch=3)
                if (p.topic, p.partition) == ("orders", 0)
                else m.ListOffsetsPartitionResult(
                    p.topic, p.partition, NotLeaderOrFollowerError(f"{p.topic}-{p.partition}")
                )
                for p in request.partitions
            )
        )


def listing(log: OffsetLog | None, **service: object) -> KafkaApis:
    current = image()
    broker_service = BrokerCores(2, replica_manager=log, **service)  # type: ignore[arg-type]
    return KafkaApis(2, cluster_id="c1", image=lambda: current, broker_service=broker_service)


def list_offsets_request(*partitions: tuple[str, int]) -> KafkaRequest:
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(
            ListOffsetsPartition(partition_index=partition, timestamp=m.LATEST_TIMESTAMP)
        )
    body = ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsTopic(name=name, partitions=ps) for name, ps in topics.items()],
    )
    header = RequestHeader(request_api_key=2, request_api_version=7, correlation_id=1)
    return KafkaRequest(0, header, body, 0)


def test_list_offsets_is_answered_at_once_through_the_broker_cores() -> None:
    answer = listing(OffsetLog()).handle(list_offsets_request(("orders", 0), ("orders", 1)), "P")
    assert isinstance(answer, ListOffsetsResponse)  # the answer itself, not an awaitable
    ((topic, partitions),) = [(t.name, t.partitions) for t in answer.topics]
    assert topic == "orders"
    assert [(p.partition_index, p.error_code, p.offset, p.leader_epoch) for p in partitions] == [
        (0, 0, 42, 3),
        (1, NotLeaderOrFollowerError.code, -1, -1),
    ]


def test_list_offsets_refusals_are_the_services_naming_the_broker() -> None:
    twice = list_offsets_request(("orders", 0), ("orders", 0))
    with pytest.raises(RequestRefusedError, match=r"^broker 2: ListOffsets names orders-0 more"):
        listing(OffsetLog()).handle(twice, "P")
    with pytest.raises(RequestRefusedError, match=r"^broker 2: not serving data requests"):
        listing(None).handle(list_offsets_request(("orders", 0)), "P")


def test_a_storage_error_listing_offsets_is_reported_and_refuses_the_request() -> None:
    reported: list[Exception] = []
    apis = listing(OffsetLog(KafkaStorageError("disk gone")), on_storage_error=reported.append)
    with pytest.raises(RequestRefusedError, match=r"^broker 2: storage error: disk gone"):
        apis.handle(list_offsets_request(("orders", 0)), "P")
    assert [str(e) for e in reported] == ["disk gone"]
    # Another Kafka error from the manager is every partition's.
    failing = listing(OffsetLog(NotLeaderOrFollowerError("moved")))
    answer = failing.handle(list_offsets_request(("orders", 0), ("orders", 1)), "P")
    assert isinstance(answer, ListOffsetsResponse)
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [NotLeaderOrFollowerError.code] * 2


def test_a_replica_manager_that_would_wait_for_offsets_is_a_programming_error() -> None:
    class Waiting(OffsetLog):
        async def list_offsets(self, request: m.ListOffsetsRequest) -> m.ListOffsetsResponse:  # type: ignore[override]
            await asyncio.sleep(0)
            return m.ListOffsetsResponse(())

    with pytest.raises(IllegalStateError, match="a call answered at once waited"):
        listing(Waiting()).handle(list_offsets_request(("orders", 0)), "P")
