from replog.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VoteRequest(_message.Message):
    __slots__ = ("quorum_epoch", "candidate_id", "last_offset_epoch", "last_offset", "pre_vote")
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    quorum_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    def __init__(self, quorum_epoch: _Optional[int] = ..., candidate_id: _Optional[int] = ..., last_offset_epoch: _Optional[int] = ..., last_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("error_code", "quorum_epoch", "leader_id", "vote_granted", "pre_vote")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTE_GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    quorum_epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool
    def __init__(self, error_code: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., vote_granted: _Optional[bool] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class BeginQuorumEpochRequest(_message.Message):
    __slots__ = ("quorum_epoch", "leader_id")
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    quorum_epoch: int
    leader_id: int
    def __init__(self, quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class EndQuorumEpochRequest(_message.Message):
    __slots__ = ("quorum_epoch", "leader_id", "preferred_successors")
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    quorum_epoch: int
    leader_id: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ...) -> None: ...

class QuorumEpochResponse(_message.Message):
    __slots__ = ("error_code", "quorum_epoch", "leader_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    quorum_epoch: int
    leader_id: int
    def __init__(self, error_code: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "quorum_epoch", "fetch_offset", "last_fetched_epoch", "high_watermark", "max_wait_ms", "max_bytes")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    quorum_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    max_wait_ms: int
    max_bytes: int
    def __init__(self, replica_id: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class SnapshotId(_message.Message):
    __slots__ = ("end_offset", "quorum_epoch")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    quorum_epoch: int
    def __init__(self, end_offset: _Optional[int] = ..., quorum_epoch: _Optional[int] = ...) -> None: ...

class DivergingEpoch(_message.Message):
    __slots__ = ("quorum_epoch", "end_offset")
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    quorum_epoch: int
    end_offset: int
    def __init__(self, quorum_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error_code", "quorum_epoch", "leader_id", "fetch_offset", "last_fetched_epoch", "high_watermark", "log_start_offset", "diverging_epoch", "snapshot_id", "records")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    quorum_epoch: int
    leader_id: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: DivergingEpoch
    snapshot_id: SnapshotId
    records: bytes
    def __init__(self, error_code: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[DivergingEpoch, _Mapping]] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., records: _Optional[bytes] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("replica_id", "quorum_epoch", "snapshot_id", "position", "max_bytes")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    quorum_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    def __init__(self, replica_id: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("error_code", "quorum_epoch", "leader_id", "snapshot_id", "size", "position", "chunk")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    quorum_epoch: int
    leader_id: int
    snapshot_id: SnapshotId
    size: int
    position: int
    chunk: bytes
    def __init__(self, error_code: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., size: _Optional[int] = ..., position: _Optional[int] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class FetchEndpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FetchEndpointResponse(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...

class KafkaControllerEndpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KafkaControllerEndpointResponse(_message.Message):
    __slots__ = ("listener_name", "host", "port")
    LISTENER_NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    listener_name: str
    host: str
    port: int
    def __init__(self, listener_name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("replica_id", "log_end_offset", "last_fetch_ms", "last_caught_up_ms")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_CAUGHT_UP_MS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int
    def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_ms: _Optional[int] = ..., last_caught_up_ms: _Optional[int] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error_code", "quorum_epoch", "leader_id", "high_watermark", "voters", "observers", "nodes")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    quorum_epoch: int
    leader_id: int
    high_watermark: int
    voters: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    observers: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeEndpoint]
    def __init__(self, error_code: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[_common_pb2.NodeEndpoint, _Mapping]]] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, values: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "leader_id", "quorum_epoch", "base_offset", "last_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    QUORUM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    leader_id: int
    quorum_epoch: int
    base_offset: int
    last_offset: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., quorum_epoch: _Optional[int] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ...) -> None: ...

class ReadCommittedRequest(_message.Message):
    __slots__ = ("start_offset", "max_bytes")
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    start_offset: int
    max_bytes: int
    def __init__(self, start_offset: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ReadCommittedResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "high_watermark", "log_start_offset", "records")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    high_watermark: int
    log_start_offset: int
    records: bytes
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class AppendEndpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AppendEndpointResponse(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...
