"""An interactive Raft cluster driven by text commands, for the scenario scripts in testdata/.

Each node is a `ScenarioHost` (the production metadata log on a disk in memory) with its own
clock; messages wait in one FIFO queue until a command delivers them, so a script controls
exactly which message arrives when.
Every command prints what happened: messages sent and delivered, role changes, and what the
command itself reports. `tests/scenario_scripts.py` runs a whole file and compares it.

Commands (node ids are integers; voters are 1..n, observers 101..):
    add-nodes N [observers=K] [linger=MS] [fetch-bytes=B]
                                             start N voters (and K observers)
    tick (NODE|all) MS                       advance clocks and run timers
    campaign NODE                            advance NODE's clock to its next deadline until it
                                             campaigns (becomes prospective or candidate)
    deliver-msgs [NODE...] [from=NODE]       deliver the queued messages (to NODEs), in order;
                                             what they cause is queued, not delivered
    stabilize [NODE...]                      deliver until no message is queued
    drop-msgs [NODE...]                      drop the queued messages (to NODEs)
    propose NODE VALUE...                    propose values as one batch
    resign NODE
    partition IDS | IDS [| IDS...]           drop messages between the groups; heal undoes it
    heal
    crash NODE / restart NODE                crash loses unsynced data; restart recovers
    snapshot NODE / compact NODE             snapshot the applied state / delete the log before
                                             the latest snapshot
    describe NODE                            DescribeQuorum sent to NODE, answered at once
    status [NODE...] / log NODE / committed NODE
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raft_helpers import stored_batches
from scenario_host import ScenarioHost

from replog.errors import ReplogError
from replog.quorum.raft import Message, RaftConfig, VoterAddress
from replog.quorum.raft.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftBody,
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from replog.record import RecordBatch, read_header
from tests.scenario_scripts import dispatch

OBSERVER_BASE_ID = 101
CLIENT_ID = 999


def _records(data: bytes) -> str:
    """Offsets of the batches in a Fetch response, e.g. [1..2,3..3]."""
    ranges = []
    position = 0
    while position < len(data):
        batch = RecordBatch.parse(data, position)
        ranges.append(f"{batch.base_offset}..{batch.last_offset}")
        position += batch.size_in_bytes
    return "[" + ",".join(ranges) + "]"


def _leader(leader_id: int | None) -> str:
    return "-" if leader_id is None else str(leader_id)


def _describe_body(body: RaftBody) -> tuple[str, list[str]]:
    """(kind, fields) of one message body; `format_message` joins them."""
    if isinstance(body, VoteRequest):
        last = f"last={body.last_offset_epoch}/{body.last_offset}"
        return ("PreVote" if body.pre_vote else "Vote"), [f"epoch={body.quorum_epoch}", last]
    if isinstance(body, FetchRequest):
        return "Fetch", [
            f"epoch={body.quorum_epoch}",
            f"offset={body.fetch_offset}",
            f"last_epoch={body.last_fetched_epoch}",
            f"hw={body.high_watermark}",
        ]
    if isinstance(body, FetchSnapshotRequest):
        return "FetchSnapshot", [
            f"epoch={body.quorum_epoch}",
            f"id={body.snapshot_id}",
            f"position={body.position}",
        ]
    if isinstance(body, BeginQuorumEpochRequest):
        return "BeginQuorumEpoch", [f"epoch={body.quorum_epoch}", f"leader={body.leader_id}"]
    if isinstance(body, EndQuorumEpochRequest):
        successors = ",".join(map(str, body.preferred_successors))
        return "EndQuorumEpoch", [
            f"epoch={body.quorum_epoch}",
            f"leader={body.leader_id}",
            f"successors=[{successors}]",
        ]
    if isinstance(body, DescribeQuorumRequest):
        return "DescribeQuorum", []
    return _describe_response(body)


def _describe_response(body: RaftResponse) -> tuple[str, list[str]]:
    kind = type(body).__name__.replace("Response", "Resp")
    if isinstance(body, VoteResponse):
        kind = "PreVoteResp" if body.pre_vote else "VoteResp"
    if body.error != ErrorCode.NONE:
        kind += f" {body.error.name}"
    fields = [f"epoch={body.quorum_epoch}", f"leader={_leader(body.leader_id)}"]
    if isinstance(body, VoteResponse):
        fields.append("granted" if body.vote_granted else "rejected")
    elif isinstance(body, FetchSnapshotResponse):
        fields = [f"epoch={body.quorum_epoch}", f"id={body.snapshot_id}"]
        if body.error == ErrorCode.NONE:
            end = body.position + len(body.chunk)
            fields.append(f"bytes={body.position}..{end}/{body.size}")
    elif body.error != ErrorCode.NONE:
        pass
    elif isinstance(body, FetchResponse):
        fields.append(f"hw={_leader(body.high_watermark)}")
        if body.diverging_epoch is not None:
            fields.append(f"diverging={body.diverging_epoch}")
        elif body.snapshot_id is not None:
            fields.append(f"snapshot={body.snapshot_id}")
        elif body.records:
            fields.append(f"records={_records(body.records)}")
    elif isinstance(body, DescribeQuorumResponse):
        replicas = " ".join(
            f"{r.replica_id}:{_leader(r.log_end_offset)}" for r in body.voters + body.observers
        )
        fields += [f"hw={_leader(body.high_watermark)}", f"replicas=[{replicas}]"]
    return kind, fields


def format_message(message: Message) -> str:
    """One line per message, e.g. ``1->2 PreVote epoch=1 last=1/5``."""
    kind, fields = _describe_body(message.body)
    return " ".join([f"{message.source_id}->{message.destination_id}", kind, *fields])


@dataclass
class ScenarioEnv:
    """The cluster of one scenario script (module docstring)."""

    hosts: dict[int, ScenarioHost] = field(default_factory=dict)
    clocks: dict[int, int] = field(default_factory=dict)
    queue: list[Message] = field(default_factory=list)
    groups: list[frozenset[int]] = field(default_factory=list)
    out: list[str] = field(default_factory=list)
    shown: dict[int, str] = field(default_factory=dict)

    # --- plumbing ----------------------------------------------------------------------------

    def say(self, line: str) -> None:
        self.out.append(line)

    def host(self, text: str) -> ScenarioHost:
        node_id = int(text)
        if node_id not in self.hosts:
            raise ValueError(f"no node {node_id}")
        return self.hosts[node_id]

    def targets(self, args: list[str]) -> list[ScenarioHost]:
        if not args or args == ["all"]:
            return [host for _, host in sorted(self.hosts.items())]
        return [self.host(arg) for arg in args]

    def settle(self) -> None:
        """Process every node's Ready, queue what they send, report role changes."""
        for node_id, host in sorted(self.hosts.items()):
            for message in host.process_all():
                self.say(f"  send {format_message(message)}")
                self.queue.append(message)
            self.show_role(node_id, host)

    def show_role(self, node_id: int, host: ScenarioHost) -> None:
        if host.node is None:
            state = "down"
        else:
            s = host.node.status()
            state = f"{s.role} epoch={s.quorum_epoch} leader={_leader(s.leader_id)}"
        before = self.shown.get(node_id)
        if before != state:
            self.shown[node_id] = state
            if before is not None:
                self.say(f"  node {node_id}: {before} -> {state}")

    def cut(self, source: int, destination: int) -> bool:
        """Whether a partition separates the two (nodes in no group reach everyone)."""
        source_group = next((g for g in self.groups if source in g), None)
        destination_group = next((g for g in self.groups if destination in g), None)
        return None not in (source_group, destination_group) and source_group != destination_group

    def deliver(self, message: Message) -> None:
        host = self.hosts.get(message.destination_id)
        if host is None or host.node is None:
            self.say(f"drop {format_message(message)} (down)")
            return
        if self.cut(message.source_id, message.destination_id):
            self.say(f"drop {format_message(message)} (partition)")
            return
        self.say(format_message(message))
        host.node.step(message, self.clocks[host.node_id])
        self.settle()

    # --- commands ----------------------------------------------------------------------------

    def cmd_add_nodes(self, args: list[str], options: dict[str, str]) -> None:
        voters = int(args[0])
        observers = int(options.get("observers", "0"))
        config = RaftConfig(
            voters=tuple(VoterAddress(i, "localhost", 9090 + i) for i in range(1, voters + 1)),
            append_linger_ms=int(options.get("linger", "0")),
            # Followers learn a new high watermark at once, without ticks in the scripts (the
            # linger has its own tests in test_node_rules.py).
            high_watermark_linger_ms=0,
            fetch_bytes_max=int(options.get("fetch-bytes", str(8 << 20))),
        )
        ids = [*range(1, voters + 1), *range(OBSERVER_BASE_ID, OBSERVER_BASE_ID + observers)]
        for node_id in ids:
            host = ScenarioHost(node_id, config)
            self.hosts[node_id] = host
            self.clocks[node_id] = 0
            host.start(0)
        self.settle()
        self.cmd_status([], {})

    def cmd_tick(self, args: list[str], options: dict[str, str]) -> None:
        for host in self.targets(args[:-1]):
            self.clocks[host.node_id] += int(args[-1])
            if host.node is not None:
                host.node.tick(self.clocks[host.node_id])
        self.settle()

    def cmd_campaign(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        for _ in range(10):
            node = host.node
            assert node is not None
            if node.status().role in ("prospective", "candidate"):
                return
            wake = node.wake_at_ms()
            assert wake is not None
            self.clocks[host.node_id] = max(self.clocks[host.node_id], wake)
            node.tick(self.clocks[host.node_id])
            self.settle()
        raise AssertionError(f"node {host.node_id} did not campaign")

    def _take_queue(self, args: list[str], source: str | None = None) -> list[Message]:
        wanted = {int(a) for a in args} if args else None
        taken = [
            m
            for m in self.queue
            if (wanted is None or m.destination_id in wanted)
            and (source is None or m.source_id == int(source))
        ]
        self.queue = [m for m in self.queue if m not in taken]
        return taken

    def cmd_deliver_msgs(self, args: list[str], options: dict[str, str]) -> None:
        for message in self._take_queue(args, options.get("from")):
            self.deliver(message)

    def cmd_stabilize(self, args: list[str], options: dict[str, str]) -> None:
        for _ in range(100):
            batch = self._take_queue(args)
            if not batch:
                return
            for message in batch:
                self.deliver(message)
        raise AssertionError("stabilize: messages keep flowing after 100 rounds")

    def cmd_drop_msgs(self, args: list[str], options: dict[str, str]) -> None:
        for message in self._take_queue(args):
            self.say(f"drop {format_message(message)}")

    def cmd_propose(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        assert host.node is not None
        try:
            result = host.node.propose(
                [value.encode() for value in args[1:]], self.clocks[host.node_id]
            )
        except ReplogError as e:
            self.say(f"error: {type(e).__name__}: {e}")
            return
        self.say(
            f"proposed epoch={result.quorum_epoch} "
            f"offsets={result.base_offset}..{result.last_offset}"
        )
        self.settle()

    def cmd_resign(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        assert host.node is not None
        self.say("resigned" if host.node.resign(self.clocks[host.node_id]) else "not the leader")
        self.settle()

    def cmd_partition(self, args: list[str], options: dict[str, str]) -> None:
        groups = " ".join(args).split("|")
        self.groups = [frozenset(int(x) for x in group.split()) for group in groups]
        self.say("partitioned " + " | ".join(" ".join(map(str, sorted(g))) for g in self.groups))

    def cmd_heal(self, args: list[str], options: dict[str, str]) -> None:
        self.groups = []
        self.say("healed")

    def cmd_crash(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        kept = host.flushed_end_offset
        host.crash()
        self.say(f"crashed node {host.node_id}; log keeps offsets < {kept}")
        self.show_role(host.node_id, host)

    def cmd_restart(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        host.start(self.clocks[host.node_id])
        self.settle()
        self.cmd_status([args[0]], {})

    def cmd_snapshot(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        assert host.node is not None
        snapshot_id = host.node.create_snapshot(
            host.machine.next_offset, host.machine.snapshot_bytes(), self.clocks[host.node_id]
        )
        self.settle()
        self.say(f"snapshot {snapshot_id.file_name()}")

    def cmd_compact(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        assert host.node is not None
        latest = host.log.snapshot_ids()[-1]
        host.node.delete_log_prefix(latest, self.clocks[host.node_id])
        self.settle()
        self.say(f"log start offset {host.log.log_start_offset}")

    def cmd_describe(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        assert host.node is not None
        request = Message(CLIENT_ID, host.node_id, DescribeQuorumRequest(correlation_id=1))
        host.node.step(request, self.clocks[host.node_id])
        for message in host.process_all():
            if message.destination_id == CLIENT_ID:
                self.say(format_message(message))
            else:
                self.queue.append(message)

    def cmd_status(self, args: list[str], options: dict[str, str]) -> None:
        for host in self.targets(args):
            if host.node is None:
                self.say(f"{host.node_id}: down")
                continue
            s = host.node.status()
            kind = "voter" if s.is_voter else "observer"
            self.say(
                f"{s.node_id}: {kind} {s.role} epoch={s.quorum_epoch} "
                f"leader={_leader(s.leader_id)} "
                f"voted={_leader(s.voted_id)} log=[{s.log_start_offset},{s.log_end_offset}) "
                f"last_epoch={s.last_quorum_epoch} hw={s.high_watermark} applied={s.applied_offset}"
            )
            self.show_role(host.node_id, host)

    def cmd_log(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        log = host.log
        snapshots = " ".join(s.file_name() for s in log.snapshot_ids())
        self.say(
            f"start={log.log_start_offset} end={log.log_end_offset} "
            f"flushed={host.flushed_end_offset} snapshots=[{snapshots}]"
        )
        for data in stored_batches(log):
            header = read_header(data)
            if header.is_control:
                content = "LeaderChange"
            else:
                content = ",".join((r.value or b"").decode() for r in RecordBatch.parse(data))
            self.say(
                f"  [{header.base_offset},{header.next_offset}) "
                f"epoch={header.partition_leader_epoch} {content}"
            )

    def cmd_committed(self, args: list[str], options: dict[str, str]) -> None:
        host = self.host(args[0])
        machine = host.machine
        values = " ".join(f"{offset}:{value.decode()}" for offset, value in machine.values)
        self.say(f"next_offset={machine.next_offset} values=[{values}]")


def run_command(env: ScenarioEnv, line: str) -> list[str]:
    return dispatch(env, line)
