from replog.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaAssignment(_message.Message):
    __slots__ = ("partition_index", "broker_ids")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition_index: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaAssignment]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaAssignment, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only", "timeout_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    validate_only: bool
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CreatableTopicResult(_message.Message):
    __slots__ = ("name", "topic_id", "error", "num_partitions", "replication_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    error: _common_pb2.ErrorStatus
    num_partitions: int
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "topics")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopicResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreatableTopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("topic_names", "topic_ids", "timeout_ms")
    TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topic_names: _containers.RepeatedScalarFieldContainer[str]
    topic_ids: _containers.RepeatedScalarFieldContainer[bytes]
    timeout_ms: int
    def __init__(self, topic_names: _Optional[_Iterable[str]] = ..., topic_ids: _Optional[_Iterable[bytes]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeletableTopicResult(_message.Message):
    __slots__ = ("name", "topic_id", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    error: _common_pb2.ErrorStatus
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "topics")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    topics: _containers.RepeatedCompositeFieldContainer[DeletableTopicResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DeletableTopicResult, _Mapping]]] = ...) -> None: ...

class CreatePartitionsTopic(_message.Message):
    __slots__ = ("name", "count", "assignments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaAssignment]
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaAssignment, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only", "timeout_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsTopic]
    validate_only: bool
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CreatePartitionsTopicResult(_message.Message):
    __slots__ = ("name", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorStatus
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsTopicResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[CreatePartitionsTopicResult, _Mapping]]] = ...) -> None: ...

class BrokerEndpoint(_message.Message):
    __slots__ = ("broker_id", "host", "port", "rack", "fenced", "in_controlled_shutdown", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("controller_id", "error", "cluster_id", "brokers", "metadata_offset", "controllers")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    cluster_id: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    metadata_offset: int
    controllers: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeEndpoint]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., cluster_id: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., metadata_offset: _Optional[int] = ..., controllers: _Optional[_Iterable[_Union[_common_pb2.NodeEndpoint, _Mapping]]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class PartitionMetadata(_message.Message):
    __slots__ = ("error", "partition_index", "leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "offline_replicas", "adding_replicas", "removing_replicas")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorStatus
    partition_index: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., partition_index: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("error", "name", "topic_id", "partitions")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorStatus
    name: str
    topic_id: bytes
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMetadata]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[PartitionMetadata, _Mapping]]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("controller_id", "error", "cluster_id", "brokers", "topics", "metadata_offset", "stale", "metadata_age_ms", "quorum_contact_time_ms", "unreachable_broker_ids", "answering_node_id")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    METADATA_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    QUORUM_CONTACT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    ANSWERING_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    cluster_id: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    topics: _containers.RepeatedCompositeFieldContainer[TopicMetadata]
    metadata_offset: int
    stale: bool
    metadata_age_ms: int
    quorum_contact_time_ms: int
    unreachable_broker_ids: _containers.RepeatedScalarFieldContainer[int]
    answering_node_id: int
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., cluster_id: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicMetadata, _Mapping]]] = ..., metadata_offset: _Optional[int] = ..., stale: _Optional[bool] = ..., metadata_age_ms: _Optional[int] = ..., quorum_contact_time_ms: _Optional[int] = ..., unreachable_broker_ids: _Optional[_Iterable[int]] = ..., answering_node_id: _Optional[int] = ...) -> None: ...

class Listener(_message.Message):
    __slots__ = ("name", "host", "port", "security_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    security_protocol: str
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[str] = ...) -> None: ...

class SupportedFeature(_message.Message):
    __slots__ = ("name", "min_supported_version", "max_supported_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_supported_version: int
    max_supported_version: int
    def __init__(self, name: _Optional[str] = ..., min_supported_version: _Optional[int] = ..., max_supported_version: _Optional[int] = ...) -> None: ...

class BrokerRegistrationRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "listeners", "features", "rack", "previous_broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: bytes
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    features: _containers.RepeatedCompositeFieldContainer[SupportedFeature]
    rack: str
    previous_broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[bytes] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[SupportedFeature, _Mapping]]] = ..., rack: _Optional[str] = ..., previous_broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerRegistrationResponse(_message.Message):
    __slots__ = ("controller_id", "error", "broker_epoch")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    broker_epoch: int
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shut_down")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shut_down: _Optional[bool] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("controller_id", "error", "is_caught_up", "is_fenced", "should_shut_down")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ...) -> None: ...

class IsrMember(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionPartition(_message.Message):
    __slots__ = ("partition_index", "leader_epoch", "new_isr", "leader_recovery_state", "partition_epoch")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    leader_epoch: int
    new_isr: _containers.RepeatedCompositeFieldContainer[IsrMember]
    leader_recovery_state: int
    partition_epoch: int
    def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[_Union[IsrMember, _Mapping]]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionTopic(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionPartition]
    def __init__(self, topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionPartition, _Mapping]]] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionTopic]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionTopic, _Mapping]]] = ...) -> None: ...

class AlterPartitionPartitionResult(_message.Message):
    __slots__ = ("partition_index", "error", "leader_id", "leader_epoch", "isr", "leader_recovery_state", "partition_epoch")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    error: _common_pb2.ErrorStatus
    leader_id: int
    leader_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader_recovery_state: int
    partition_epoch: int
    def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionTopicResult(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionPartitionResult]
    def __init__(self, topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionPartitionResult, _Mapping]]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("controller_id", "error", "topics")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionTopicResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionTopicResult, _Mapping]]] = ...) -> None: ...

class BrokerIds(_message.Message):
    __slots__ = ("broker_ids",)
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ReassignablePartition(_message.Message):
    __slots__ = ("partition_index", "replicas")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    replicas: BrokerIds
    def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Union[BrokerIds, _Mapping]] = ...) -> None: ...

class ReassignableTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ReassignablePartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ReassignablePartition, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ReassignableTopic]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[ReassignableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ReassignablePartitionResult(_message.Message):
    __slots__ = ("topic", "partition_index", "error")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition_index: int
    error: _common_pb2.ErrorStatus
    def __init__(self, topic: _Optional[str] = ..., partition_index: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[ReassignablePartitionResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ReassignablePartitionResult, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class OngoingReassignment(_message.Message):
    __slots__ = ("topic", "partition_index", "replicas", "adding_replicas", "removing_replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition_index: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition_index: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "reassignments")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    reassignments: _containers.RepeatedCompositeFieldContainer[OngoingReassignment]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., reassignments: _Optional[_Iterable[_Union[OngoingReassignment, _Mapping]]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "partitions", "timeout_ms")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    timeout_ms: int
    def __init__(self, election_type: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class PartitionElectionResult(_message.Message):
    __slots__ = ("topic", "partition_index", "error")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition_index: int
    error: _common_pb2.ErrorStatus
    def __init__(self, topic: _Optional[str] = ..., partition_index: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[PartitionElectionResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[PartitionElectionResult, _Mapping]]] = ...) -> None: ...

class ConfigResourceKeys(_message.Message):
    __slots__ = ("resource_type", "resource_name", "configuration_keys")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_KEYS_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    configuration_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configuration_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResourceKeys]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResourceKeys, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "is_default", "read_only", "is_sensitive", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    is_default: bool
    read_only: bool
    is_sensitive: bool
    source: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., is_default: _Optional[bool] = ..., read_only: _Optional[bool] = ..., is_sensitive: _Optional[bool] = ..., source: _Optional[str] = ...) -> None: ...

class DescribeConfigsResult(_message.Message):
    __slots__ = ("resource_type", "resource_name", "error", "configs")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    error: _common_pb2.ErrorStatus
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "operation", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    operation: int
    value: str
    def __init__(self, name: _Optional[str] = ..., operation: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...

class AlterConfigsResource(_message.Message):
    __slots__ = ("resource_type", "resource_name", "configs", "replace")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    replace: bool
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ..., replace: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResult(_message.Message):
    __slots__ = ("resource_type", "resource_name", "error")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    error: _common_pb2.ErrorStatus
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[AlterConfigsResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterConfigsResult, _Mapping]]] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "timeout_ms")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    timeout_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ("controller_id", "error")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "producer_id_start", "producer_id_len")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    producer_id_start: int
    producer_id_len: int
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class ScramCredentialDeletion(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ...) -> None: ...

class ScramCredentialUpsertion(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions", "timeout_ms")
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[ScramCredentialDeletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[ScramCredentialUpsertion]
    timeout_ms: int
    def __init__(self, deletions: _Optional[_Iterable[_Union[ScramCredentialDeletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[ScramCredentialUpsertion, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterUserScramCredentialsResult(_message.Message):
    __slots__ = ("user", "error")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    user: str
    error: _common_pb2.ErrorStatus
    def __init__(self, user: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterUserScramCredentialsResult, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class AclBindingFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations", "timeout_ms")
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclBinding]
    timeout_ms: int
    def __init__(self, creations: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AclCreationResult(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorStatus
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[AclCreationResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AclCreationResult, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters", "timeout_ms")
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBindingFilter]
    timeout_ms: int
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBindingFilter, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AclFilterResult(_message.Message):
    __slots__ = ("error", "matching")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MATCHING_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorStatus
    matching: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., matching: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("controller_id", "error", "results")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    results: _containers.RepeatedCompositeFieldContainer[AclFilterResult]
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AclFilterResult, _Mapping]]] = ...) -> None: ...

class FeatureUpdate(_message.Message):
    __slots__ = ("feature", "max_version_level", "upgrade_type")
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_TYPE_FIELD_NUMBER: _ClassVar[int]
    feature: str
    max_version_level: int
    upgrade_type: int
    def __init__(self, feature: _Optional[str] = ..., max_version_level: _Optional[int] = ..., upgrade_type: _Optional[int] = ...) -> None: ...

class UpdateFeaturesRequest(_message.Message):
    __slots__ = ("updates", "validate_only", "timeout_ms")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[FeatureUpdate]
    validate_only: bool
    timeout_ms: int
    def __init__(self, updates: _Optional[_Iterable[_Union[FeatureUpdate, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class UpdateFeaturesResponse(_message.Message):
    __slots__ = ("controller_id", "error")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    error: _common_pb2.ErrorStatus
    def __init__(self, controller_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorStatus, _Mapping]] = ...) -> None: ...
