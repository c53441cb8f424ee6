from replog.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LeaderIdAndEpoch(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class FetchPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...

class FetchTopic(_message.Message):
    __slots__ = ("topic", "topic_id", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    topic_id: bytes
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartition]
    def __init__(self, topic: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[FetchPartition, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "replica_epoch", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "topics", "session_epoch", "forgotten_topics")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopic]
    session_epoch: int
    forgotten_topics: _containers.RepeatedCompositeFieldContainer[ForgottenTopic]
    def __init__(self, replica_id: _Optional[int] = ..., replica_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[FetchTopic, _Mapping]]] = ..., session_epoch: _Optional[int] = ..., forgotten_topics: _Optional[_Iterable[_Union[ForgottenTopic, _Mapping]]] = ...) -> None: ...

class ForgottenTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class FetchPartitionResponse(_message.Message):
    __slots__ = ("partition", "error", "high_watermark", "last_stable_offset", "log_start_offset", "diverging_epoch", "current_leader", "records", "log_end_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorStatus
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: _common_pb2.EpochEndOffset
    current_leader: LeaderIdAndEpoch
    records: bytes
    log_end_offset: int
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[_common_pb2.EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ..., records: _Optional[bytes] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class FetchTopicResponse(_message.Message):
    __slots__ = ("topic", "topic_id", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    topic_id: bytes
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartitionResponse]
    def __init__(self, topic: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[FetchPartitionResponse, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopicResponse]
    def __init__(self, topics: _Optional[_Iterable[_Union[FetchTopicResponse, _Mapping]]] = ...) -> None: ...

class TxnMarkerTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class WritableTxnMarker(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "committed", "coordinator_epoch", "topics", "transaction_version")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_VERSION_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopic]
    transaction_version: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopic, _Mapping]]] = ..., transaction_version: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers", "timeout_ms")
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WritableTxnMarker]
    timeout_ms: int
    def __init__(self, markers: _Optional[_Iterable[_Union[WritableTxnMarker, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class TxnMarkerPartitionResult(_message.Message):
    __slots__ = ("partition", "error")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorStatus
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class TxnMarkerTopicResult(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedCompositeFieldContainer[TxnMarkerPartitionResult]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnMarkerPartitionResult, _Mapping]]] = ...) -> None: ...

class TxnMarkerResult(_message.Message):
    __slots__ = ("producer_id", "topics")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopicResult]
    def __init__(self, producer_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopicResult, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[TxnMarkerResult]
    def __init__(self, markers: _Optional[_Iterable[_Union[TxnMarkerResult, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "verify_only", "topics")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ONLY_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., verify_only: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[TxnMarkerTopic, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TxnMarkerTopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[TxnMarkerTopicResult, _Mapping]]] = ...) -> None: ...
