"""replog's consumers in one group on a real node, each member its own process
(`group_member_process.py`): they split a topic's partitions evenly and disjointly; a member
killed with kill -9 has its partitions moved to the others once its session expires on the
coordinator (both with the classic protocol and with `group.protocol=consumer`, KIP-848); a
member that stops polling past max.poll.interval.ms leaves and the others take its partitions;
`replog perf consume --group` reports the time of its join as rebalance.time.ms (both
protocols); `replog consumer-groups --reset-offsets` moves an inactive group's offsets and
refuses while the group has members; the node's Prometheus metrics show a member's group,
its lag and its rebalance; a replog consumer and a confluent-kafka one (through the Kafka
listener) share one group; replog's consumers of one group move from the classic protocol to the
consumer protocol one restart at a time (the group converted online) with no record skipped and
their commits carried over. One node (a replog cluster of one) keeps the start short."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replog import Consumer, Producer
from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.cli.main import main
from replog.client.records import TopicPartition
from replog.errors import CommitFailedError, KafkaError
from tests.cluster.cluster_helpers import JsonLines
from tests.kafka.kafka_node import RunningNode, running_node
from tests.local_ports import free_port

pytestmark = pytest.mark.slow

PARTITIONS = 6
SESSION_MS = 2_000
MEMBER = Path(__file__).with_name("group_member_process.py")
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    properties = [
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
        "group.min.session.timeout.ms=500",
        f"group.consumer.session.timeout.ms={SESSION_MS}",
        f"group.consumer.heartbeat.interval.ms={SESSION_MS // 10}",
        "group.consumer.min.session.timeout.ms=1",
        "group.consumer.min.heartbeat.interval.ms=1",
        f"metrics.port={METRICS_PORT}",
    ]
    with running_node(tmp_path_factory.mktemp("groups"), "replog-groups", properties) as running:
        with ControllerClient(f"127.0.0.1:{running.grpc_port}", default_timeout_s=60) as admin:
            for topic in (
                "split",
                "split848",
                "stuck",
                "perf",
                "reset",
                "metered",
                "mixed",
                "migrate",
            ):
                (created,) = admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
                assert created.error is None, created
        yield running


def bootstrap(node: RunningNode) -> str:
    """What replog's clients and CLI are given: the node's Kafka listener."""
    return node.kafka_address


class Member:
    """One member process and the assignments it printed (read by a thread)."""

    def __init__(self, node: RunningNode, group: str, topic: str, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MEMBER), bootstrap(node), group, topic, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        self.lines = JsonLines(self.process.stdout)
        self.assigned: list[str] = []
        self.events: list[dict[str, Any]] = []

    def update(self) -> None:
        for event in self.lines.new():
            self.events.append(event)
            if "assigned" in event:
                self.assigned = event["assigned"]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.lines.reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def wait_for(members: list[Member], condition: Any, timeout_s: float, what: str) -> float:
    """Seconds until `condition()` held, reading every member's lines meanwhile."""
    started = time.monotonic()
    while True:
        for m in members:
            m.update()
        if condition():
            return time.monotonic() - started
        owned = [m.assigned for m in members]
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s: {what}: {owned}"
        time.sleep(0.02)


def even_split(members: list[Member]) -> bool:
    every = [p for m in members for p in m.assigned]
    sizes = [len(m.assigned) for m in members]
    return len(every) == PARTITIONS == len(set(every)) and max(sizes) - min(sizes) <= 1


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.kill()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_members_split_evenly_and_a_killed_members_partitions_move(
    node: RunningNode, members: list[Member], protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "split" if protocol == "classic" else "split848"
    members.extend(
        Member(
            node,
            f"{topic}-group",
            topic,
            *("--session-ms", str(SESSION_MS), "--protocol", protocol),
        )
        for _ in range(3)
    )
    wait_for(members, lambda: even_split(members), 60, "three members split the partitions")
    assert sorted(len(m.assigned) for m in members) == [2, 2, 2]
    # Kafka's --members --verbose: each member's type, and with the consumer protocol its
    # epoch and the group's target assignment epoch (a classic group has neither).
    code, out, _ = groups_cli(
        capsys, "--bootstrap-server", bootstrap(node), "--describe", "--group",
        f"{topic}-group", "--members", "--verbose", "--json",
    )  # fmt: skip
    described = json.loads(out)
    assert code == 0 and [m["memberType"] for m in described] == [protocol] * 3
    epochs = {(m["currentEpoch"] is None, m["targetEpoch"] is None) for m in described}
    assert epochs == {(protocol == "classic",) * 2}
    victim, survivors = members[0], members[1:]
    victim.kill()
    moved_s = wait_for(
        survivors, lambda: even_split(survivors), 30, "the survivors take the partitions over"
    )
    # The coordinator removes the member when its session expires (the broker's
    # group.consumer.session.timeout.ms for the consumer protocol: the same 2 s), then one
    # rebalance.
    assert moved_s < SESSION_MS / 1000 + 4, moved_s  # with slack for a loaded machine


def test_a_member_stuck_past_max_poll_interval_is_removed(
    node: RunningNode, members: list[Member]
) -> None:
    stall_s = 20  # far longer than the takeover takes, even on a loaded machine
    healthy = Member(node, "stuck-group", "stuck")
    stuck = Member(
        node,
        "stuck-group",
        "stuck",
        *("--max-poll-ms", "1000", "--stall-after-s", "0.5", "--stall-s", str(stall_s)),
    )
    members.extend([healthy, stuck])
    wait_for(members, lambda: even_split(members), 60, "two members split the partitions")
    wait_for(members, lambda: any("stalling" in e for e in stuck.events), 10, "the stall")
    # Past max.poll.interval.ms the stuck member leaves (its heartbeats would have kept it in
    # the group): the healthy one reads everything while the stuck one still sleeps. Its
    # rejoin at the next poll is held by tests/client/test_consumer_group_membership.py.
    wait_for([healthy], lambda: len(healthy.assigned) == PARTITIONS, stall_s - 2, "the takeover")
    stuck.update()
    assert stuck.events[-1] == {"stalling": stall_s}  # nothing printed since: still asleep


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_perf_consume_reports_the_rebalance_time(
    node: RunningNode, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    assert (
        main(
            [
                "perf",
                "consume",
                "--bootstrap-server",
                bootstrap(node),
                "--topic",
                "perf",
                "--messages",
                "1",
                "--group",
                f"perf-group-{protocol}",
                "--timeout",
                "1000",
                "--consumer-props",
                f"group.protocol={protocol}",
            ]
        )
        == 0
    )
    fields = capsys.readouterr().out.splitlines()[1].split(", ")
    assert int(fields[6]) > 0  # rebalance.time.ms: the join took time


def groups_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["consumer-groups", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_reset_offsets_moves_an_inactive_groups_offsets(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    with Producer(bootstrap_servers=bootstrap(node)) as producer:
        for i in range(5):
            producer.send("reset", b"%d" % i, partition=0)
    t0 = TopicPartition("reset", 0)
    with Consumer(bootstrap_servers=bootstrap(node), group_id="resets") as owner:
        owner.commit({t0: 4})
    base = ["--bootstrap-server", bootstrap(node), "--reset-offsets", "--group", "resets"]
    code, out, err = groups_cli(capsys, *base, "--topic", "reset:0", "--shift-by", "-3")
    assert code == 0 and "--execute option is missing" in err
    assert out.split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "resets", "reset", "0", "1"]
    code, out, _ = groups_cli(capsys, *base, "--all-topics", "--to-earliest", "--execute", "--json")
    assert code == 0
    assert json.loads(out) == [
        {"group": "resets", "topic": "reset", "partition": 0, "newOffset": 0}
    ]
    with Consumer(bootstrap_servers=bootstrap(node), group_id="resets") as reader:
        assert reader.committed(t0) == 0
        reader.subscribe(["reset"])  # a member now: the group is not inactive
        deadline = time.monotonic() + 30
        while not reader.assignment():
            assert time.monotonic() < deadline
            reader.poll(100)
        code, _, err = groups_cli(capsys, *base, "--topic", "reset", "--to-latest", "--execute")
        assert code == 1
        assert "can only be reset if the group 'resets' is inactive" in err
        assert "current state is Stable" in err
        assert reader.committed(t0) == 0


def test_metrics_show_the_groups_state_lag_and_rebalances(node: RunningNode) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with Producer(bootstrap_servers=bootstrap(node)) as producer:
        for i in range(3):
            producer.send("metered", b"%d" % i, partition=0)
    t0 = TopicPartition("metered", 0)
    with Consumer(
        "metered", bootstrap_servers=bootstrap(node), group_id="metered", enable_auto_commit=False
    ) as member:
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline
            member.poll(100)
        member.commit({t0: 1})
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics") as answer:
            text = answer.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    labels = (("group", "metered"), ("partition", "0"), ("topic", "metered"))
    assert samples[("replog_consumer_group_lag", labels)] == 2
    assert samples[("replog_consumer_group_committed_offset", labels)] == 1
    assert samples[("replog_consumer_group_members", (("group", "metered"),))] == 1
    assert samples[("replog_consumer_groups", (("state", "Stable"),))] >= 1
    assert samples[("replog_consumer_group_rebalances_total", ())] >= 1


def test_a_replog_and_a_kafka_client_share_a_group(node: RunningNode) -> None:
    from confluent_kafka import Consumer as KafkaConsumer

    kafka = KafkaConsumer(
        {
            "bootstrap.servers": node.kafka_address,
            "group.id": "mixed",
            "group.protocol": "classic",
            "session.timeout.ms": 6000,
        }
    )
    ours = Consumer("mixed", bootstrap_servers=bootstrap(node), group_id="mixed")
    try:
        kafka.subscribe(["mixed"])
        deadline = time.monotonic() + 60
        while True:
            kafka.poll(0.05)
            ours.poll(50)
            theirs = {(p.topic, p.partition) for p in kafka.assignment()}
            mine = {(tp.topic, tp.partition) for tp in ours.assignment()}
            if theirs and mine and len(theirs | mine) == PARTITIONS and not theirs & mine:
                break
            assert time.monotonic() < deadline, (sorted(theirs), sorted(mine))
        assert len(theirs) == len(mine) == PARTITIONS // 2  # range over both: 3 and 3
    finally:
        ours.close()
        kafka.close()


def test_replog_consumers_move_between_the_protocols_one_restart_at_a_time(
    node: RunningNode,
) -> None:
    """Three classic members; one restarts with group.protocol=consumer (the classic group is
    converted, its classic members kept), then the other two: every record is read, and none
    that was committed before a restart is read after it (a record may be read twice within a
    phase: a commit refused during a rebalance leaves it to the partition's next owner)."""
    phases: list[list[tuple[int, int]]] = []

    def member(protocol: str) -> Consumer:
        timers = (
            {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": SESSION_MS // 10}
            if protocol == "classic"
            else {}
        )
        consumer = Consumer(
            bootstrap_servers=bootstrap(node),
            group_id="migrate",
            group_protocol=protocol,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            **timers,
        )
        consumer.subscribe(["migrate"])
        return consumer

    def produce(first: int, count: int) -> None:
        with Producer(bootstrap_servers=bootstrap(node)) as producer:
            for i in range(first, first + count):
                producer.send("migrate", b"%d" % i, partition=i % PARTITIONS)

    def poll(consumer: Consumer) -> None:
        batch = consumer.poll(50)
        phases[-1].extend((r.partition, r.offset) for rs in batch.values() for r in rs)
        if batch:
            # Refused mid-rebalance (a Kafka error code, or the group past this member's
            # epoch: CommitFailedError): read again later.
            with contextlib.suppress(KafkaError, CommitFailedError):
                consumer.commit()

    def phase(members: list[Consumer], first: int, count: int) -> None:
        """Produce `count` records, then poll every member in turn until every record so far
        was read and committed."""
        phases.append([])
        produce(first, count)
        tps = [TopicPartition("migrate", p) for p in range(PARTITIONS)]
        total = first + count
        # A bound for a machine busy with other tests: members rejoining after a restart may
        # rebalance several times before every commit is taken.
        deadline = time.monotonic() + 180
        while True:
            for consumer in members:
                poll(consumer)
            read = set().union(*map(set, phases))
            committed = sum(members[0].committed(tp) or 0 for tp in tps)
            if len(read) == total and committed == total:
                return
            assert time.monotonic() < deadline, (
                f"after 180 s: {len(read)} of {total} records read, {committed} committed"
            )

    members = [member("classic") for _ in range(3)]
    try:
        phase(members, 0, 30)
        members[0].close()
        members[0] = member("consumer")
        phase(members, 30, 30)
        # One group of both kinds: the consumer-protocol member shares the partitions. A
        # partition being moved is owned by nobody for a moment, never by two members.
        deadline = time.monotonic() + 30
        while True:
            owned = [{tp.partition for tp in consumer.assignment()} for consumer in members]
            assert sum(map(len, owned)) == len(set().union(*owned)), owned
            if all(owned) and set().union(*owned) == set(range(PARTITIONS)):
                break
            assert time.monotonic() < deadline, owned
            for consumer in members:
                poll(consumer)
        for i in (1, 2):
            members[i].close()
            members[i] = member("consumer")
        phase(members, 60, 30)
    finally:
        for consumer in members:
            consumer.close()
    read = [set(p) for p in phases]
    assert not read[1] & read[0], sorted(read[1] & read[0])
    assert not read[2] & (read[0] | read[1]), sorted(read[2] & (read[0] | read[1]))
    assert len(read[0] | read[1] | read[2]) == 90
