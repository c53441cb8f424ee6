"""The counters and histograms one node's hot paths update, on the node's own registry.

Rules:
- Each node owns a `CollectorRegistry`; nothing here touches prometheus_client's global
  `REGISTRY`, so several nodes (or replica managers in tests) in one process never collide.
- Names follow docs/design/clients.md#metric-names: base units (seconds, bytes), counters end in
  `_total`.
- Hot paths call plain methods here once per request or per batch (never per record). A
  labelled child is looked up once per label value and cached in a dict (`labels()` validates
  and locks on every call; a dict lookup does not).
- Counter children of a deleted topic stay until the process ends (a counter must not go back);
  topics are few, so this bounds nothing worth bounding.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from replog.kafka.connection import api_name

# Request and commit latencies on loopback run from ~100 µs to seconds (a timeout).
# Fine around the 100 ms a node's loop may stall at most (docs/benchmarks.md, "Partition
# creation and restart").
STALL_BUCKETS_S = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class _PerTopic:
    """A counter labelled by topic, with its children cached per topic."""

    __slots__ = ("_children", "_counter")

    def __init__(self, counter: Counter) -> None:
        self._counter = counter
        self._children: dict[str, Counter] = {}

    def inc(self, topic: str, amount: int) -> None:
        child = self._children.get(topic)
        if child is None:
            child = self._children[topic] = self._counter.labels(topic=topic)
        child.inc(amount)


class BrokerCounters:
    """What the broker's data plane counts (`ReplicaManager` calls these)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # A private registry when none is given: a replica manager built by a test counts
        # into a registry nobody scrapes, with no branch on the hot path.
        self.registry = registry if registry is not None else CollectorRegistry()
        self._bytes_in = _PerTopic(
            Counter(
                "replog_bytes_in",
                "Bytes of record batches appended as leader (produce), by topic",
                ["topic"],
                registry=self.registry,
            )
        )
        self._messages_in = _PerTopic(
            Counter(
                "replog_messages_in",
                "Records appended as leader (produce), by topic",
                ["topic"],
                registry=self.registry,
            )
        )
        self._bytes_out = _PerTopic(
            Counter(
                "replog_bytes_out",
                "Bytes of record batches sent to consumers (fetches not from followers), by topic",
                ["topic"],
                registry=self.registry,
            )
        )
        self.replication_bytes_in = Counter(
            "replog_replication_bytes_in",
            "Bytes of record batches a follower fetched from partition leaders",
            registry=self.registry,
        )
        # Counted when the leader learns a committed ISR change (its AlterPartition answer or
        # the metadata, whichever comes first), by the ISR's size.
        self.isr_shrinks = Counter(
            "replog_isr_shrinks",
            "Committed ISR shrinks of partitions this broker leads",
            registry=self.registry,
        )
        self.isr_expands = Counter(
            "replog_isr_expands",
            "Committed ISR expansions of partitions this broker leads",
            registry=self.registry,
        )

        # One per refused answer: a follower fetching a batch that fails its CRC refuses it and
        # fetches it again after replica.fetch.backoff.ms, for as long as the leader serves it.
        self.follower_corrupt_fetches = Counter(
            "replog_follower_corrupt_fetch",
            "Fetch answers a follower refused because a batch from the leader was corrupt "
            "(CRC-32C or framing), by partition",
            ["topic", "partition"],
            registry=self.registry,
        )

    def produced(self, topic: str, size_bytes: int, records: int) -> None:
        """One partition's batches appended as leader."""
        self._bytes_in.inc(topic, size_bytes)
        self._messages_in.inc(topic, records)

    def sent(self, topic: str, size_bytes: int) -> None:
        """One partition's records in a consumer's fetch answer."""
        self._bytes_out.inc(topic, size_bytes)

    def follower_corrupt_fetch(self, topic: str, partition: int) -> None:
        """A follower refused a corrupt batch of this partition from its leader (rare: no
        cached child)."""
        self.follower_corrupt_fetches.labels(topic=topic, partition=str(partition)).inc()

    def isr_changed(self, old_size: int, new_size: int) -> None:
        """A committed ISR change of a partition this broker leads."""
        if new_size < old_size:
            self.isr_shrinks.inc()
        elif new_size > old_size:
            self.isr_expands.inc()


class NodeMetrics:
    """The registry of one node and every instrument updated outside scrapes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.broker = BrokerCounters(self.registry)
        self.requests = Counter(
            "replog_requests",
            "gRPC requests served, by service, method and status code",
            ["service", "method", "code"],
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "replog_request_duration_seconds",
            "Time from a gRPC request's arrival to its answer, by service and method",
            ["service", "method"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        # Kafka's RequestsPerSec and TotalTimeMs per API, minus the network: from a request's
        # read to its answer being ready (a Fetch's long-poll wait included; the wait behind an
        # earlier answer of the same connection not).
        self.kafka_request_duration = Histogram(
            "replog_kafka_request_duration_seconds",
            "Time from a Kafka listener request's arrival to its answer, by API",
            ["api"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self._kafka_request_children: dict[int, Histogram] = {}
        # Kafka's failed-authentication-total, per listener and mechanism.
        self.failed_authentications = Counter(
            "replog_failed_authentication",
            "SASL authentications that failed on a Kafka listener (wrong password, unknown "
            "user or mechanism, a request out of order) and TLS handshakes that failed on the "
            "internal listener (mechanism SSL), by listener and mechanism",
            ["listener", "mechanism"],
            registry=self.registry,
        )
        self.event_loop_stall = Histogram(
            "replog_event_loop_stall_seconds",
            "How much later than asked the node's event loop ran a 10 ms timer: the stall "
            "every request, Raft fetch and heartbeat on that loop saw",
            buckets=STALL_BUCKETS_S,
            registry=self.registry,
        )
        self.raft_commit_latency = Histogram(
            "replog_raft_commit_latency_seconds",
            "Metadata log: time from the leader's append of a batch to its commit",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

    def kafka_request(self, api_key: int, seconds: float) -> None:
        """One Kafka listener request of API `api_key` answered in `seconds`."""
        child = self._kafka_request_children.get(api_key)
        if child is None:
            child = self.kafka_request_duration.labels(api_name(api_key))
            self._kafka_request_children[api_key] = child
        child.observe(seconds)

    def failed_authentication(self, listener: str, mechanism: str) -> None:
        """One failed SASL attempt on Kafka listener `listener` ("" before a mechanism), or
        one failed TLS handshake on the internal listener (mechanism "SSL")."""
        self.failed_authentications.labels(listener=listener, mechanism=mechanism or "none").inc()
