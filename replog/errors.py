"""Typed errors for replog, one class per Kafka wire error code plus local-only errors.

Rules:
- Every error that can cross the wire subclasses `KafkaError` and carries Kafka's numeric
  `code`, its protocol `error_name` (e.g. ``OFFSET_OUT_OF_RANGE``) and whether a client may
  retry it (`retriable`). The class names follow Kafka's exception names with ``Error``.
- Errors that never cross the wire (a corrupt checkpoint file, a bad config) subclass
  `ReplogError` directly.
- Every message names the thing it is about: file and line, topic-partition, offset.
- `error_for_code(code, message)` turns a wire code back into the matching class, so clients
  raise the same types the broker raised.
- Every code of Kafka's protocol error table (-1 and 1-133, Kafka 4.x) has its class, with
  Kafka's retriable flag (the Java exception is a `RetriableException`), including codes only
  Kafka features replog lacks use (SASL, transactions, share groups): a client can then name
  any answer precisely. New classes are named after the error name (``NON_EMPTY_GROUP`` ->
  `NonEmptyGroupError`), as kafka-python names them; kafka-python's spellings of the older
  ones are aliases at the end of this module.
"""

from __future__ import annotations

from typing import ClassVar


class ReplogError(Exception):
    """Base class of every error replog raises on purpose."""

    retriable: ClassVar[bool] = False


class KafkaError(ReplogError):
    """An error with a Kafka protocol error code."""

    code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"


_BY_CODE: dict[int, type[KafkaError]] = {}


def _wire(code: int, error_name: str, *, retriable: bool = False):  # type: ignore[no-untyped-def]
    """Class decorator: attach a wire code and register the class for `error_for_code`."""

    def attach(cls: type[KafkaError]) -> type[KafkaError]:
        cls.code = code
        cls.error_name = error_name
        cls.retriable = retriable
        assert code not in _BY_CODE, f"error code {code} registered twice"
        _BY_CODE[code] = cls
        return cls

    return attach


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception instance for a wire error code; unknown codes become UnknownServerError."""
    cls = _BY_CODE.get(code, UnknownServerError)
    return cls(message or cls.error_name)


# --- Wire errors (codes and retriability as in Kafka's protocol) -----------------------------


@_wire(-1, "UNKNOWN_SERVER_ERROR")
class UnknownServerError(KafkaError):
    pass


@_wire(1, "OFFSET_OUT_OF_RANGE")
class OffsetOutOfRangeError(KafkaError):
    """A read or fetch offset outside [log_start_offset, log_end_offset]."""


@_wire(2, "CORRUPT_MESSAGE", retriable=True)
class CorruptRecordError(KafkaError):
    """Bytes that fail framing or the CRC-32C check."""


@_wire(3, "UNKNOWN_TOPIC_OR_PARTITION", retriable=True)
class UnknownTopicOrPartitionError(KafkaError):
    pass


@_wire(4, "INVALID_FETCH_SIZE")
class InvalidFetchSizeError(KafkaError):
    pass


@_wire(5, "LEADER_NOT_AVAILABLE", retriable=True)
class LeaderNotAvailableError(KafkaError):
    pass


@_wire(6, "NOT_LEADER_OR_FOLLOWER", retriable=True)
class NotLeaderOrFollowerError(KafkaError):
    pass


@_wire(7, "REQUEST_TIMED_OUT", retriable=True)
class RequestTimedOutError(KafkaError):
    pass


@_wire(8, "BROKER_NOT_AVAILABLE")
class BrokerNotAvailableError(KafkaError):
    pass


@_wire(9, "REPLICA_NOT_AVAILABLE", retriable=True)
class ReplicaNotAvailableError(KafkaError):
    pass


@_wire(10, "MESSAGE_TOO_LARGE")
class MessageSizeTooLargeError(KafkaError):
    """A batch larger than `max.message.bytes`."""


@_wire(11, "STALE_CONTROLLER_EPOCH")
class StaleControllerEpochError(KafkaError):
    """ZooKeeper-era: a request from a controller of an older epoch."""


@_wire(12, "OFFSET_METADATA_TOO_LARGE")
class OffsetMetadataTooLargeError(KafkaError):
    """A committed offset's metadata string longer than `offset.metadata.max.bytes`."""


@_wire(13, "NETWORK_EXCEPTION", retriable=True)
class NetworkError(KafkaError):
    pass


@_wire(14, "COORDINATOR_LOAD_IN_PROGRESS", retriable=True)
class CoordinatorLoadInProgressError(KafkaError):
    """The group coordinator is still loading its partition of `__consumer_offsets`."""


@_wire(15, "COORDINATOR_NOT_AVAILABLE", retriable=True)
class CoordinatorNotAvailableError(KafkaError):
    """No coordinator for the group yet (`__consumer_offsets` missing, leaderless or too small)."""


@_wire(16, "NOT_COORDINATOR", retriable=True)
class NotCoordinatorError(KafkaError):
    """The broker asked is not the group's coordinator (any more); find it again."""


@_wire(17, "INVALID_TOPIC_EXCEPTION")
class InvalidTopicError(KafkaError):
    pass


@_wire(18, "RECORD_LIST_TOO_LARGE")
class RecordBatchTooLargeError(KafkaError):
    """An append larger than a whole segment (`segment.bytes`)."""


@_wire(19, "NOT_ENOUGH_REPLICAS", retriable=True)
class NotEnoughReplicasError(KafkaError):
    pass


@_wire(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
class NotEnoughReplicasAfterAppendError(KafkaError):
    pass


@_wire(21, "INVALID_REQUIRED_ACKS")
class InvalidRequiredAcksError(KafkaError):
    pass


@_wire(22, "ILLEGAL_GENERATION")
class IllegalGenerationError(KafkaError):
    """An offset commit naming a group generation the coordinator does not have (replog's
    groups have no membership: only generation -1 is accepted)."""


@_wire(23, "INCONSISTENT_GROUP_PROTOCOL")
class InconsistentGroupProtocolError(KafkaError):
    pass


@_wire(24, "INVALID_GROUP_ID")
class InvalidGroupIdError(KafkaError):
    """An empty or malformed `group.id`."""


@_wire(25, "UNKNOWN_MEMBER_ID")
class UnknownMemberIdError(KafkaError):
    """An offset commit naming a member the coordinator does not know (only "" is accepted)."""


@_wire(26, "INVALID_SESSION_TIMEOUT")
class InvalidSessionTimeoutError(KafkaError):
    pass


@_wire(27, "REBALANCE_IN_PROGRESS")
class RebalanceInProgressError(KafkaError):
    pass


@_wire(28, "INVALID_COMMIT_OFFSET_SIZE")
class InvalidCommitOffsetSizeError(KafkaError):
    pass


@_wire(29, "TOPIC_AUTHORIZATION_FAILED")
class TopicAuthorizationFailedError(KafkaError):
    pass


@_wire(30, "GROUP_AUTHORIZATION_FAILED")
class GroupAuthorizationFailedError(KafkaError):
    pass


@_wire(31, "CLUSTER_AUTHORIZATION_FAILED")
class ClusterAuthorizationFailedError(KafkaError):
    pass


@_wire(32, "INVALID_TIMESTAMP")
class InvalidTimestampError(KafkaError):
    pass


@_wire(33, "UNSUPPORTED_SASL_MECHANISM")
class UnsupportedSaslMechanismError(KafkaError):
    pass


@_wire(34, "ILLEGAL_SASL_STATE")
class IllegalSaslStateError(KafkaError):
    pass


@_wire(35, "UNSUPPORTED_VERSION")
class UnsupportedVersionError(KafkaError):
    pass


@_wire(36, "TOPIC_ALREADY_EXISTS")
class TopicAlreadyExistsError(KafkaError):
    pass


@_wire(37, "INVALID_PARTITIONS")
class InvalidPartitionsError(KafkaError):
    pass


@_wire(38, "INVALID_REPLICATION_FACTOR")
class InvalidReplicationFactorError(KafkaError):
    pass


@_wire(39, "INVALID_REPLICA_ASSIGNMENT")
class InvalidReplicaAssignmentError(KafkaError):
    pass


@_wire(40, "INVALID_CONFIG")
class InvalidConfigError(KafkaError):
    pass


@_wire(41, "NOT_CONTROLLER", retriable=True)
class NotControllerError(KafkaError):
    pass


@_wire(42, "INVALID_REQUEST")
class InvalidRequestError(KafkaError):
    pass


@_wire(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
class UnsupportedForMessageFormatError(KafkaError):
    pass


@_wire(44, "POLICY_VIOLATION")
class PolicyViolationError(KafkaError):
    pass


@_wire(45, "OUT_OF_ORDER_SEQUENCE_NUMBER")
class OutOfOrderSequenceNumberError(KafkaError):
    pass


@_wire(46, "DUPLICATE_SEQUENCE_NUMBER")
class DuplicateSequenceNumberError(KafkaError):
    pass


@_wire(47, "INVALID_PRODUCER_EPOCH")
class InvalidProducerEpochError(KafkaError):
    pass


@_wire(48, "INVALID_TXN_STATE")
class InvalidTxnStateError(KafkaError):
    pass


@_wire(49, "INVALID_PRODUCER_ID_MAPPING")
class InvalidProducerIdMappingError(KafkaError):
    pass


@_wire(50, "INVALID_TRANSACTION_TIMEOUT")
class InvalidTransactionTimeoutError(KafkaError):
    pass


@_wire(51, "CONCURRENT_TRANSACTIONS", retriable=True)
class ConcurrentTransactionsError(KafkaError):
    pass


@_wire(52, "TRANSACTION_COORDINATOR_FENCED")
class TransactionCoordinatorFencedError(KafkaError):
    pass


@_wire(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
class TransactionalIdAuthorizationFailedError(KafkaError):
    pass


@_wire(54, "SECURITY_DISABLED")
class SecurityDisabledError(KafkaError):
    pass


@_wire(55, "OPERATION_NOT_ATTEMPTED")
class OperationNotAttemptedError(KafkaError):
    """The controller did not try this change because another in the same request failed."""


@_wire(56, "KAFKA_STORAGE_ERROR", retriable=True)
class KafkaStorageError(KafkaError):
    """The disk failed under a write or read (full disk, I/O error)."""


@_wire(57, "LOG_DIR_NOT_FOUND")
class LogDirNotFoundError(KafkaError):
    pass


@_wire(58, "SASL_AUTHENTICATION_FAILED")
class SaslAuthenticationFailedError(KafkaError):
    pass


@_wire(59, "UNKNOWN_PRODUCER_ID")
class UnknownProducerIdError(KafkaError):
    pass


@_wire(60, "REASSIGNMENT_IN_PROGRESS")
class ReassignmentInProgressError(KafkaError):
    pass


@_wire(61, "DELEGATION_TOKEN_AUTH_DISABLED")
class DelegationTokenAuthDisabledError(KafkaError):
    pass


@_wire(62, "DELEGATION_TOKEN_NOT_FOUND")
class DelegationTokenNotFoundError(KafkaError):
    pass


@_wire(63, "DELEGATION_TOKEN_OWNER_MISMATCH")
class DelegationTokenOwnerMismatchError(KafkaError):
    pass


@_wire(64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
class DelegationTokenRequestNotAllowedError(KafkaError):
    pass


@_wire(65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED")
class DelegationTokenAuthorizationFailedError(KafkaError):
    pass


@_wire(66, "DELEGATION_TOKEN_EXPIRED")
class DelegationTokenExpiredError(KafkaError):
    pass


@_wire(67, "INVALID_PRINCIPAL_TYPE")
class InvalidPrincipalTypeError(KafkaError):
    pass


@_wire(68, "NON_EMPTY_GROUP")
class NonEmptyGroupError(KafkaError):
    pass


@_wire(69, "GROUP_ID_NOT_FOUND")
class GroupIdNotFoundError(KafkaError):
    pass


@_wire(70, "FETCH_SESSION_ID_NOT_FOUND", retriable=True)
class FetchSessionIdNotFoundError(KafkaError):
    pass


@_wire(71, "INVALID_FETCH_SESSION_EPOCH", retriable=True)
class InvalidFetchSessionEpochError(KafkaError):
    pass


@_wire(72, "LISTENER_NOT_FOUND", retriable=True)
class ListenerNotFoundError(KafkaError):
    pass


@_wire(73, "TOPIC_DELETION_DISABLED")
class TopicDeletionDisabledError(KafkaError):
    pass


@_wire(74, "FENCED_LEADER_EPOCH", retriable=True)
class FencedLeaderEpochError(KafkaError):
    pass


@_wire(75, "UNKNOWN_LEADER_EPOCH", retriable=True)
class UnknownLeaderEpochError(KafkaError):
    pass


@_wire(76, "UNSUPPORTED_COMPRESSION_TYPE")
class UnsupportedCompressionTypeError(KafkaError):
    pass


@_wire(77, "STALE_BROKER_EPOCH")
class StaleBrokerEpochError(KafkaError):
    pass


@_wire(78, "OFFSET_NOT_AVAILABLE", retriable=True)
class OffsetNotAvailableError(KafkaError):
    pass


@_wire(79, "MEMBER_ID_REQUIRED")
class MemberIdRequiredError(KafkaError):
    pass


@_wire(80, "PREFERRED_LEADER_NOT_AVAILABLE", retriable=True)
class PreferredLeaderNotAvailableError(KafkaError):
    pass


@_wire(81, "GROUP_MAX_SIZE_REACHED")
class GroupMaxSizeReachedError(KafkaError):
    pass


@_wire(82, "FENCED_INSTANCE_ID")
class FencedInstanceIdError(KafkaError):
    pass


@_wire(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True)
class EligibleLeadersNotAvailableError(KafkaError):
    pass


@_wire(84, "ELECTION_NOT_NEEDED", retriable=True)
class ElectionNotNeededError(KafkaError):
    pass


@_wire(85, "NO_REASSIGNMENT_IN_PROGRESS")
class NoReassignmentInProgressError(KafkaError):
    pass


@_wire(86, "GROUP_SUBSCRIBED_TO_TOPIC")
class GroupSubscribedToTopicError(KafkaError):
    pass


@_wire(87, "INVALID_RECORD")
class InvalidRecordError(KafkaError):
    """A batch that is well framed and CRC-valid but breaks a record-level rule."""


@_wire(88, "UNSTABLE_OFFSET_COMMIT", retriable=True)
class UnstableOffsetCommitError(KafkaError):
    pass


@_wire(89, "THROTTLING_QUOTA_EXCEEDED", retriable=True)
class ThrottlingQuotaExceededError(KafkaError):
    pass


@_wire(90, "PRODUCER_FENCED")
class ProducerFencedError(KafkaError):
    pass


@_wire(91, "RESOURCE_NOT_FOUND")
class ResourceNotFoundError(KafkaError):
    pass


@_wire(92, "DUPLICATE_RESOURCE")
class DuplicateResourceError(KafkaError):
    pass


@_wire(93, "UNACCEPTABLE_CREDENTIAL")
class UnacceptableCredentialError(KafkaError):
    pass


@_wire(94, "INCONSISTENT_VOTER_SET")
class InconsistentVoterSetError(KafkaError):
    pass


@_wire(95, "INVALID_UPDATE_VERSION")
class InvalidUpdateVersionError(KafkaError):
    """An AlterPartition whose partition epoch is older than the controller's."""


@_wire(96, "FEATURE_UPDATE_FAILED")
class FeatureUpdateFailedError(KafkaError):
    pass


@_wire(97, "PRINCIPAL_DESERIALIZATION_FAILURE")
class PrincipalDeserializationFailureError(KafkaError):
    pass


@_wire(98, "SNAPSHOT_NOT_FOUND")
class SnapshotNotFoundError(KafkaError):
    pass


@_wire(99, "POSITION_OUT_OF_RANGE")
class PositionOutOfRangeError(KafkaError):
    pass


@_wire(100, "UNKNOWN_TOPIC_ID", retriable=True)
class UnknownTopicIdError(KafkaError):
    pass


@_wire(101, "DUPLICATE_BROKER_REGISTRATION")
class DuplicateBrokerRegistrationError(KafkaError):
    pass


@_wire(102, "BROKER_ID_NOT_REGISTERED")
class BrokerIdNotRegisteredError(KafkaError):
    pass


@_wire(103, "INCONSISTENT_TOPIC_ID", retriable=True)
class InconsistentTopicIdError(KafkaError):
    pass


@_wire(104, "INCONSISTENT_CLUSTER_ID")
class InconsistentClusterIdError(KafkaError):
    """A broker registration that names another cluster id than the controller's."""


@_wire(105, "TRANSACTIONAL_ID_NOT_FOUND")
class TransactionalIdNotFoundError(KafkaError):
    pass


@_wire(106, "FETCH_SESSION_TOPIC_ID_ERROR", retriable=True)
class FetchSessionTopicIdErrorError(KafkaError):
    pass


@_wire(107, "INELIGIBLE_REPLICA")
class IneligibleReplicaError(KafkaError):
    """A proposed ISR member that is unregistered, fenced, shutting down or of another epoch."""


@_wire(108, "NEW_LEADER_ELECTED")
class NewLeaderElectedError(KafkaError):
    """The AlterPartition applied, but completing a reassignment moved leadership away."""


@_wire(109, "OFFSET_MOVED_TO_TIERED_STORAGE")
class OffsetMovedToTieredStorageError(KafkaError):
    pass


@_wire(110, "FENCED_MEMBER_EPOCH")
class FencedMemberEpochError(KafkaError):
    pass


@_wire(111, "UNRELEASED_INSTANCE_ID")
class UnreleasedInstanceIdError(KafkaError):
    pass


@_wire(112, "UNSUPPORTED_ASSIGNOR")
class UnsupportedAssignorError(KafkaError):
    pass


@_wire(113, "STALE_MEMBER_EPOCH")
class StaleMemberEpochError(KafkaError):
    pass


@_wire(114, "MISMATCHED_ENDPOINT_TYPE")
class MismatchedEndpointTypeError(KafkaError):
    pass


@_wire(115, "UNSUPPORTED_ENDPOINT_TYPE")
class UnsupportedEndpointTypeError(KafkaError):
    pass


@_wire(116, "UNKNOWN_CONTROLLER_ID")
class UnknownControllerIdError(KafkaError):
    pass


@_wire(117, "UNKNOWN_SUBSCRIPTION_ID")
class UnknownSubscriptionIdError(KafkaError):
    pass


@_wire(118, "TELEMETRY_TOO_LARGE")
class TelemetryTooLargeError(KafkaError):
    pass


@_wire(119, "INVALID_REGISTRATION")
class InvalidRegistrationError(KafkaError):
    pass


@_wire(120, "TRANSACTION_ABORTABLE")
class TransactionAbortableError(KafkaError):
    pass


@_wire(121, "INVALID_RECORD_STATE")
class InvalidRecordStateError(KafkaError):
    pass


@_wire(122, "SHARE_SESSION_NOT_FOUND", retriable=True)
class ShareSessionNotFoundError(KafkaError):
    pass


@_wire(123, "INVALID_SHARE_SESSION_EPOCH", retriable=True)
class InvalidShareSessionEpochError(KafkaError):
    pass


@_wire(124, "FENCED_STATE_EPOCH")
class FencedStateEpochError(KafkaError):
    pass


@_wire(125, "INVALID_VOTER_KEY")
class InvalidVoterKeyError(KafkaError):
    pass


@_wire(126, "DUPLICATE_VOTER")
class DuplicateVoterError(KafkaError):
    pass


@_wire(127, "VOTER_NOT_FOUND")
class VoterNotFoundError(KafkaError):
    pass


@_wire(128, "INVALID_REGULAR_EXPRESSION")
class InvalidRegularExpressionError(KafkaError):
    pass


@_wire(129, "REBOOTSTRAP_REQUIRED")
class RebootstrapRequiredError(KafkaError):
    """The client's metadata is too stale to trust: start again from the bootstrap servers."""


@_wire(130, "STREAMS_INVALID_TOPOLOGY")
class StreamsInvalidTopologyError(KafkaError):
    pass


@_wire(131, "STREAMS_INVALID_TOPOLOGY_EPOCH")
class StreamsInvalidTopologyEpochError(KafkaError):
    pass


@_wire(132, "STREAMS_TOPOLOGY_FENCED")
class StreamsTopologyFencedError(KafkaError):
    pass


@_wire(133, "SHARE_SESSION_LIMIT_REACHED", retriable=True)
class ShareSessionLimitReachedError(KafkaError):
    pass


# --- Storage errors without their own wire code ------------------------------------------------
# Kafka reports these as KAFKA_STORAGE_ERROR or UNKNOWN_SERVER_ERROR on the wire; locally they
# keep a precise type so callers (the follower fetcher, recovery) can react to each.


class UnexpectedAppendOffsetError(UnknownServerError):
    """A follower append whose first offset is not the log end offset (a gap or an overlap)."""


class OffsetsOutOfOrderError(UnknownServerError):
    """Batches whose offsets do not strictly increase."""


class LogClosedError(KafkaStorageError):
    """An operation on a log that was closed."""


class PurgatoryFullError(UnknownServerError):
    """A delayed operation refused because its purgatory already holds its bound of pending ops."""


# --- Answers a client cannot use ----------------------------------------------------------------


class MalformedResponseError(UnknownServerError):
    """An answer from a broker that is not an answer its RPC can have.

    Bytes that do not parse as the RPC's protobuf message, or a message whose contents cannot
    be: a partition the request did not ask for, named twice or left out, an offset below -1
    or a negative producer id beside no error, a topic id that is not 16 bytes. The peer is not a
    replog broker, or a buggy or incompatible one. The message names the peer's address, the
    RPC and what was wrong. It keeps UNKNOWN_SERVER_ERROR's code (what Kafka's client makes of
    an error code it does not know, and what a failed call of an unknown kind is here): not
    retriable, since asking again gets the same answer, and for a Produce the outcome is
    unknown (the broker may have appended the records before answering).
    """


# --- Local-only errors -------------------------------------------------------------------------


class CorruptCheckpointError(ReplogError):
    """A checkpoint file that cannot be parsed; the message names file, line and reason."""


class CorruptProducerSnapshotError(ReplogError):
    """A producer-state snapshot file that fails its checks; the message names the file and
    what is wrong (the replica deletes it and replays the log instead)."""


class CorruptIndexError(ReplogError):
    """An offset or time index that fails its sanity check; the message names the file."""


class ConfigError(ReplogError):
    """A configuration value that is unknown, malformed or out of range; names the key."""


class KafkaTimeoutError(ReplogError):
    """A client call that did not finish within its timeout (`max.block.ms`,
    `delivery.timeout.ms`, a method's `timeout_ms`). The message names the operation, the
    timeout and the last cause seen (an unreachable address, a retriable broker error)."""

    retriable: ClassVar[bool] = True


class NoBrokersAvailableError(ReplogError):
    """No bootstrap or advertised broker address answered. The message names every address
    tried (the bootstrap ones and those the cluster advertised) and what each said."""

    retriable: ClassVar[bool] = True


class ClientClosedError(ReplogError):
    """A call on a Producer, Consumer or Admin after `close()` (or while it closes)."""


class IllegalStateError(ReplogError):
    """A call that the client's state does not allow (poll without assignment or subscription,
    seek on a partition not assigned, subscribe after assign)."""


class RecordDeserializationError(ReplogError):
    """The consumer's key or value deserializer raised on a record (Kafka's
    RecordDeserializationException): names the partition, the offset and which of the two
    (`origin`: "key" or "value"); the deserializer's own exception is the `__cause__`. The
    position stays at the record: `seek` past it (`offset + 1`) to go on."""

    def __init__(
        self, topic_partition: tuple[str, int], offset: int, origin: str, cause: BaseException
    ) -> None:
        topic, partition = topic_partition
        super().__init__(
            f"the {origin} deserializer failed on the record at offset {offset} of "
            f"{topic}-{partition}: {type(cause).__name__}: {cause} (seek to {offset + 1} to "
            "skip it)"
        )
        self.topic_partition = topic_partition
        self.offset = offset
        self.origin = origin
        self._cause = cause

    def __reduce__(self) -> tuple[object, ...]:
        # Its arguments, not its message: it crosses processes (a multiprocessing pool).
        return (type(self), (self.topic_partition, self.offset, self.origin, self._cause))


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """`auto.offset.reset=none` and no committed offset for a partition (names it)."""


class CorruptMetadataRecordError(CorruptRecordError):
    """Bytes of a metadata log record that are not a well-formed record of a known kind.

    The message says what is wrong (not protobuf, no known record kind, a 15-byte topic id).
    Not retriable: the bytes are committed, so reading them again gives the same bytes.
    """

    retriable: ClassVar[bool] = False


class MetadataReplayError(ReplogError):
    """A metadata record that cannot apply to the image it is replayed onto.

    An unknown topic, partition or broker, a broker epoch that does not match the registration:
    the controller never writes such a record, so the log or the replayer is broken. The message
    names the record and what is missing.
    """


class MetadataLoadError(MetadataReplayError):
    """A committed metadata batch or snapshot a node's metadata loader cannot apply.

    `offset` is the offset of the offending record (a snapshot's last contained offset for a
    snapshot record, a batch's base offset for a batch out of order). The loader stops at the
    first one: the image after it would be wrong, so nothing later is published.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class ProtocolDecodeError(InvalidRequestError):
    """Bytes that do not decode as the Kafka protocol message and version they claim to be.

    Truncated frames, lengths past the end, null where the spec forbids it, invalid UTF-8, bytes
    left over: the message names the message, its version and the field path
    (``topics.partitions.records``). Kafka answers such a request with INVALID_REQUEST.
    """

    def __init__(self, message_name: str, version: int, field: str, reason: str) -> None:
        super().__init__(f"{message_name} v{version}: field {field or '(unknown)'}: {reason}")
        self.message_name = message_name
        self.version = version
        self.field = field
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message_name, self.version, self.field, self.reason))


class ProtocolEncodeError(ReplogError):
    """A Kafka protocol message whose values cannot be written at the version asked: None for a
    non-nullable field, an integer out of its type's range, a value of the wrong type. Names the
    message, version and field path."""

    def __init__(self, message_name: str, version: int, field: str, reason: str) -> None:
        super().__init__(f"{message_name} v{version}: field {field or '(unknown)'}: {reason}")
        self.message_name = message_name
        self.version = version
        self.field = field
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message_name, self.version, self.field, self.reason))


class BrokerLifecycleError(ReplogError):
    """The broker could not join the cluster or left it before running: no registration
    within `initial.broker.registration.timeout.ms`, or a shutdown while starting. The message
    names the broker and the reason."""


# --- kafka-python's names of the same classes (code moving from kafka-python keeps working) ------

UnknownError = UnknownServerError
InvalidFetchRequestError = InvalidFetchSizeError
NotLeaderForPartitionError = NotLeaderOrFollowerError
NetworkExceptionError = NetworkError
RecordListTooLargeError = RecordBatchTooLargeError
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError
InvalidConfigurationError = InvalidConfigError
IncompatibleBrokerVersion = UnsupportedVersionError
KafkaConfigurationError = ConfigError
NoBrokersAvailable = NoBrokersAvailableError


def wire_error_classes() -> dict[int, type[KafkaError]]:
    """Every registered wire error class by its code (a copy)."""
    return dict(_BY_CODE)
