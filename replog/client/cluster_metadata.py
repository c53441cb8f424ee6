"""`ClusterMetadata`: a client's view of the cluster (brokers, partitions, leaders), kept fresh.

Asked with Kafka's Metadata request of any broker's Kafka listener; it lives on the client's
event loop.

Where it asks, in order, until one broker answers (one "pass"): the broker that answered
last, then the brokers the cluster advertised in its last answer, then `bootstrap.servers`;
an address whose last attempt failed goes after all the others (as Kafka's leastLoadedNode
passes over a node it lost): a hung broker (SIGSTOP, a frozen VM) answers nothing until the
request times out, and asked first it would take every pass's whole budget, so that the client
never learned the partitions' new leaders while it hangs. A broker whose produce or fetch
timed out or broke (`distrust`) goes after the brokers in good standing, though before those
that failed, until it answers a pass that started after it was distrusted: it may be a leader
cut off from the cluster, which answers Metadata promptly with its own stale view (itself as
the leader) and would keep the client sending to it for as long as the partition lasts
(Kafka's client closes a connection whose request timed out, and its leastLoadedNode then
picks another node). A pass already under way when the metadata is marked stale or a broker
distrusted leaves the metadata stale (Kafka's update request version): its answer may come
from that very broker.

A pass in which nobody answers raises NoBrokersAvailableError naming every address tried,
how many times in a row it failed and its last cause ("no broker reachable at
127.0.0.1:9092 after 3 attempts: connection refused"). After a failed pass the next one waits
`retry.backoff.ms`, doubling up to `retry.backoff.max.ms`; a good answer resets that.

Refused from the start: while no broker has ever answered and every address asked refuses
the connection, the refusal is known at the first attempt (logged at WARNING then, once per
address) and lasts: once it has lasted `socket.connection.setup.timeout.max.ms` (Kafka's
name; default 30 s), `partitions_for` raises NoBrokersAvailableError naming the addresses and
"connection refused" instead of waiting out its own deadline (max.block.ms, 60 s). A pass is
made at that moment whatever the backoff, so the call fails close to the timeout. Any other
outcome (an answer, a timeout, an address that accepts and says nothing) ends the spell.

Answers never move a partition back to an older leader epoch (KIP-320): an answer whose
leader epoch for a partition is below the newest seen keeps the state seen with that epoch,
unless the topic's id changed (both known and different: the topic was deleted and created
again). Brokers catch up on metadata at different times, and a lagging or cut-off one still
names the old leader. The newest state seen per partition outlives answers that leave the
topic out or call it unknown (a lagging broker may not know it yet), as Kafka keeps its last
seen leader epochs; an answer that lists fewer partitions than known is taken as it is.

What it asks for: the topics the client has used (`refresh(topics)` and `partitions_for` add to
that set; Kafka's producer and consumer also ask only for their topics). Before any topic is
known, a refresh asks for every topic (the wire's empty list).

When it asks:
- `partitions_for(topic)` of a topic not known yet refreshes, and retries failed passes until
  its deadline; a broker's answer that the topic does not exist raises
  UnknownTopicOrPartitionError ("topic 'x' does not exist") at once instead of waiting (the
  complaint about clients that block on a missing topic); at the deadline KafkaTimeoutError
  names the last cause. For a producer's send a topic this client has seen is different
  (`wait_for_seen_topic`): an answer calling it unknown comes from a broker that has not caught
  up on the metadata log (restarting, lagging), so it is retried until the deadline, as Kafka's
  producer waits up to max.block.ms (else, after a whole-cluster restart, sends to an existing
  topic would fail by the thousand). A consumer keeps the answer at once: it drops
  the partitions and keeps their positions for the topic's return (its "blip" rule).
- A known topic is refreshed when the metadata is stale (`request_update`, after
  NOT_LEADER_OR_FOLLOWER and the like) or older than `metadata.max.age.ms` (checked lazily on
  use). If that refresh fails, or failed a moment ago and is backing off, the cached partitions
  are returned: a stale leader only earns another NOT_LEADER, whereas waiting would block
  every send on a dead broker.
- Concurrent callers share one refresh in flight when it covers their topics. A caller that
  gives up (its deadline, cancellation) does not cancel the shared refresh, nor does its
  deadline bound the refresh's calls (`request.timeout.ms` does).

Connection failures are logged at WARNING once per change of an address's state (reachable ->
unreachable and back), not once per attempt, in a few words ("connection refused", "no answer
(connection timed out)", "host name not found").

Not a Kafka listener: an address that answers as something else (a gRPC listener, an HTTP
server: `NotAKafkaListenerError`, a listener of the other security protocol among them), or
whose TLS handshake fails on a certificate (`SslAuthenticationError`), is no broker to retry.
While no broker has answered, a pass in which every address asked was one raises that error
itself, naming what answered, instead of retrying until the caller's deadline. A
`partitions_for` still waiting after 5 s says so (`wait_notice`), then every 10 s: the topic,
the last cause (naming the addresses tried) and the time it retries until.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replog.client.connections import Connections
from replog.client.tls_connection import client_ssl_context
from replog.client.wait_notice import WaitNotice, waited_text, wall_time_of
from replog.clock import Clock, monotonic_ms
from replog.common import TopicPartition
from replog.errors import (
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
    MalformedResponseError,
    NetworkError,
    NoBrokersAvailableError,
    NotAKafkaListenerError,
    ReplogError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.kafka.protocol.codec import ZERO_UUID
from replog.net_address import format_host_port
from replog.topic_names import check_topic_name

if TYPE_CHECKING:
    from replog.client.config import AdminConfig, ConsumerConfig, ProducerConfig

log = logging.getLogger("replog.client")

NO_LEADER = -1
REFUSED = "connection refused"  # `_short_cause` of a refused connection


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: no leader now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass
class _Refresh:
    topics: frozenset[str] | None  # None: every topic
    task: asyncio.Task[None]

    def covers(self, wanted: frozenset[str] | None) -> bool:
        """Whether this pass answers for `wanted` (None: every topic)."""
        if self.topics is None:
            return True
        return wanted is not None and wanted <= self.topics


@dataclass
class _AddressState:
    failures: int = 0  # failed attempts in a row
    cause: str = ""


class ClusterMetadata:
    """The cluster as the brokers last described it (module docstring)."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        connections: Connections,
        *,
        metadata_max_age_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        request_timeout_ms: int,
        connection_setup_timeout_ms: int = 30_000,
        clock: Clock = monotonic_ms,
    ) -> None:
        if not bootstrap:
            raise ValueError("bootstrap.servers is empty")
        self.bootstrap = tuple(bootstrap)
        self._connections = connections
        self._owns_connections = False  # True when `for_client` made them
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.request_timeout_ms = request_timeout_ms
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self.clock = self._clock = clock  # the client's clock, which its other parts share

        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self._brokers: dict[int, str] = {}
        self._racks: dict[int, str] = {}  # broker id -> broker.rack, for those that have one
        self._topics: dict[str, tuple[PartitionState, ...]] = {}
        self._by_tp: dict[TopicPartition, PartitionState] = {}
        self._topic_errors: dict[str, KafkaError] = {}  # what the last answer said of a topic
        # topic -> (topic id, partition -> the state with the newest leader epoch seen)
        self._newest: dict[str, tuple[bytes, dict[int, PartitionState]]] = {}
        self._wanted: set[str] = set()

        self._last_good: str | None = None
        self._updated_ms: int | None = None  # when the last good answer came
        self._stale = False
        self._version = 0  # bumped by request_update and distrust (module docstring)
        self._failed_passes = 0
        self._next_pass_ms = 0  # no pass before this (backoff after failed passes)
        self._last_failure: NoBrokersAvailableError | None = None
        # when every address began refusing, before any broker answered (module docstring)
        self._refused_since_ms: int | None = None
        self._addresses: dict[str, _AddressState] = {}
        self._distrusted: set[str] = set()  # asked after the others (module docstring)
        self._inflight: _Refresh | None = None
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def for_client(
        cls, config: ProducerConfig | ConsumerConfig | AdminConfig, clock: Clock = monotonic_ms
    ) -> ClusterMetadata:
        """The metadata of a Producer, Consumer or Admin built from `config`, over new
        `Connections` (`self.connections`) with the config's client id and request timeout;
        they are its own, so `close` closes them too."""
        connections = Connections(
            request_timeout_ms=config.request_timeout_ms,
            client_id=config.client_id,
            setup_timeout_ms=config.socket_connection_setup_timeout_ms,
            sasl=config.sasl,
            tls=client_ssl_context(config),
        )
        metadata = cls(
            config.bootstrap_servers,
            connections,
            metadata_max_age_ms=config.metadata_max_age_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            request_timeout_ms=config.request_timeout_ms,
            connection_setup_timeout_ms=config.socket_connection_setup_timeout_max_ms,
            clock=clock,
        )
        metadata._owns_connections = True
        return metadata

    @property
    def connections(self) -> Connections:
        """The connections this metadata asks brokers over."""
        return self._connections

    # --- reading what is known -----------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        """The topics whose partitions are known."""
        return frozenset(self._topics)

    def partition(self, tp: TopicPartition) -> PartitionState | None:
        return self._by_tp.get(tp)

    def cached_partitions(self, topic: str) -> tuple[PartitionState, ...] | None:
        """The partitions of `topic` as last known, without refreshing (None: unknown)."""
        return self._topics.get(topic)

    def topic_id(self, topic: str) -> bytes | None:
        """The id of `topic` as last seen in any answer (None: never seen with one); it
        outlives answers that leave the topic out or call it unknown, as its newest partition
        states do."""
        known = self._newest.get(topic)
        return known[0] or None if known is not None else None

    def broker_address(self, node_id: int) -> str | None:
        return self._brokers.get(node_id)

    def replica_racks(self, state: PartitionState) -> frozenset[str]:
        """The racks of a partition's replicas, as the brokers advertise them (those without
        a rack, or not known, add none)."""
        return frozenset(self._racks[r] for r in state.replicas if r in self._racks)

    def brokers(self) -> dict[int, str]:
        """The live (unfenced) brokers as last advertised: id -> host:port (a copy)."""
        return dict(self._brokers)

    def add_listener(self, fn: Callable[[], None]) -> None:
        """Call `fn()` after each successful refresh (on the loop)."""
        self._listeners.append(fn)

    def request_update(self) -> None:
        """Mark the metadata stale: the next use refreshes it."""
        self._stale = True
        self._version += 1

    def distrust(self, address: str) -> None:
        """A produce or fetch to the broker at `address` timed out or broke: mark the metadata
        stale, and ask the brokers in good standing before this one until it answers a pass
        started after now (module docstring: it may be a leader cut off from the cluster).
        Only the order changes: it is still asked when the others do not answer."""
        self.request_update()
        self._distrusted.add(address)
        if self._last_good == address:
            self._last_good = None

    @property
    def update_requested(self) -> bool:
        """Whether it was marked stale (`request_update`, `distrust`) and no pass started
        since has answered."""
        return self._stale

    def needs_refresh(self) -> bool:
        if self._stale or self._updated_ms is None:
            return True
        return self._clock() - self._updated_ms >= self.metadata_max_age_ms

    # --- asking ----------------------------------------------------------------------------------

    async def partitions_for(
        self,
        topic: str,
        *,
        deadline_ms: int,
        wait_for_seen_topic: bool = False,
        deadline_name: str = "",
    ) -> tuple[PartitionState, ...]:
        """The partitions of `topic`, refreshing first if unknown or stale (module docstring).

        `wait_for_seen_topic` (a producer's send): an answer calling a topic seen before
        unknown is retried until the deadline instead of raised. `deadline_name` names the
        setting the deadline comes from ("max.block.ms=60000") in the wait's notices."""
        check_topic_name(topic)
        self._wanted.add(topic)
        known = self._topics.get(topic)
        if known is not None and not self.needs_refresh():
            return known
        causes: list[ReplogError] = []  # the last cause of a failed attempt
        notice = WaitNotice(
            lambda waited_ms: self._wait_text(topic, waited_ms, deadline_ms, deadline_name, causes),
            log,
        )
        with notice:
            return await self._partitions_for(topic, deadline_ms, wait_for_seen_topic, causes)

    def _wait_text(
        self,
        topic: str,
        waited_ms: int,
        deadline_ms: int,
        deadline_name: str,
        causes: list[ReplogError],
    ) -> str:
        """What a `partitions_for` that has waited `waited_ms` waits for (module docstring)."""
        now_ms = self._clock()
        until_ms = deadline_ms
        if self._refused_since_ms is not None:
            until_ms = min(until_ms, self._refused_since_ms + self.connection_setup_timeout_ms)
            deadline_name = (
                f"socket.connection.setup.timeout.max.ms={self.connection_setup_timeout_ms}"
            )
        if causes:
            cause = str(causes[-1])
        else:
            cause = "no answer yet from " + ", ".join(self._addresses_to_try())
        named = f" ({deadline_name})" if deadline_name else ""
        return (
            f"waiting {waited_text(waited_ms)} for metadata of topic {topic!r}: {cause}; "
            f"retrying until {wall_time_of(until_ms, now_ms)}{named}"
        )

    async def _partitions_for(
        self, topic: str, deadline_ms: int, wait_for_seen_topic: bool, causes: list[ReplogError]
    ) -> tuple[PartitionState, ...]:
        last_cause: ReplogError | None = None
        while True:
            known = self._topics.get(topic)
            if known is not None and not self.needs_refresh():
                return known
            if known is not None and self._clock() < self._next_pass_ms:
                return known  # backing off after a failed pass: the cache will do
            try:
                await self.refresh([topic], deadline_ms=deadline_ms)
            except (NoBrokersAvailableError, KafkaTimeoutError) as exc:
                if known is not None:
                    return known
                refused = self._refused_for_good()
                if refused is not None:
                    raise refused from None
                last_cause = self._last_failure or exc
                causes.append(last_cause)
            else:
                error = self._topic_errors.get(topic)
                if isinstance(error, UnknownTopicOrPartitionError) and not (
                    wait_for_seen_topic and topic in self._newest
                ):
                    raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
                if error is not None:
                    last_cause = error
                    causes.append(error)
                    if not error.retriable:
                        raise error
                found = self._topics.get(topic)
                if found is not None:
                    return found
            now = self._clock()
            if now >= deadline_ms:
                cause = f": {last_cause}" if last_cause is not None else ""
                raise KafkaTimeoutError(
                    f"metadata for topic {topic!r} not available within the deadline{cause}"
                )
            wait_ms = max(self._next_pass_ms - now, 0) or self.retry_backoff_ms
            if self._refused_since_ms is not None:  # look again when the refusal times out
                refused_end_ms = self._refused_since_ms + self.connection_setup_timeout_ms
                wait_ms = min(wait_ms, max(refused_end_ms - now, 1))
            await asyncio.sleep(min(wait_ms, deadline_ms - now) / 1000)

    async def refresh(
        self, topics: Iterable[str] | None = None, *, deadline_ms: int, every_topic: bool = False
    ) -> None:
        """Ask a broker for the metadata of `topics` and of every topic used so far, or with
        `every_topic` of every topic the cluster has.

        Raises NoBrokersAvailableError when no broker answered in one pass over the addresses,
        KafkaTimeoutError when the deadline passes first (naming the last cause)."""
        wanted: frozenset[str] | None = None if every_topic else frozenset(topics or ())
        self._wanted |= wanted or frozenset()
        while True:
            inflight = self._inflight
            if inflight is not None and inflight.covers(wanted):
                await self._wait(inflight.task, deadline_ms)
                return
            if inflight is not None:
                # It asks for less than we need: wait for it, then ask for everything.
                with contextlib.suppress(NoBrokersAvailableError):
                    await self._wait(inflight.task, deadline_ms)
                # It is done, but its done callback, which forgets it, may not have run yet (a
                # caller woken in the loop turn the pass ended in): awaiting a done task does
                # not yield, so waiting for it again would spin without the loop ever running.
                self._pass_done(inflight.task)
                continue
            wait_ms = self._next_pass_ms - self._clock()
            if wait_ms > 0:
                if self._clock() + wait_ms > deadline_ms:
                    raise self._timeout("metadata refresh")
                await asyncio.sleep(wait_ms / 1000)
                continue  # another caller may have started a pass meanwhile
            asked = None if every_topic else (frozenset(self._wanted) or None)
            # The pass is shared: its calls are bounded by request.timeout.ms, not by the
            # deadline of whoever started it (an impatient starter would otherwise cut the
            # refresh short for every caller waiting on it).
            pass_deadline_ms = max(deadline_ms, self._clock() + self.request_timeout_ms)
            task = asyncio.get_running_loop().create_task(self._pass(asked, pass_deadline_ms))
            task.add_done_callback(self._pass_done)
            self._inflight = _Refresh(asked, task)
            await self._wait(task, deadline_ms)
            return

    def _pass_done(self, task: asyncio.Task[None]) -> None:
        if self._inflight is not None and self._inflight.task is task:
            self._inflight = None
        if not task.cancelled():
            task.exception()  # retrieved: the callers that waited have raised it themselves

    async def _wait(self, task: asyncio.Task[None], deadline_ms: int) -> None:
        """Wait for a (shared) pass without cancelling it when this caller gives up."""
        remaining_ms = deadline_ms - self._clock()
        if remaining_ms <= 0 and not task.done():
            raise self._timeout("metadata refresh")
        try:
            async with asyncio.timeout(max(remaining_ms, 0) / 1000):
                await asyncio.shield(task)
        except TimeoutError:
            raise self._timeout("metadata refresh") from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                raise ClientClosedError("the client closed during a metadata refresh") from None
            raise

    def _timeout(self, what: str) -> KafkaTimeoutError:
        cause = f": {self._last_failure}" if self._last_failure is not None else ""
        return KafkaTimeoutError(f"{what} did not finish within the deadline{cause}")

    async def close(self) -> None:
        """Cancel a refresh in flight; close the connections if `for_client` made them."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None and not inflight.task.done():
            inflight.task.cancel()
            await asyncio.gather(inflight.task, return_exceptions=True)
        if self._owns_connections:
            await self._connections.close()

    # --- one pass over the addresses -------------------------------------------------------------

    def addresses_to_try(self) -> list[str]:
        """Every address known, in the order a metadata pass asks them (module docstring):
        for other requests any broker can answer."""
        return self._addresses_to_try()

    def _addresses_to_try(self) -> list[str]:
        first = [self._last_good] if self._last_good is not None else []
        addresses = dict.fromkeys([*first, *self._brokers.values(), *self.bootstrap])
        # Stable: the order above is kept within each rank.
        return sorted(addresses, key=lambda a: (self._failed_last_time(a), a in self._distrusted))

    def _failed_last_time(self, address: str) -> bool:
        state = self._addresses.get(address)
        return state is not None and state.failures > 0

    def _refused_for_good(self) -> NoBrokersAvailableError | None:
        """The error once every address has refused for the connection setup timeout
        (module docstring); None before."""
        since = self._refused_since_ms
        if since is None:
            return None
        lasted_ms = self._clock() - since
        if lasted_ms < self.connection_setup_timeout_ms:
            return None
        addresses = ", ".join(self._addresses_to_try())
        return NoBrokersAvailableError(
            f"no broker reachable at {addresses}: connection refused, at every attempt for "
            f"{lasted_ms} ms (socket.connection.setup.timeout.max.ms="
            f"{self.connection_setup_timeout_ms}): is the cluster running, and is "
            "bootstrap.servers right?"
        )

    def _note_refusals(self, tried: Sequence[str], started_ms: int) -> None:
        """After a failed pass: start or end the spell of refusals (module docstring)."""
        refused = (
            self._updated_ms is None
            and bool(tried)
            and all(self._addresses[a].cause == REFUSED for a in tried)
        )
        if not refused:
            self._refused_since_ms = None
            return
        if self._refused_since_ms is None:
            self._refused_since_ms = started_ms
        # The pass that decides comes when the timeout ends, not a backoff later.
        end_ms = self._refused_since_ms + self.connection_setup_timeout_ms
        self._next_pass_ms = min(self._next_pass_ms, max(end_ms, self._clock()))

    async def _pass(self, topics: frozenset[str] | None, deadline_ms: int) -> None:
        version = self._version
        started_ms = self._clock()
        tried: list[str] = []
        not_kafka: list[NotAKafkaListenerError | SslAuthenticationError] = []
        for address in self._addresses_to_try():
            remaining_ms = deadline_ms - self._clock()
            if remaining_ms <= 0:
                break
            tried.append(address)
            try:
                answer = await self._connections.broker(address).metadata(
                    sorted(topics) if topics is not None else None,
                    timeout_ms=min(self.request_timeout_ms, remaining_ms),
                )
            except (NotAKafkaListenerError, SslAuthenticationError) as exc:
                not_kafka.append(exc)
                self._address_failed(address, str(exc))
                continue
            except MalformedResponseError as exc:  # not a replog broker: try the others
                # Kafka's NetworkClient closes a connection whose bytes are no response: the
                # next attempt dials afresh (the address may belong to a new process by then).
                self._connections.redial(address)
                self._address_failed(address, str(exc))
                continue
            except (
                ClientClosedError,
                SaslAuthenticationFailedError,
                UnsupportedSaslMechanismError,
            ):
                raise  # a refused sign-in is not retried, as Kafka's client does not retry it
            except ReplogError as exc:
                self._address_failed(address, _short_cause(exc))
                continue
            if answer.error_code != 0:
                error = error_for_code(answer.error_code)
                self._address_failed(address, f"{error.error_name}: {error}")
                continue
            self._address_answered(address, version)
            self._apply(answer, topics, version)
            return
        self._failed_passes += 1
        backoff_ms = min(
            self.retry_backoff_ms * 2 ** (self._failed_passes - 1), self.retry_backoff_max_ms
        )
        self._next_pass_ms = self._clock() + backoff_ms
        self._note_refusals(tried, started_ms)
        if not_kafka and len(not_kafka) == len(tried) and self._updated_ms is None:
            # One type for all (a TLS refusal everywhere stays one): else the general one.
            kind = type(not_kafka[0])
            if not all(type(exc) is kind for exc in not_kafka):
                kind = NotAKafkaListenerError
            raise kind("; ".join(str(exc) for exc in not_kafka))
        failure = NoBrokersAvailableError(self._failure_text(tried))
        self._last_failure = failure
        raise failure

    def _failure_text(self, tried: Sequence[str]) -> str:
        if not tried:
            return "no broker asked for metadata: the deadline had passed"

        def attempts(address: str) -> str:
            count = self._addresses[address].failures
            return f"{address} after {count} attempt{'s' if count != 1 else ''}"

        causes = {self._addresses[a].cause for a in tried}
        if len(causes) == 1:
            return f"no broker reachable at {', '.join(attempts(a) for a in tried)}: {causes.pop()}"
        return "no broker reachable: " + "; ".join(
            f"{attempts(a)}: {self._addresses[a].cause}" for a in tried
        )

    def _address_failed(self, address: str, cause: str) -> None:
        state = self._addresses.setdefault(address, _AddressState())
        if state.failures == 0 or state.cause != cause:
            retrying = ""
            if cause == REFUSED and self._updated_ms is None:
                retrying = (
                    f"; retrying for up to socket.connection.setup.timeout.max.ms="
                    f"{self.connection_setup_timeout_ms} ms"
                )
            # A new cause within a spell is for DEBUG: the waiter's notices name the latest.
            log.log(
                logging.WARNING if state.failures == 0 else logging.DEBUG,
                "broker at %s unreachable for metadata: %s%s",
                address,
                cause,
                retrying,
            )
        state.failures += 1
        state.cause = cause
        if self._last_good == address:
            self._last_good = None

    def _address_answered(self, address: str, version: int) -> None:
        """`address` answered a pass that started at `version`."""
        state = self._addresses.get(address)
        if state is not None and state.failures:
            log.info("broker at %s reachable again", address)
        self._addresses[address] = _AddressState()
        self._refused_since_ms = None
        if version == self._version:  # not distrusted while the pass was under way
            self._distrusted.discard(address)
        self._last_good = address  # first among its rank (`_addresses_to_try`)

    def _apply(self, answer: MetadataResponse, topics: frozenset[str] | None, version: int) -> None:
        """Take a pass's answer (`topics` as asked; the pass started at `version`)."""
        self.cluster_id = answer.cluster_id or None
        self.controller_id = max(answer.controller_id, -1)
        self._brokers = {b.node_id: format_host_port(b.host, b.port) for b in answer.brokers}
        self._racks = {b.node_id: b.rack for b in answer.brokers if b.rack is not None}
        if topics is None:  # an answer about every topic: the ones it omits are gone
            self._topics.clear()
            self._topic_errors.clear()
        for topic in answer.topics:
            name = topic.name
            if name is None:
                continue  # an answer about a topic id, which this client never asks
            if topic.error_code != 0:
                self._topics.pop(name, None)
                self._topic_errors[name] = error_for_code(topic.error_code)
                continue
            self._topic_errors.pop(name, None)
            states = tuple(
                PartitionState(
                    topic=name,
                    partition=p.partition_index,
                    leader=p.leader_id if p.leader_id >= 0 else NO_LEADER,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(p.offline_replicas),
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition_index)
            )
            topic_id = b"" if topic.topic_id == ZERO_UUID else topic.topic_id.bytes
            self._topics[name] = self._never_older(name, topic_id, states)
        self._by_tp = {s.topic_partition: s for states in self._topics.values() for s in states}
        self._updated_ms = self._clock()
        self._stale = version != self._version
        self._failed_passes = 0
        self._next_pass_ms = 0
        self._last_failure = None
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # one listener's bug must not stop metadata updates
                log.exception("a metadata listener failed")

    def _never_older(
        self, topic: str, topic_id: bytes, answered: tuple[PartitionState, ...]
    ) -> tuple[PartitionState, ...]:
        """KIP-320: `answered`, except each partition whose newest state seen has a newer
        leader epoch, which is kept; remembers the newest states. A topic id that changed
        (both known and different) starts afresh."""
        known_id, newest = self._newest.get(topic, (topic_id, {}))
        if topic_id and known_id and topic_id != known_id:
            newest = {}
        kept = []
        for state in answered:
            old = newest.get(state.partition)
            if old is not None and old.leader_epoch > state.leader_epoch:
                log.debug(
                    "%s: an answer names leader %d at leader epoch %d, older than the known %d "
                    "(leader %d): kept the known one",
                    state.topic_partition, state.leader, state.leader_epoch, old.leader_epoch,
                    old.leader,
                )  # fmt: skip
                state = old
            newest[state.partition] = state
            kept.append(state)
        self._newest[topic] = (topic_id or known_id, newest)
        return tuple(kept)


# How the resolver says a host name has no address (`socket.gaierror`, lower-cased).
_NAME_NOT_FOUND = (
    "name or service not known",
    "nodename nor servname",
    "no address associated",
    "temporary failure in name resolution",
)


def _short_cause(exc: ReplogError) -> str:
    """A few words for why an address gave no answer ("connection refused")."""
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, RequestTimedOutError):
        return "no answer in time"
    if isinstance(exc, NetworkError):
        if "refused" in lowered:
            return REFUSED
        if "within" in lowered and "socket.connection.setup.timeout.ms" in lowered:
            return "no answer (connection timed out)"
        if any(words in lowered for words in _NAME_NOT_FOUND):
            return "host name not found"
        if "reset" in lowered:
            return "connection reset"
    if isinstance(exc, UnsupportedVersionError):
        return text
    return f"{type(exc).__name__}: {text}"
