from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ErrorStatus(_message.Message):
    __slots__ = ("code", "error_name", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    error_name: str
    message: str
    def __init__(self, code: _Optional[int] = ..., error_name: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("leader_epoch", "end_offset")
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    leader_epoch: int
    end_offset: int
    def __init__(self, leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class NodeEndpoint(_message.Message):
    __slots__ = ("node_id", "host", "port")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...
