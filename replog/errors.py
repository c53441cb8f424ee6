"""Typed errors for replog: Kafka's wire errors, built from Kafka's error table, and local ones.

Rules:
- Every error that can cross the wire subclasses `KafkaError` and carries Kafka's numeric
  `code`, its protocol `error_name` (e.g. ``OFFSET_OUT_OF_RANGE``) and whether a client may
  retry it (`retriable`). The three come from one row of `replog.error_codes.KAFKA_ERRORS`
  (Kafka's `Errors` enum, every code of Kafka 4.x); a class names only its code.
- A code gets a named class here only when replog raises, catches or documents it by name (its
  code, tests or docs). The name follows Kafka's exception name with ``Error``, or the error
  name (``NON_EMPTY_GROUP`` -> ``NonEmptyGroupError``) as kafka-python names them; kafka-python's
  spellings of older ones are aliases at the end of this module. Every other code of the table
  gets a `GenericKafkaError` subclass built at import, named the same way but not a module
  attribute: `error_for_code` still gives each code its own type with Kafka's flags.
- The named classes are one-line `class X(KafkaError, code=N)` statements, not generated source
  nor a loop over the table: mypy (strict) and readers need each importable name written out,
  the table stays the only place a name or flag is spelled, and `tests/test_errors.py` checks
  that the two agree, so no generator or `--check` step is needed.
- Errors that never cross the wire (a corrupt checkpoint file, a bad config) subclass
  `ReplogError` directly.
- Every message names the thing it is about: file and line, topic-partition, offset.
- `error_for_code(code, message)` turns a wire code back into its class, so clients raise the
  same types the broker raised; a code outside the table becomes `UnknownServerError`.
  `answer_error` does that for a code read from an answer, its text naming the code.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, ClassVar

from replog.error_codes import ERRORS_BY_CODE, KAFKA_ERRORS, ErrorSpec


class ReplogError(Exception):
    """Base class of every error replog raises on purpose."""

    retriable: ClassVar[bool] = False


_BY_CODE: dict[int, type[KafkaError]] = {}


class KafkaError(ReplogError):
    """An error with a Kafka protocol error code.

    `class X(KafkaError, code=N)` takes code N's name and retriable flag from Kafka's error
    table and registers X for `error_for_code`; a subclass without `code` inherits its parent's.
    """

    code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"

    def __init_subclass__(cls, code: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        spec = ERRORS_BY_CODE[code]
        cls.code = spec.code
        cls.error_name = spec.name
        cls.retriable = spec.retriable
        if code in _BY_CODE:
            raise TypeError(f"error code {code} has two classes: {_BY_CODE[code]} and {cls}")
        _BY_CODE[code] = cls


def error_for_code(code: int, message: str = "") -> KafkaError:
    """The exception instance for a wire error code; unknown codes become UnknownServerError."""
    cls = _BY_CODE.get(code, UnknownServerError)
    return cls(message or cls.error_name)


def answer_error(code: int, message: str | None = None, about: str = "") -> KafkaError | None:
    """The error an answer's `code` stands for, None for 0 (no error).

    The peer's `message` alone when it gave one and the caller names nothing more, as Kafka's
    clients carry a broker's message; otherwise the code (Kafka's name of it) with `about`,
    what was asked and of whom ("from the coordinator at h:9092 for group 'g'"), then the
    message. A code outside Kafka's table is an `UnknownServerError` whose text always names
    the code ("unknown error code N"), as the type cannot.
    """
    if code == 0:
        return None
    cls = _BY_CODE.get(code)
    if cls is not None and message and not about:
        return cls(message)
    name = cls.error_name if cls is not None else f"unknown error code {code}"
    text = f"{name} {about}" if about else name
    if message and message != name:
        text = f"{text}: {message}"
    return (cls or UnknownServerError)(text)


def _class_name(error_name: str) -> str:
    """The name of a code's generic class: ``NON_EMPTY_GROUP`` -> ``NonEmptyGroupError``."""
    return "".join(word.capitalize() for word in error_name.split("_")) + "Error"


# --- Wire errors (codes and retriability as in Kafka's protocol) -----------------------------


class UnknownServerError(KafkaError, code=-1): ...


class OffsetOutOfRangeError(KafkaError, code=1):
    """A read or fetch offset outside [log_start_offset, log_end_offset]."""


class CorruptRecordError(KafkaError, code=2):
    """Bytes that fail framing or the CRC-32C check."""


class UnknownTopicOrPartitionError(KafkaError, code=3): ...


class InvalidFetchSizeError(KafkaError, code=4): ...


class LeaderNotAvailableError(KafkaError, code=5): ...


class NotLeaderOrFollowerError(KafkaError, code=6): ...


class RequestTimedOutError(KafkaError, code=7): ...


class BrokerNotAvailableError(KafkaError, code=8): ...


class MessageSizeTooLargeError(KafkaError, code=10):
    """A batch larger than `max.message.bytes`."""


class OffsetMetadataTooLargeError(KafkaError, code=12):
    """A committed offset's metadata string longer than `offset.metadata.max.bytes`."""


class NetworkError(KafkaError, code=13): ...


class CoordinatorLoadInProgressError(KafkaError, code=14):
    """The group coordinator is still loading its partition of `__consumer_offsets`."""


class CoordinatorNotAvailableError(KafkaError, code=15):
    """No coordinator for the group yet (`__consumer_offsets` missing, leaderless or too small)."""


class NotCoordinatorError(KafkaError, code=16):
    """The broker asked is not the group's coordinator (any more); find it again."""


class InvalidTopicError(KafkaError, code=17): ...


class RecordBatchTooLargeError(KafkaError, code=18):
    """An append larger than a whole segment (`segment.bytes`)."""


class NotEnoughReplicasError(KafkaError, code=19): ...


class NotEnoughReplicasAfterAppendError(KafkaError, code=20): ...


class InvalidRequiredAcksError(KafkaError, code=21): ...


class IllegalGenerationError(KafkaError, code=22):
    """A request naming a group generation that is not the group's current one."""


class InconsistentGroupProtocolError(KafkaError, code=23):
    """A JoinGroup whose protocol type or protocols no member of the group shares."""


class InvalidGroupIdError(KafkaError, code=24):
    """An empty or malformed `group.id`."""


class UnknownMemberIdError(KafkaError, code=25):
    """A request naming a member the group does not have."""


class InvalidSessionTimeoutError(KafkaError, code=26):
    """A JoinGroup session timeout outside group.min/max.session.timeout.ms."""


class RebalanceInProgressError(KafkaError, code=27):
    """The group is rebalancing: the member rejoins (JoinGroup) before it syncs or commits."""


class InvalidCommitOffsetSizeError(KafkaError, code=28): ...


class TopicAuthorizationFailedError(KafkaError, code=29):
    """The principal may not do this on the topic (the authorizer's answer)."""


class GroupAuthorizationFailedError(KafkaError, code=30):
    """The principal may not do this on the consumer group."""


class ClusterAuthorizationFailedError(KafkaError, code=31):
    """The principal may not do this on the cluster resource."""


class UnsupportedSaslMechanismError(KafkaError, code=33):
    """A SCRAM credential named with a mechanism code that is neither SCRAM-SHA-256 (1) nor
    SCRAM-SHA-512 (2)."""


class IllegalSaslStateError(KafkaError, code=34):
    """A SASL message out of order: a SaslAuthenticate before the handshake, or a SCRAM
    message after the exchange ended."""


class UnsupportedVersionError(KafkaError, code=35): ...


class TopicAlreadyExistsError(KafkaError, code=36): ...


class InvalidPartitionsError(KafkaError, code=37): ...


class InvalidReplicationFactorError(KafkaError, code=38): ...


class InvalidReplicaAssignmentError(KafkaError, code=39): ...


class InvalidConfigError(KafkaError, code=40): ...


class NotControllerError(KafkaError, code=41): ...


class InvalidRequestError(KafkaError, code=42): ...


class PolicyViolationError(KafkaError, code=44): ...


class OutOfOrderSequenceNumberError(KafkaError, code=45): ...


class DuplicateSequenceNumberError(KafkaError, code=46): ...


class InvalidProducerEpochError(KafkaError, code=47): ...


class InvalidTxnStateError(KafkaError, code=48):
    """The transaction is in no state for this request (EndTxn with no transaction, say)."""


class InvalidProducerIdMappingError(KafkaError, code=49):
    """The producer id is not the one the coordinator holds for this transactional id."""


class InvalidTransactionTimeoutError(KafkaError, code=50):
    """The transaction timeout is above the broker's transaction.max.timeout.ms (or not > 0)."""


class ConcurrentTransactionsError(KafkaError, code=51):
    """The coordinator is still completing this transactional id's previous transaction."""


class TransactionCoordinatorFencedError(KafkaError, code=52):
    """A transaction marker came from a coordinator older than the last one seen."""


class TransactionalIdAuthorizationFailedError(KafkaError, code=53):
    """The principal may not use the transactional id."""


class SecurityDisabledError(KafkaError, code=54):
    """An ACL API on a broker with no authorizer (`authorizer.class.name` empty)."""


class OperationNotAttemptedError(KafkaError, code=55):
    """The controller did not try this change because another in the same request failed."""


class KafkaStorageError(KafkaError, code=56):
    """The disk failed under a write or read (full disk, I/O error)."""


class SaslAuthenticationFailedError(KafkaError, code=58):
    """A SASL exchange that failed: an unknown user, a wrong proof, a malformed SCRAM message.
    The message says which, and never holds a password or key."""


class UnknownProducerIdError(KafkaError, code=59): ...


class ProducerFencedError(KafkaError, code=90):
    """A newer producer with the same transactional id has a higher epoch: this one is fenced."""


class TransactionAbortableError(KafkaError, code=120):
    """The transaction cannot go on (a partition not added to it, say); the producer aborts."""


class NonEmptyGroupError(KafkaError, code=68):
    """A group deletion refused because the group still has members."""


class GroupIdNotFoundError(KafkaError, code=69):
    """A group deletion of a group the coordinator does not have."""


class FetchSessionIdNotFoundError(KafkaError, code=70):
    """An incremental fetch naming a fetch session the broker does not hold (any more)."""


class InvalidFetchSessionEpochError(KafkaError, code=71): ...


class FencedLeaderEpochError(KafkaError, code=74): ...


class UnknownLeaderEpochError(KafkaError, code=75): ...


class UnsupportedCompressionTypeError(KafkaError, code=76): ...


class StaleBrokerEpochError(KafkaError, code=77): ...


class OffsetNotAvailableError(KafkaError, code=78): ...


class MemberIdRequiredError(KafkaError, code=79):
    """A first JoinGroup (v4+) answered with the member id to rejoin with (KIP-394)."""


class PreferredLeaderNotAvailableError(KafkaError, code=80): ...


class GroupMaxSizeReachedError(KafkaError, code=81):
    """A JoinGroup refused because the group has group.max.size members."""


class FencedInstanceIdError(KafkaError, code=82):
    """A static member (group.instance.id) whose member id another join replaced (KIP-345)."""


class EligibleLeadersNotAvailableError(KafkaError, code=83): ...


class ElectionNotNeededError(KafkaError, code=84): ...


class NoReassignmentInProgressError(KafkaError, code=85): ...


class GroupSubscribedToTopicError(KafkaError, code=86):
    """An OffsetDelete of a partition of a topic the group's members still read."""


class InvalidRecordError(KafkaError, code=87):
    """A batch that is well framed and CRC-valid but breaks a record-level rule."""


class UnstableOffsetCommitError(KafkaError, code=88):
    """An OffsetFetch with require_stable of a partition whose offset an open transaction
    commits (TxnOffsetCommit staged until its marker): asked again once it ended."""


class RecordsRejectedError(InvalidRecordError):
    """Records of a produce refused one by one (Kafka's RecordValidationException), e.g. a
    record without a key on a compacted topic: `record_errors` holds (the record's index in
    its batch, why) for each, which a Produce answer v8+ carries."""

    def __init__(self, message: str, record_errors: Sequence[tuple[int, str]] = ()) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class ResourceNotFoundError(KafkaError, code=91):
    """A SCRAM credential deletion naming a credential the user does not have."""


class DuplicateResourceError(KafkaError, code=92):
    """One AlterUserScramCredentials request altering a user's credentials twice."""


class UnacceptableCredentialError(KafkaError, code=93):
    """A SCRAM credential that cannot be stored: iterations outside 4096..16384, an empty
    salt or user name."""


class InvalidUpdateVersionError(KafkaError, code=95):
    """An AlterPartition whose partition epoch is older than the controller's."""


class UnknownTopicIdError(KafkaError, code=100): ...


class DuplicateBrokerRegistrationError(KafkaError, code=101): ...


class BrokerIdNotRegisteredError(KafkaError, code=102): ...


class InconsistentClusterIdError(KafkaError, code=104):
    """A broker registration that names another cluster id than the controller's."""


class TransactionalIdNotFoundError(KafkaError, code=105):
    """DescribeTransactions of a transactional id its coordinator does not know."""


class FetchSessionTopicIdError(KafkaError, code=106):
    """A fetch session opened with topic names used with topic ids, or the other way round."""


class IneligibleReplicaError(KafkaError, code=107):
    """A proposed ISR member that is unregistered, fenced, shutting down or of another epoch."""


class NewLeaderElectedError(KafkaError, code=108):
    """The AlterPartition applied, but completing a reassignment moved leadership away."""


class FencedMemberEpochError(KafkaError, code=110):
    """A consumer-protocol member whose epoch the group no longer accepts: it must give up its
    partitions and rejoin with epoch 0."""


class UnreleasedInstanceIdError(KafkaError, code=111):
    """A static member joining with a group.instance.id another member still holds."""


class UnsupportedAssignorError(KafkaError, code=112):
    """A consumer-protocol member naming a server assignor the coordinator does not have."""


class StaleMemberEpochError(KafkaError, code=113):
    """An offset commit or fetch of a consumer-protocol member with another epoch than its
    current one."""


class InvalidRegularExpressionError(KafkaError, code=128):
    """A subscription regular expression that does not compile."""


# --- Storage errors without their own wire code ------------------------------------------------
# Kafka reports these as KAFKA_STORAGE_ERROR or UNKNOWN_SERVER_ERROR on the wire; locally they
# keep a precise type so callers (the follower fetcher, recovery) can react to each.


class UnexpectedAppendOffsetError(UnknownServerError):
    """A follower append whose first offset is not the log end offset (a gap or an overlap)."""


class OffsetsOutOfOrderError(UnknownServerError):
    """Batches whose offsets do not strictly increase."""


class NodeStoppingError(RequestTimedOutError):
    """A request a node had queued for its Raft loop, failed at once because the node stopped
    before running it (nothing of it was written). On the wire REQUEST_TIMED_OUT, as
    Kafka's controller answers the events its queue drops at shutdown: the caller asks
    another node."""


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


class AuthorizerNotReadyError(UnknownServerError):
    """An authorization asked before the broker's authorizer loaded the ACLs of the metadata
    log (Kafka's AuthorizerNotReadyException, which has no wire code of its own); super users
    are answered regardless."""


class InvalidAclError(InvalidRequestError):
    """An ACL that cannot be stored or asked about: a filter value (UNKNOWN, ANY, MATCH) where
    a stored ACL needs a concrete one, an empty resource name, a principal that is not
    "Type:name". The message names the field."""


class MalformedRequestError(InvalidRequestError):
    """A request whose bytes are not a request of its kind: a frame on a framed connection
    (`metadata_append_wire`) that does not parse as its protobuf message. The message names
    the request and what was wrong. It keeps INVALID_REQUEST's code, as Kafka answers a
    request it cannot parse; not retriable, since the same bytes are refused again.
    """


# --- Local-only errors -------------------------------------------------------------------------


class InvalidCertificateError(ReplogError):
    """A peer certificate whose DER bytes cannot be read for its subject; the message names the
    element that is wrong."""


class NoMatchingPrincipalRuleError(ReplogError):
    """A certificate subject no `ssl.principal.mapping.rules` rule maps (Kafka's NoMatchingRule):
    the connection cannot be given a principal. The message names the subject and the rules."""


class CorruptCheckpointError(ReplogError):
    """A checkpoint file that cannot be parsed; the message names file, line and reason."""


class CorruptProducerSnapshotError(ReplogError):
    """A producer-state snapshot file that fails its checks; the message names the file and
    what is wrong (the replica deletes it and replays the log instead)."""


class CorruptIndexError(ReplogError):
    """An offset or time index that fails its sanity check; the message names the file."""


class CommitFailedError(ReplogError):
    """A group member's commit refused because the group rebalanced past its generation
    (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID): its partitions may be another
    member's now (Kafka's CommitFailedException)."""


class CleaningProcessError(ReplogError):
    """The log cleaner's child process failed a pass (an exception in it); the message names
    the log and the child's error. The log is marked uncleanable, as for a pass in a thread."""


class CleaningProcessGoneError(ReplogError):
    """The log cleaner's child process is gone (exited, killed, or it did not stop when asked)
    in the middle of a pass; the message names the log and the exit status. The pass is
    abandoned; the log stays cleanable and the next pass starts another child."""


class ConfigError(ReplogError):
    """A configuration value that is unknown, malformed or out of range; names the key."""


class WorkloadError(ReplogError):
    """A benchmark workload file (`replog bench`) that cannot be run: unreadable, not YAML, or
    a field missing, unknown, of the wrong type or out of range. `field` names the field
    ("" for the file as a whole); the message names the file and the field."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_workload_error, (str(self), self.field))


def _rebuild_workload_error(message: str, field: str) -> WorkloadError:
    return WorkloadError(message, field=field)


class BenchSystemError(ReplogError):
    """A system `replog bench` compares that could not be started, set up or stopped; the
    message names the system, what failed and where its logs are."""


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
    """A call on a Producer, Consumer or Admin after `close()` (or while it closes).

    For a record a closing producer gave up on, `maybe_written` says whether it had been sent
    (its answer lost or not come yet: it may be in the log) or never left the producer."""

    def __init__(self, *args: object, maybe_written: bool = False) -> None:
        super().__init__(*args)
        self.maybe_written = maybe_written


class NoOpenTransactionError(ReplogError):
    """No producer has an open transaction starting at the offset given (`replog transactions
    abort --start-offset`): the message names the offset and the partition."""


class IllegalStateError(ReplogError):
    """A call that the client's state does not allow (poll without assignment or subscription,
    seek on a partition not assigned, subscribe after assign)."""


class TransactionStateError(IllegalStateError):
    """A transactional producer's call its transaction state does not allow (a send outside a
    transaction, a commit without begin_transaction, init_transactions twice): names the call
    and the state (Kafka's IllegalStateException from its TransactionManager)."""


class TransactionAbortedError(ReplogError):
    """A record of a transaction that `abort_transaction` aborted before it was sent (Kafka's
    TransactionAbortedException): it was never written."""


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


class KafkaConnectionError(ReplogError):
    """A Kafka client connection that broke the protocol so that the broker closes it: a
    request header that does not decode, an API key or version the listener does not serve, a
    request body that does not decode (Kafka's broker closes such connections too). Names the
    peer and the cause."""

    def __init__(self, peer: str, cause: str) -> None:
        super().__init__(f"{peer}: {cause}")
        self.peer = peer
        self.cause = cause

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.peer, self.cause))


class InvalidFrameSizeError(KafkaConnectionError):
    """A frame whose int32 size prefix is negative or above `socket.request.max.bytes` (Kafka's
    InvalidReceiveException): nothing after it can be framed, so the connection closes."""


class NotAKafkaListenerError(ReplogError):
    """The address a client was given answered, and not as a Kafka listener: a gRPC (HTTP/2)
    server such as a replog node's internal listener, an HTTP server such as its metrics
    endpoint, or a peer that closed without answering ApiVersions. Retrying cannot help, so
    it is not retriable; the message names the address and what answered."""


class SecurityProtocolMismatchError(NotAKafkaListenerError):
    """A Kafka listener of another security protocol than the client's `security.protocol`: a
    TLS (SSL) listener spoken to in plaintext, or a PLAINTEXT one spoken to with TLS, each
    found by a probe once the connection closed at its first bytes. The message names the
    address and the setting to change; not retriable."""


class SslAuthenticationError(ReplogError):
    """A TLS handshake that failed on a certificate (Kafka's SslAuthenticationException): the
    broker's is not trusted, has expired or does not name the host dialled, or the broker
    refused this client's. The message names the address, what OpenSSL said and the setting
    that decides it; not retriable."""


class RequestRefusedError(ReplogError):
    """A request a Kafka listener's handler refuses as a whole, where the gRPC service would
    abort the call with a status (acks=0 produce that failed, a partition named twice, a
    broker not serving data yet): the connection closes, as Kafka's broker closes it, and the
    message says which request and why."""


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


class GenericKafkaError(KafkaError):
    """A Kafka error code replog neither raises nor handles by name (a transaction, share-group
    or authentication code, say): each such code of the table has its own subclass, built at
    import and named as kafka-python names it, carrying the code, name and retriable flag. It
    pickles by code and message, as its class is not a module attribute."""

    def __reduce__(self) -> tuple[object, ...]:
        return (error_for_code, (self.code, str(self)))


def _generic_class(spec: ErrorSpec) -> type[KafkaError]:
    def body(namespace: dict[str, Any]) -> None:
        namespace["__module__"] = __name__
        namespace["__doc__"] = spec.message

    return types.new_class(_class_name(spec.name), (GenericKafkaError,), {"code": spec.code}, body)


for _spec in KAFKA_ERRORS:
    if _spec.code not in _BY_CODE:
        _generic_class(_spec)


def wire_error_classes() -> dict[int, type[KafkaError]]:
    """Every registered wire error class by its code (a copy)."""
    return dict(_BY_CODE)
