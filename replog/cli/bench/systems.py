"""The systems a benchmark compares: each starts a 3-node cluster on loopback, creates a run's
topics, names the driver and bootstrap servers clients use, and stops.

- `replog`: a local replog cluster (as `replog cluster start` makes, in the bench's work
  directory), driven by replog's own client through each broker's Kafka listener (`PLAINTEXT`,
  as `replog cluster start --kafka-base-port` makes it), as every client reaches it.
- `replog-kafka`: the same kind of cluster, driven by confluent-kafka through the same
  listeners.
- `kafka`: Apache Kafka 4.x in KRaft mode, started and stopped by `bench/kafka/kafka.sh` (which
  fetches its jars with Maven once), driven by confluent-kafka.
- `jetstream`: NATS JetStream (`replog.cli.bench.jetstream`), driven by a compiled Go driver.

Rules: every system runs 3 combined nodes (broker and controller), topics get replication
factor 3 and `min.insync.replicas=2`, and nothing fsyncs per message (both systems' default).
A system that cannot start raises `BenchSystemError` naming what failed and where its logs are;
a wait says what it waits for. With `server_cpus` (`pinning`), every server process of the
system runs on those CPUs. A run's topics are deleted after it (`delete_topics`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from replog.cli.bench.drivers import REPLICATION_FACTOR, TOPIC_CONFIGS
from replog.cli.bench.paced_polls import next_poll_s
from replog.cli.bench.pinning import pinned, taskset
from replog.cli.bench.processes import PYTHON_WORKER
from replog.cli.bench.wait_notice import WaitNotice
from replog.cli.cluster_command import STOP_TIMEOUT_S as CLUSTER_STOP_TIMEOUT_S
from replog.errors import BenchSystemError

if TYPE_CHECKING:
    from replog.cli.bench.controller_failover import Failover
    from replog.cli.bench.kafka_security import KafkaSecurity
    from replog.cli.local_cluster import LocalCluster, LocalNode

SYSTEMS = ("replog", "replog-kafka", "kafka", "jetstream", "etcd")
NODES = 3
START_TIMEOUT_S = 60.0
KAFKA_START_TIMEOUT_S = 600.0  # the first start fetches Kafka's jars with Maven
METADATA_TIMEOUT_S = 60.0
METADATA_ANSWER_S = 30.0  # one Metadata request of every topic (Kafka's protocol)
LEADERS_PER_S_AT_LEAST = 20.0  # partitions led per second on a loaded 2-core machine
CREATE_TIMEOUT_S = 900.0  # the least a creation is given, end to end (`create_timeout_s`)
# Partitions created end to end per second on a loaded 2-core machine: Kafka made 40/s at a
# load average of 38 (10,000 in 250 s), replog more.
CREATED_PER_S_AT_LEAST = 25.0
KAFKA_POLL_S = 0.2  # the shortest wait between two looks at Kafka's Metadata or disk
# Kafka's log.segment.delete.delay.ms (its default): a deleted partition's log is renamed
# `<topic>-<partition>.<id>-delete` and kept open (its file and index maps) that long.
KAFKA_FILE_DELETE_DELAY_S = 60.0
STOP_TIMEOUT_S = 30.0  # kafka.sh's wait per node before its SIGKILL
# replog's nodes: `replog cluster stop`'s bound, above a broker's 30 s controlled shutdown.
REPLOG_STOP_TIMEOUT_S = CLUSTER_STOP_TIMEOUT_S


class System(Protocol):
    name: str
    driver: str  # a name of drivers.DRIVERS, or "jetstream"
    bootstrap_servers: str
    program: Sequence[str]  # the driver program (`processes`' protocol)

    def start(self) -> None: ...
    def create_topics(self, names: Sequence[str], partitions: int) -> None: ...
    def delete_topics(self, names: Sequence[str]) -> None:
        """Delete a run's topics (best effort: a failure is printed, not raised)."""

    def kill_leader(self, topic: str) -> int:
        """SIGKILL the node leading `topic`'s partition 0; its node id."""

    def restart_killed(self) -> None:
        """Start the node `kill_leader` killed again and wait until the cluster is whole."""

    def stop(self) -> None: ...
    def server_pids(self) -> list[int]:
        """The running server processes (their CPU is metered during a run)."""

    def describe(self) -> dict[str, str]:
        """What the report records of the system: version, settings."""


class ControllerSystem(Protocol):
    """A system a controller run drives (replog's and Kafka's)."""

    def create_led(
        self, names: Sequence[str], partitions: int, per_request: int
    ) -> tuple[float, float]:
        """Create `names` (RF 3) in CreateTopics requests of `per_request` topics sent one
        after another. Returns once every replica of them is created and every partition led:
        the seconds from the first request until the last was answered, and until then (what
        the system does before its first request, replog's wait for its nodes' totals to
        settle, is in neither)."""

    def fail_controller(self, probe_topic: str) -> tuple[int, Failover]:
        """SIGKILL the active controller; time until a survivor answers a CreateTopics of
        `probe_topic` (`controller_failover`); the killed node and the timing.
        `restart_killed` starts it again."""


def make_system(
    name: str,
    work_dir: str,
    base_port: int,
    kafka_script: str | None,
    server_cpus: str | None = None,
) -> System:
    """`base_port`: the first of the ports the system's nodes listen on (each system takes
    base_port .. base_port + 299)."""
    directory = os.path.join(work_dir, name)
    if name in ("replog", "replog-kafka"):
        return ReplogSystem(name, directory, base_port, server_cpus)
    if name == "kafka":
        return KafkaSystem(directory, base_port, kafka_script, server_cpus)
    if name == "jetstream":
        from replog.cli.bench.jetstream import JetStreamSystem

        return JetStreamSystem(directory, base_port, server_cpus)
    if name == "etcd":
        from replog.cli.bench.etcd import EtcdSystem

        return EtcdSystem(directory, base_port, server_cpus)
    raise BenchSystemError(f"--systems: unknown system {name!r} (known: {', '.join(SYSTEMS)})")


# --- replog ---------------------------------------------------------------------------------------


class ReplogSystem:
    program: Sequence[str] = PYTHON_WORKER

    def __init__(
        self,
        name: str,
        directory: str,
        base_port: int,
        server_cpus: str | None = None,
        security: str = "plaintext",
    ) -> None:
        self.name = name
        self.driver = "replog" if name == "replog" else "confluent-kafka"
        self.server_cpus = server_cpus
        # "ssl": TLS on every listener, mutual TLS inside the cluster (`cluster start
        # --security ssl`); the bench dials the internal gRPC with the cluster's certificates.
        self.security = security
        self.directory = directory
        self.base_port = base_port
        self.bootstrap_servers = ""  # the brokers' Kafka listeners, every client's way in
        self._started: list[tuple[LocalNode, int]] = []
        self._cluster: LocalCluster | None = None
        self._killed: LocalNode | None = None

    def start(self) -> None:
        import shutil

        from replog.cli.cluster import wait_until_up, write_security_files
        from replog.cli.local_cluster import LocalCluster
        from replog.cli.node_processes import spawn

        shutil.rmtree(self.directory, ignore_errors=True)
        # Every node gets its Kafka listener (as `cluster start --kafka-base-port`): the clients'
        # way in.
        cluster = self._cluster = LocalCluster.plan(
            self.directory,
            NODES,
            self.base_port,
            kafka_base_port=self.base_port + 200,
            security=self.security,
        )
        cluster.write()
        write_security_files(cluster)
        with pinned(self.server_cpus):
            pids = {node.node_id: spawn(node) for node in cluster.nodes}
        self._started = [(node, pids[node.node_id]) for node in cluster.nodes]
        try:
            with cluster.internal_tls():
                wait_until_up(cluster, pids, START_TIMEOUT_S)
        except Exception as exc:
            self.stop()
            raise BenchSystemError(
                f"{self.name}: the replog cluster in {self.directory} did not start: {exc}"
            ) from None
        self.bootstrap_servers = ",".join(n.kafka_address or "" for n in cluster.nodes)

    def client_config(self) -> dict[str, str]:
        """What a Kafka client reaches the cluster with: the bootstrap servers, and an ssl
        cluster's TLS settings (librdkafka's keys, which replog's client reads too)."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self._cluster is not None and self.security == "ssl":
            config.update(self._cluster.client_properties())
            config["bootstrap.servers"] = self.bootstrap_servers
        return config

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        from replog.client.sync_admin import Admin, NewTopic

        with Admin(self.client_config()) as admin:
            admin.create_topics(
                [NewTopic(n, partitions, REPLICATION_FACTOR, TOPIC_CONFIGS) for n in names]
            )
        if self.driver == "confluent-kafka":
            wait_for_kafka_metadata(
                self.bootstrap_servers,
                names,
                partitions,
                timeout_s=leaders_timeout(names, partitions),
            )

    def delete_topics(self, names: Sequence[str]) -> None:
        from replog.client.sync_admin import Admin

        try:
            with Admin(self.client_config()) as admin:
                admin.delete_topics(list(names))
        except Exception as exc:
            print(f"{self.name}: deleting the run's topics failed: {exc}", flush=True)

    def kill_leader(self, topic: str) -> int:
        from replog.cli.node_processes import kill_and_wait
        from replog.client.sync_admin import Admin

        with Admin(self.client_config()) as admin:
            leader = admin.describe_topics([topic])[topic].partitions[0].leader
        for node, pid in self._started:
            if node.node_id == leader:
                kill_and_wait(node, pid)
                self._killed = node
                return node.node_id
        raise BenchSystemError(f"{self.name}: {topic}-0 has no leader to kill (leader {leader})")

    def restart_killed(self) -> None:
        from replog.admin.controller_client import ControllerClient
        from replog.cli.cluster import broker_epoch, wait_until_up
        from replog.cli.node_processes import spawn

        node, self._killed = self._killed, None
        if node is None or self._cluster is None:
            return
        # The controller lists the killed broker's last registration as active until its
        # session expires: the node is back only once registered again, at a later epoch (asked
        # of the controllers as `replog cluster start` asks them).
        controller_addresses = list(self._cluster.controller_addresses().values())
        with (
            self._cluster.internal_tls(),
            contextlib.closing(ControllerClient(controller_addresses)) as controllers,
        ):
            epoch_before = broker_epoch(controllers, node.node_id)
        with pinned(self.server_cpus):
            pid = spawn(node)
        self._started = [(n, pid if n.node_id == node.node_id else p) for n, p in self._started]
        try:
            with self._cluster.internal_tls():
                wait_until_up(
                    self._cluster,
                    {n.node_id: p for n, p in self._started},
                    START_TIMEOUT_S,
                    registered_after={node.node_id: epoch_before},
                )
        except Exception as exc:
            raise BenchSystemError(
                f"{self.name}: node {node.node_id} did not come back after its kill: {exc} "
                f"(its log: {node.log_path})"
            ) from None

    def _active_controller(self) -> int:
        """The active controller: the metadata quorum's leader, by DescribeQuorum asked of a
        broker (a broker's DescribeCluster names a live broker, not the active controller)."""
        from replog.client.sync_admin import Admin

        with Admin(self.client_config()) as admin:
            return admin.describe_quorum(timeout_ms=30_000).leader_id

    def servers_for(self, driver: str) -> str:
        """The bootstrap servers `driver` (a name of drivers.CLIENTS) reaches this cluster at:
        the Kafka listeners, whatever the client."""
        return self.bootstrap_servers

    def create_led(
        self, names: Sequence[str], partitions: int, per_request: int
    ) -> tuple[float, float]:
        """Through the Kafka listeners (`kafka_create`, as Kafka's: a broker forwards each
        CreateTopics to the active controller, answered once it committed); then until the
        nodes' metrics (`cluster_metrics`) show every replica created and every partition led,
        with no replica change left to apply."""
        from replog.cli.bench.cluster_metrics import metrics_urls, settled_totals, wait_replicas

        urls = metrics_urls(self.base_port, NODES)
        try:
            before = settled_totals(urls, METADATA_TIMEOUT_S)
        except RuntimeError as exc:
            raise BenchSystemError(f"{self.name}: before creating {names[0]}: {exc}") from None
        began = time.perf_counter()
        answered_s = kafka_create(self.bootstrap_servers, names, partitions, per_request)
        count = len(names) * partitions
        try:
            wait_replicas(
                urls,
                count,
                REPLICATION_FACTOR,
                create_timeout_s(count),
                before=before,
                notice=WaitNotice(
                    f"{self.name}: waiting for every replica of {count:,} new partitions to be "
                    "created and led"
                ),
                check=self._check_running,
            )
        except RuntimeError as exc:
            raise BenchSystemError(f"{self.name}: {exc}") from None
        return answered_s, time.perf_counter() - began

    def _check_running(self) -> None:
        """A `BenchSystemError` naming the nodes (but the one `kill_leader` or
        `fail_controller` killed) that no longer run, and their logs."""
        from replog.cli.node_processes import is_running

        gone = [
            f"node {node.node_id} (pid {pid}, its log: {node.log_path})"
            for node, pid in self._started
            if node is not self._killed and not is_running(node, pid)
        ]
        if gone:
            raise BenchSystemError(f"{self.name}: {', '.join(gone)} exited")

    def fail_controller(self, probe_topic: str) -> tuple[int, Failover]:
        from replog.cli.bench.controller_failover import over_kafka
        from replog.cli.node_processes import kill_and_wait

        active = self._active_controller()
        started = {node.node_id: (node, pid) for node, pid in self._started}
        if active not in started:
            raise BenchSystemError(f"{self.name}: no active controller to kill ({active})")
        node, pid = started[active]

        def kill() -> None:
            kill_and_wait(node, pid)

        self._killed = node
        assert self._cluster is not None
        survivors = [n.kafka_address or "" for n in self._cluster.nodes if n.node_id != active]
        return active, over_kafka(",".join(survivors), kill, probe_topic)

    def server_pids(self) -> list[int]:
        return [pid for _, pid in self._started]

    def stop(self) -> None:
        from replog.cli.node_processes import stop_nodes

        started, self._started = self._started, []
        stop_nodes(started, REPLOG_STOP_TIMEOUT_S)

    def describe(self) -> dict[str, str]:
        from replog import __version__

        return {
            "system": self.name,
            "version": f"replog {__version__}",
            "nodes": f"{NODES} combined (broker+controller), loopback",
            "client": self.driver,
            "server_cpus": self.server_cpus or "",
        }


# --- Apache Kafka ---------------------------------------------------------------------------------


def default_kafka_script() -> str:
    """bench/kafka/kafka.sh of the checkout replog runs from."""
    return str(Path(__file__).resolve().parents[3] / "bench" / "kafka" / "kafka.sh")


class KafkaSystem:
    name = "kafka"
    driver = "confluent-kafka"
    program: Sequence[str] = PYTHON_WORKER

    def __init__(
        self,
        directory: str,
        base_port: int,
        script: str | None,
        server_cpus: str | None = None,
        *,
        properties: Sequence[str] = (),
        security: str = "plaintext",
    ) -> None:
        """`properties`: `KEY=VALUE` lines every node's server.properties gets after kafka.sh's
        own (a later line wins). `security`: plaintext, ssl or sasl_ssl, every link as
        `replog cluster start --security` secures a replog cluster's (`kafka_security`; its
        files beside `directory`, in `directory`-security)."""
        self.server_cpus = server_cpus
        self.properties = tuple(properties)
        self.security = security
        self.secured: KafkaSecurity | None = None  # written by `start` unless plaintext
        self.script = script or default_kafka_script()
        self.directory = directory
        self.base_port = base_port
        self.bootstrap_servers = ""
        self.version = os.environ.get("KAFKA_VERSION", "4.4.0")
        self._killed: int | None = None
        self._deleted: set[str] = set()  # topics deleted since the last `wait_deleted`

    def _env(self) -> dict[str, str]:
        secured = self.secured
        return {
            **os.environ,
            **(secured.environment() if secured is not None else {}),
            "KAFKA_CLUSTER_DIR": self.directory,
            "KAFKA_BASE_PORT": str(self.base_port),
            "KAFKA_VERSION": self.version,
            "KAFKA_PROPERTIES": "\n".join(
                (*(secured.node_properties() if secured is not None else ()), *self.properties)
            ),
            # kafka.sh's own wait for a node's listener, inside the harness's for the script.
            "KAFKA_START_TIMEOUT_S": str(int(KAFKA_START_TIMEOUT_S * 0.9)),
        }

    def _script(self, *args: str, timeout_s: float, pin: bool = False) -> str:
        """Run kafka.sh; `pin`: under taskset with the server CPUs (the JVMs it starts inherit
        them)."""
        if not os.path.exists(self.script):
            raise BenchSystemError(
                f"kafka: {self.script} not found: run from a replog checkout or pass "
                "--kafka-script PATH (bench/kafka/kafka.sh)"
            )
        try:
            done = subprocess.run(
                [*taskset(self.server_cpus if pin else None), self.script, *args],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BenchSystemError(
                f"kafka: `{self.script} {' '.join(args)}` took over {timeout_s:g} s"
            ) from None
        if done.returncode != 0:
            raise BenchSystemError(
                f"kafka: `{self.script} {' '.join(args)}` failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        return done.stdout.strip()

    def start(self) -> None:
        from replog.cli.bench.kafka_security import write_kafka_security

        self.secured = write_kafka_security(
            f"{self.directory}-security", self.base_port, NODES, self.security
        )
        self._script("start", timeout_s=KAFKA_START_TIMEOUT_S, pin=True)
        try:
            self.bootstrap_servers = self._script("bootstrap", timeout_s=10)
            wait_for_kafka_brokers(self.client_config(), NODES)
        except BaseException:
            # The JVMs run (kafka.sh stops them itself only when a listener never came): the
            # caller stops a system only once it has started.
            with contextlib.suppress(BenchSystemError):
                self.stop()
            raise

    def client_config(self) -> dict[str, str]:
        """What a Kafka client reaches the cluster with: the bootstrap servers, and a secured
        cluster's settings (librdkafka's keys, which replog's client reads too)."""
        secured = {} if self.secured is None else self.secured.client_properties()
        return {**secured, "bootstrap.servers": self.bootstrap_servers}

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

        with AdminClient({**self.client_config()}) as admin:
            futures = admin.create_topics(
                [NewTopic(n, partitions, REPLICATION_FACTOR, config=TOPIC_CONFIGS) for n in names]
            )
            for name, future in futures.items():
                try:
                    future.result(METADATA_TIMEOUT_S)
                except Exception as exc:
                    raise BenchSystemError(f"kafka: creating topic {name} failed: {exc}") from None
        wait_for_kafka_metadata(
            self.bootstrap_servers,
            names,
            partitions,
            timeout_s=leaders_timeout(names, partitions),
            settings=self.client_config(),
        )

    def delete_topics(self, names: Sequence[str]) -> None:
        from confluent_kafka.admin import AdminClient

        with AdminClient({**self.client_config()}) as admin:
            failed: list[str] = []
            # One deadline for them all: against a cluster that is down, each would take it whole.
            deadline = time.monotonic() + METADATA_TIMEOUT_S
            futures = admin.delete_topics(list(names), request_timeout=METADATA_TIMEOUT_S)
            self._deleted.update(names)
            for name, future in futures.items():
                try:
                    future.result(max(0.0, deadline - time.monotonic()))
                except Exception as exc:
                    failed.append(f"{name}: {exc or type(exc).__name__}")
            if failed:
                print(
                    f"kafka: deleting {len(failed)} of {len(names)} topics failed; the first: "
                    f"{failed[0]}",
                    flush=True,
                )

    def wait_deleted(
        self, timeout_s: float = KAFKA_FILE_DELETE_DELAY_S + METADATA_TIMEOUT_S
    ) -> None:
        """Until no node holds a log of the topics `delete_topics` deleted, nor one renamed for
        deletion (best effort: past `timeout_s` it says how many are left). Kafka keeps a
        deleted log open for `KAFKA_FILE_DELETE_DELAY_S`, then removes its files: without the
        wait, the next run's partitions come on top of the last run's open files (the limit
        check counts one run's) and the removal lands in its measured time."""
        deleted, self._deleted = self._deleted, set()
        if not deleted:
            return
        deadline = time.monotonic() + timeout_s
        notice = WaitNotice(
            f"kafka: waiting for the nodes to remove the logs of {len(deleted):,} deleted topics"
        )
        while True:
            left = 0
            for node in range(1, NODES + 1):
                with contextlib.suppress(OSError):
                    left += sum(
                        1
                        for entry in os.listdir(self._data_dir(node))
                        if entry.endswith("-delete") or entry.rsplit("-", 1)[0] in deleted
                    )
            if not left:
                return
            if time.monotonic() > deadline:
                print(
                    f"kafka: {left:,} deleted topics' logs still on the nodes' disks after "
                    f"{timeout_s:g} s",
                    flush=True,
                )
                return
            notice.update(f"{left:,} logs left")
            time.sleep(1.0)

    def kill_leader(self, topic: str) -> int:
        from confluent_kafka.admin import AdminClient

        with AdminClient({**self.client_config()}) as admin:
            leader = (
                admin.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics[topic].partitions[0]
            )
        self._script("kill", str(leader.leader), timeout_s=10)
        self._killed = leader.leader
        return int(leader.leader)

    def restart_killed(self) -> None:
        node, self._killed = self._killed, None
        if node is not None:
            self._script("restart", str(node), timeout_s=KAFKA_START_TIMEOUT_S, pin=True)
            wait_for_kafka_brokers(self.client_config(), NODES)

    def create_led(
        self, names: Sequence[str], partitions: int, per_request: int
    ) -> tuple[float, float]:
        """`kafka_create`, then until Metadata shows every partition led and every replica's
        log directory exists on its node (a broker makes it when it applies the partition)."""
        began = time.perf_counter()
        answered_s = kafka_create(
            self.bootstrap_servers, names, partitions, per_request, settings=self.client_config()
        )
        count = len(names) * partitions
        deadline = time.monotonic() + create_timeout_s(count)
        wait_for_kafka_metadata(
            self.bootstrap_servers,
            names,
            partitions,
            timeout_s=create_timeout_s(count),
            settings=self.client_config(),
            notice=WaitNotice(f"kafka: waiting for a leader of each of {count:,} new partitions"),
            check=self._check_running,
        )
        wait_replica_dirs(
            [self._data_dir(node) for node in range(1, NODES + 1)],
            {f"{name}-{p}" for name in names for p in range(partitions)},
            timeout_s=max(0.0, deadline - time.monotonic()),
            notice=WaitNotice(
                f"kafka: waiting for the log directories of every replica of {count:,} new "
                "partitions"
            ),
            check=self._check_running,
        )
        return answered_s, time.perf_counter() - began

    def _data_dir(self, node: int) -> str:
        return os.path.join(self.directory, f"node-{node}", "data")

    def _check_running(self) -> None:
        """A `BenchSystemError` naming the nodes (but one the harness killed) whose JVM no
        longer runs, with the end of each one's log ("Too many open files", an
        OutOfMemoryError): a wait on them would last its whole timeout."""
        from replog.cli.node_processes import process_runs

        gone = []
        for node in range(1, NODES + 1):
            if node == self._killed:
                continue
            path = os.path.join(self.directory, f"node-{node}")
            try:
                with open(os.path.join(path, "node.pid"), encoding="ascii") as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue  # never started here (a stand-in), or stopped by kafka.sh
            if process_runs(pid, os.path.join(path, "server.properties")):
                continue
            log = os.path.join(path, "node.log")
            gone.append(f"node {node} (pid {pid}) exited; the end of {log}:\n{_tail(log)}")
        if gone:
            raise BenchSystemError("kafka: " + "\n".join(gone))

    def active_controller(self, timeout_s: float = METADATA_TIMEOUT_S) -> int:
        """The KRaft quorum's leader: the leader the newest epoch's quorum-state file names
        (`__cluster_metadata-0/quorum-state`, which each voter rewrites as it votes and learns
        its leader; in an election under way the newest names none yet, so it is read again)."""
        import json

        deadline = time.monotonic() + timeout_s
        while True:
            states = []
            for node in range(1, NODES + 1):
                path = os.path.join(self._data_dir(node), "__cluster_metadata-0", "quorum-state")
                try:
                    with open(path, encoding="utf-8") as f:
                        state = json.load(f)
                    states.append((int(state["leaderEpoch"]), int(state["leaderId"])))
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # being rewritten
            epoch = max((e for e, _ in states), default=-1)
            leaders = {leader for e, leader in states if e == epoch and leader >= 1}
            if len(leaders) == 1:
                return leaders.pop()
            if time.monotonic() > deadline:
                raise BenchSystemError(
                    f"kafka: no leader named in the quorum-state files in {self.directory} "
                    f"within {timeout_s:g} s (epoch, leader: {states})"
                )
            time.sleep(0.1)

    def fail_controller(self, probe_topic: str) -> tuple[int, Failover]:
        import signal

        from replog.cli.bench.controller_failover import over_kafka

        active = self.active_controller()
        with open(os.path.join(self.directory, f"node-{active}", "node.pid")) as f:
            pid = int(f.read().strip())
        survivors = [
            address
            for node, address in enumerate(self.bootstrap_servers.split(","), start=1)
            if node != active
        ]

        def kill() -> None:
            os.kill(pid, signal.SIGKILL)  # not through kafka.sh: its start-up is not Kafka's

        self._killed = active
        return active, over_kafka(",".join(survivors), kill, probe_topic)

    def stop(self) -> None:
        # kafka.sh waits up to 30 s for each node in turn before its SIGKILL.
        self._script("stop", timeout_s=STOP_TIMEOUT_S * (NODES + 1))

    def server_pids(self) -> list[int]:
        pids = []
        for node in range(1, NODES + 1):
            try:
                with open(os.path.join(self.directory, f"node-{node}", "node.pid")) as f:
                    pids.append(int(f.read().strip()))
            except (OSError, ValueError):
                continue  # a node that does not run (killed by the failover timeline)
        return pids

    def describe(self) -> dict[str, str]:
        return {
            "system": self.name,
            "version": f"Apache Kafka {self.version}",
            "nodes": f"{NODES} combined KRaft (broker+controller), loopback, "
            f"heap {os.environ.get('KAFKA_HEAP', '512m')}",
            "client": self.driver,
            "server_cpus": self.server_cpus or "",
        }


def _tail(path: str, lines: int = 5) -> str:
    """The last `lines` lines of a log (read from its last 16 KiB: a node's log at 100,000
    partitions is hundreds of MB)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16_384))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc.strerror or exc})"
    return "\n".join(text.rstrip().splitlines()[-lines:])


# --- waits over Kafka's protocol ------------------------------------------------------------------


# What each replica on a Kafka node holds: its active segment's log file open, and its offset
# and time indexes mapped (their files are closed once mapped): a node making 100,000
# partitions' replicas here had 16,809 files open and 33,881 maps when another one died of
# "Too many open files" at `ulimit -n` 20,000.
KAFKA_FILES_PER_REPLICA = 1
KAFKA_MAPS_PER_REPLICA = 2
KAFKA_HEADROOM = 2_000  # the JVM's own files, sockets and maps
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"


def kafka_limits_problem(partitions: int, open_files: int, map_count: int) -> str | None:
    """Why Kafka's nodes cannot hold `partitions` partitions under a limit of `open_files` open
    files per process and `map_count` memory maps (`vm.max_map_count`), or None: at RF 3 on 3
    nodes every node holds a replica of each. Past either limit a Kafka node dies mid-run
    ("Too many open files" at 100,000 partitions under `ulimit -n` 20,000 here)."""
    files = partitions * KAFKA_FILES_PER_REPLICA + KAFKA_HEADROOM
    maps = partitions * KAFKA_MAPS_PER_REPLICA + KAFKA_HEADROOM
    if files <= open_files and maps <= map_count:
        return None
    # Both limits, each with its need and this machine's figure: raising the one that is short
    # must not run into the other unannounced.
    needs = " and ".join(
        f"{limit} of at least {need:,} (here {have:,}{': too low' if need > have else ''})"
        for limit, need, have in (
            ("`ulimit -n` (hard)", files, open_files),
            ("vm.max_map_count", maps, map_count),
        )
    )
    return (
        f"kafka: {partitions:,} partitions put a replica of each on every node (RF 3 on 3 "
        f"nodes), each an open log file and two mapped indexes: Kafka's nodes need {needs}"
    )


def check_kafka_limits(partitions: int) -> None:
    """`kafka_limits_problem` under this process's limits (kafka.sh raises the soft open-file
    limit to the hard one; the JVMs inherit it) as a `BenchSystemError`."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_files = hard if hard != resource.RLIM_INFINITY else 1 << 30
    try:
        with open(MAX_MAP_COUNT, encoding="ascii") as f:
            map_count = int(f.read())
    except (OSError, ValueError):
        return  # not Linux: nothing to read the limit from
    problem = kafka_limits_problem(partitions, open_files, map_count)
    if problem is not None:
        raise BenchSystemError(problem)


def create_timeout_s(partitions: int) -> float:
    """How long creating `partitions` partitions may take end to end: `CREATE_TIMEOUT_S`, or
    longer past 22,500 partitions (a controller run's growth to 100,000 takes 3,600 s)."""
    return max(CREATE_TIMEOUT_S, partitions / CREATED_PER_S_AT_LEAST)


def wait_for_kafka_brokers(settings: Mapping[str, str], count: int) -> None:
    """Until Metadata asked with the client `settings` (bootstrap servers included) lists
    `count` brokers."""
    from confluent_kafka.admin import AdminClient

    bootstrap_servers = settings["bootstrap.servers"]
    with AdminClient(dict(settings)) as admin:
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        seen = 0
        while time.monotonic() < deadline:
            try:
                seen = len(admin.list_topics(timeout=5).brokers)
            except Exception:
                seen = 0
            if seen >= count:
                return
            time.sleep(0.5)
        raise BenchSystemError(
            f"waited {METADATA_TIMEOUT_S:g} s for {count} brokers at {bootstrap_servers}; "
            f"metadata lists {seen}"
        )


def leaders_timeout(names: Sequence[str], partitions: int) -> float:
    """How long new topics' partitions may take to be led: an idle topic of thousands of
    partitions takes a loaded machine minutes."""
    return METADATA_TIMEOUT_S + len(names) * partitions / LEADERS_PER_S_AT_LEAST


def kafka_create(
    bootstrap_servers: str,
    names: Sequence[str],
    partitions: int,
    per_request: int,
    *,
    settings: Mapping[str, str] | None = None,
) -> float:
    """Create `names` through Kafka's protocol (confluent-kafka's AdminClient, answered once
    the controller committed) in requests of `per_request` topics one after another; the
    seconds until the last answer. `settings`: the client's (a secured cluster's)."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where its type stubs declare it

    with AdminClient({**(settings or {}), "bootstrap.servers": bootstrap_servers}) as admin:
        began = time.perf_counter()
        for first in range(0, len(names), per_request):
            futures = admin.create_topics(
                [
                    NewTopic(n, partitions, REPLICATION_FACTOR, config=TOPIC_CONFIGS)
                    for n in names[first : first + per_request]
                ],
                request_timeout=120,
                operation_timeout=120,
            )
            for name, future in futures.items():
                try:
                    future.result(CREATE_TIMEOUT_S)
                except Exception as exc:
                    raise BenchSystemError(f"creating topic {name} failed: {exc}") from None
        return time.perf_counter() - began


def wait_for_kafka_metadata(
    bootstrap_servers: str,
    topics: Sequence[str],
    partitions: int,
    *,
    timeout_s: float = METADATA_TIMEOUT_S,
    notice: WaitNotice | None = None,
    check: Callable[[], None] | None = None,
    settings: Mapping[str, str] | None = None,
) -> None:
    """Wait until Metadata over Kafka's protocol shows a leader for every partition of `topics`;
    `notice` is told how many are led after each answer; `check()` runs before each request
    and raises to end the wait (a node that exited). Each answer lists every topic (at
    100,000 partitions, seconds of the brokers' and this process's CPU): the polls are paced by
    the leaders' progress (`paced_polls`). `settings`: the client's (a secured cluster's)."""
    from confluent_kafka.admin import AdminClient

    with AdminClient({**(settings or {}), "bootstrap.servers": bootstrap_servers}) as admin:
        began = time.monotonic()
        deadline = began + timeout_s
        missing: list[str] = list(topics)
        unled = first = len(topics) * partitions
        answers, failed = 0, ""  # the last request's failure, if it failed
        while time.monotonic() < deadline:
            if check is not None:
                check()
            try:
                # Every topic's metadata: at 100,000 partitions an answer takes seconds to make
                # and parse on a loaded machine.
                metadata = admin.list_topics(
                    timeout=max(1.0, min(METADATA_ANSWER_S, deadline - time.monotonic()))
                )
            except Exception as exc:
                failed = f"{type(exc).__name__}: {exc}"
                if notice is not None:
                    notice.update(f"Metadata not answered: {failed}")
                time.sleep(0.5)
                continue
            answers, failed = answers + 1, ""
            missing, unled = [], 0
            for name in topics:
                topic = metadata.topics.get(name)
                led = (
                    0
                    if topic is None
                    else sum(1 for p in topic.partitions.values() if p.leader >= 0)
                )
                if led < partitions:
                    missing.append(name)
                    unled += partitions - led
            if not missing:
                return
            if notice is not None:
                notice.update(f"{unled:,} of {len(topics) * partitions:,} without a leader")
            time.sleep(next_poll_s(KAFKA_POLL_S, time.monotonic() - began, first - unled, unled))
        if not answers:
            state = f"no Metadata request was answered (the last: {failed or 'none sent'})"
        else:
            state = f"{unled:,} of {len(topics) * partitions:,} partitions without a leader"
            if failed:
                state += f" in the last answer; the last request failed: {failed}"
        raise BenchSystemError(
            f"waited {timeout_s:g} s for leaders of every partition of "
            f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} at {bootstrap_servers}: "
            f"{state}"
        )


def wait_replica_dirs(
    data_dirs: Sequence[str],
    wanted: set[str],
    *,
    timeout_s: float,
    notice: WaitNotice | None = None,
    interval_s: float = KAFKA_POLL_S,
    check: Callable[[], None] | None = None,
) -> None:
    """Wait until each of Kafka's nodes (its log directory in `data_dirs`) holds a directory
    for every partition of `wanted` (`<topic>-<partition>`: a broker makes a replica's when it
    applies the partition; every node holds a replica of each at RF 3 on 3 nodes). Past
    `timeout_s`, a `BenchSystemError` names the replicas still missing on each node. A look
    lists every node's directory (100,000 entries each at 100,000 partitions): the looks are
    paced by the progress (`paced_polls`). `check()` runs before each look
    and raises to end the wait (a node that exited)."""
    began = time.monotonic()
    deadline = began + timeout_s
    first: int | None = None
    while True:
        if check is not None:
            check()
        missing: dict[str, set[str]] = {}
        for directory in data_dirs:
            try:
                made = wanted.intersection(os.listdir(directory))
            except OSError:
                made = set()
            if len(made) < len(wanted):
                missing[directory] = wanted - made
        absent = sum(len(m) for m in missing.values())
        if not absent:
            return
        total = len(wanted) * len(data_dirs)
        if time.monotonic() > deadline:
            where = "; ".join(
                f"{directory}: {len(m):,} missing, e.g. {', '.join(sorted(m)[:3])}"
                for directory, m in missing.items()
            )
            raise BenchSystemError(
                f"kafka: {total - absent:,} of {total:,} replicas' log directories made after "
                f"{timeout_s:g} s ({where})"
            )
        if notice is not None:
            notice.update(f"{total - absent:,} of {total:,} made")
        first = absent if first is None else first
        time.sleep(next_poll_s(interval_s, time.monotonic() - began, first - absent, absent))
