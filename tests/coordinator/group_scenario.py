"""Classic consumer groups driven by text commands, for the scripts in testdata/groups/.

A script is blocks separated by blank lines: `#` comment lines, one command, ``----`` and the
lines the command prints. One `ClassicGroupCoordinator` runs on a manual clock; member ids are
`<client or instance id>-<n>` with n counting up from 1, so scripts can name them. Every
JoinGroup and SyncGroup gets a request number `#n`; its answer is printed when it comes,
whichever later command causes it. After each command the groups whose state, generation,
leader or members changed print one line each.

Commands (G a group, M a member id, "-" for the empty member id):
    config KEY=VALUE...          delay=, max-size=, min-session=, max-session= (before joins)
    join G M [client=C] [instance=I] [protocols=NAME:META,...] [type=T] [session=MS]
             [rebalance=MS] [v=VERSION]
    sync G M gen=N [instance=I] [assign=M:BYTES,...] [type=T] [protocol=P]
    heartbeat G M gen=N [instance=I]
    leave G M[/INSTANCE]...
    advance MS                   move the clock, fire the timers due
    describe G... / list [states=S,...] / delete G... / timers
    commit G gen=N member=M [instance=I]
    unload                       this broker stops coordinating: groups Dead
    failover                     unload, then a new coordinator replays every record written
    fail                         the append of the previous command's records failed: they
                                 leave the log, the core undoes them (`append_failed`), and
                                 the answers that command printed went out with the error;
                                 any other command first acknowledges the previous records
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from replog.coordinator.classic_group import ClassicGroup
from replog.coordinator.classic_group_coordinator import (
    ClassicGroupConfig,
    ClassicGroupCoordinator,
)
from replog.coordinator.classic_group_messages import (
    GroupRecord,
    GroupResult,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    SyncGroupRequest,
)
from replog.coordinator.group_records import decode_group_value, encode_group_value
from replog.errors import KafkaError

SEPARATOR = "----"
Handler = Callable[[list[str], dict[str, str]], None]


def _error(error: KafkaError | None) -> str:
    return "ok" if error is None else error.error_name


def _member(text: str) -> str:
    return "" if text == "-" else text


def _pairs(text: str) -> tuple[tuple[str, bytes], ...]:
    pairs = []
    for item in text.split(","):
        name, _, value = item.partition(":")
        pairs.append((name, value.encode()))
    return tuple(pairs)


def summary(group: ClassicGroup) -> str:
    members = " ".join(
        m.member_id if m.group_instance_id is None else f"{m.member_id}({m.group_instance_id})"
        for m in group.members.values()
    )
    pending = (
        f" pending=[{' '.join(sorted(group.pending_members))}]" if group.pending_members else ""
    )
    return (
        f"{group.state.value} gen={group.generation} leader={group.leader_id or '-'} "
        f"members=[{members}]{pending}"
    )


def record_line(record: GroupRecord) -> str:
    if record.value is None:
        return f"record {record.key.group}: tombstone"
    value = record.value
    members = " ".join(f"{m.member_id}={m.assignment.decode()}" for m in value.members)
    return (
        f"record {record.key.group}: gen={value.generation} protocol={value.protocol or '-'} "
        f"leader={value.leader or '-'} members=[{members}]"
    )


class GroupScenario:
    """The coordinator, its clock and every record it wrote (the partition's log)."""

    def __init__(self) -> None:
        self.config = ClassicGroupConfig(initial_rebalance_delay_ms=0)
        self.now_ms = 0
        self._uuid = 0
        self.coordinator = self._new_coordinator()
        self.log: list[GroupRecord] = []
        self.out: list[str] = []
        self._next_request = 0
        # The previous command's records, not yet acknowledged, and where they start in the log.
        self.inflight: list[GroupRecord] = []
        self.inflight_at = 0

    def _new_uuid(self) -> str:
        self._uuid += 1
        return str(self._uuid)

    def _new_coordinator(self) -> ClassicGroupCoordinator:
        return ClassicGroupCoordinator(self.config, self._new_uuid)

    def _request(self) -> int:
        self._next_request += 1
        return self._next_request

    def run(self, line: str) -> list[str]:
        words = line.split()
        args = [w for w in words[1:] if "=" not in w]
        options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        handler: Handler | None = getattr(self, "cmd_" + words[0], None)
        if handler is None:
            raise ValueError(f"unknown command {words[0]!r}")
        before = {gid: summary(g) for gid, g in self.coordinator.groups.items()}
        self.out = []
        if words[0] != "fail":
            self.coordinator.appended(self.inflight)
            self.inflight, self.inflight_at = [], len(self.log)
        handler(args, options)
        for gid, group in sorted(self.coordinator.groups.items()):
            now = summary(group)
            if before.get(gid) != now:
                self.out.append(f"{gid}: {now}")
        for gid in sorted(set(before) - set(self.coordinator.groups)):
            self.out.append(f"{gid}: gone")
        return self.out or ["ok"]

    def show(self, result: GroupResult) -> None:
        for record in result.records:
            assert isinstance(record, GroupRecord)  # no consumer-protocol group here
            # Through the bytes, as the log would keep it.
            value = (
                None
                if record.value is None
                else decode_group_value(encode_group_value(record.value))
            )
            self.log.append(GroupRecord(record.key, value))
            self.inflight.append(record)
            self.out.append(record_line(record))
        for join in result.joins:
            if join.error is not None:
                self.out.append(
                    f"#{join.request_id} join: {_error(join.error)} member={join.member_id or '-'}"
                )
                continue
            line = (
                f"#{join.request_id} join: ok member={join.member_id} gen={join.generation_id} "
                f"protocol={join.protocol_name} leader={join.leader or '-'}"
            )
            if join.members:
                line += (
                    " members=["
                    + " ".join(f"{m.member_id}:{m.metadata.decode()}" for m in join.members)
                    + "]"
                )
            if join.skip_assignment:
                line += " skip-assignment"
            self.out.append(line)
        for sync in result.syncs:
            if sync.error is not None:
                self.out.append(f"#{sync.request_id} sync: {_error(sync.error)}")
            else:
                self.out.append(
                    f"#{sync.request_id} sync: ok protocol={sync.protocol_name} "
                    f"assignment={sync.assignment.decode() or '-'}"
                )
        for request_id in result.superseded:
            self.out.append(f"#{request_id} superseded")

    def _parked(self, request_id: int, result: GroupResult, kind: str) -> None:
        answers = result.joins if kind == "join" else result.syncs
        if all(answer.request_id != request_id for answer in answers):
            self.out.append(f"#{request_id} {kind} waits")

    def cmd_config(self, args: list[str], options: dict[str, str]) -> None:
        names = {
            "delay": "initial_rebalance_delay_ms",
            "max-size": "max_size",
            "min-session": "min_session_timeout_ms",
            "max-session": "max_session_timeout_ms",
        }
        fields = {names[key]: int(value) for key, value in options.items()}
        self.config = dataclasses.replace(self.config, **fields)
        self.coordinator = self._new_coordinator()

    def cmd_join(self, args: list[str], options: dict[str, str]) -> None:
        request = JoinGroupRequest(
            group_id=_member(args[0]),
            member_id=_member(args[1]),
            protocol_type=options.get("type", "consumer"),
            protocols=_pairs(options.get("protocols", "range:s")),
            session_timeout_ms=int(options.get("session", "10000")),
            rebalance_timeout_ms=int(options.get("rebalance", "30000")),
            group_instance_id=options.get("instance"),
            client_id=options.get("client", "c"),
            api_version=int(options.get("v", "9")),
        )
        request_id = self._request()
        result = self.coordinator.join(request, request_id, self.now_ms)
        self._parked(request_id, result, "join")
        self.show(result)

    def cmd_sync(self, args: list[str], options: dict[str, str]) -> None:
        assign = options.get("assign")
        request = SyncGroupRequest(
            group_id=_member(args[0]),
            member_id=_member(args[1]),
            generation_id=int(options["gen"]),
            group_instance_id=options.get("instance"),
            protocol_type=options.get("type"),
            protocol_name=options.get("protocol"),
            assignments=_pairs(assign) if assign else (),
        )
        request_id = self._request()
        result = self.coordinator.sync(request, request_id, self.now_ms)
        self._parked(request_id, result, "sync")
        self.show(result)

    def cmd_heartbeat(self, args: list[str], options: dict[str, str]) -> None:
        request = HeartbeatRequest(
            args[0], _member(args[1]), int(options["gen"]), options.get("instance")
        )
        self.out.append(f"heartbeat: {_error(self.coordinator.heartbeat(request, self.now_ms))}")

    def cmd_leave(self, args: list[str], options: dict[str, str]) -> None:
        members = []
        for who in args[1:]:
            member_id, _, instance = who.partition("/")
            members.append(LeaveMember(_member(member_id), instance or None))
        response, result = self.coordinator.leave(
            LeaveGroupRequest(args[0], tuple(members)), self.now_ms
        )
        per_member = " ".join(
            f"{m.member_id or '-'}{'/' + m.group_instance_id if m.group_instance_id else ''}"
            f"={_error(m.error)}"
            for m in response.members
        )
        self.out.append(f"leave: {_error(response.error)} {per_member}".rstrip())
        self.show(result)

    def cmd_advance(self, args: list[str], options: dict[str, str]) -> None:
        self.now_ms += int(args[0])
        self.show(self.coordinator.tick(self.now_ms))

    def cmd_describe(self, args: list[str], options: dict[str, str]) -> None:
        for group in self.coordinator.describe(args):
            members = " ".join(
                f"{m.member_id}:{m.metadata.decode() or '-'}/{m.assignment.decode() or '-'}"
                for m in group.members
            )
            self.out.append(
                f"{group.group_id}: {_error(group.error)} state={group.state} "
                f"type={group.protocol_type or '-'} protocol={group.protocol_data or '-'} "
                f"members=[{members}]"
            )

    def cmd_list(self, args: list[str], options: dict[str, str]) -> None:
        states = options["states"].split(",") if "states" in options else []
        listed = self.coordinator.list_groups(states)
        self.out.append(
            "groups: " + (" ".join(f"{g.group_id}:{g.state}" for g in listed) or "none")
        )

    def cmd_delete(self, args: list[str], options: dict[str, str]) -> None:
        answers, result = self.coordinator.delete(args, self.now_ms)
        self.out.append("delete: " + " ".join(f"{g}={_error(e)}" for g, e in answers))
        self.show(result)

    def cmd_commit(self, args: list[str], options: dict[str, str]) -> None:
        error = self.coordinator.commit_error(
            args[0], int(options["gen"]), _member(options["member"]), options.get("instance")
        )
        self.out.append(f"commit: {_error(error)}")

    def cmd_timers(self, args: list[str], options: dict[str, str]) -> None:
        for deadline, group, kind, member in self.coordinator.timers():
            self.out.append(f"timer {group} {kind}{' ' + member if member else ''} at {deadline}")

    def cmd_unload(self, args: list[str], options: dict[str, str]) -> None:
        self.show(self.coordinator.unload())

    def cmd_fail(self, args: list[str], options: dict[str, str]) -> None:
        failed, self.inflight = self.inflight, []
        del self.log[self.inflight_at :]
        self.out.append(f"failed {len(failed)} records")
        self.show(self.coordinator.append_failed(failed, self.now_ms))

    def cmd_failover(self, args: list[str], options: dict[str, str]) -> None:
        self.show(self.coordinator.unload())
        self.coordinator = self._new_coordinator()
        for record in self.log:
            self.coordinator.replay(record.key, record.value)
        self.coordinator.loaded(self.now_ms)
        self.out.append(f"replayed {len(self.log)} records")


def parse(text: str) -> list[tuple[list[str], str, list[str]]]:
    """(comments, command, expected output) of each block of a script."""
    blocks: list[tuple[list[str], str, list[str]]] = []
    for chunk in text.strip("\n").split("\n\n"):
        lines = chunk.split("\n")
        count = 0
        while count < len(lines) and lines[count].startswith("#"):
            count += 1
        comments, rest = lines[:count], lines[count:]
        if not rest:
            blocks.append((comments, "", []))
            continue
        if len(rest) < 2 or rest[1] != SEPARATOR:
            raise ValueError(f"block {chunk!r}: a command, then {SEPARATOR!r}, then its output")
        blocks.append((comments, rest[0], rest[2:]))
    return blocks


class Scenario(Protocol):
    def run(self, line: str) -> list[str]: ...


def run(path: Path, new: Callable[[], Scenario] = GroupScenario) -> tuple[str, str]:
    """(expected, actual) text of a script, run by a fresh scenario from `new`."""
    expected = path.read_text()
    scenario = new()
    chunks = []
    for comments, command, _ in parse(expected):
        lines = list(comments)
        if command:
            try:
                output = scenario.run(command)
            except Exception as error:
                raise AssertionError(f"{path.name}: {command}: {error!r}") from error
            lines += [command, SEPARATOR, *output]
        chunks.append("\n".join(lines))
    return expected, "\n\n".join(chunks) + "\n"


def diff(path: Path, expected: str, actual: str) -> str:
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{path.name} (expected)",
            tofile=f"{path.name} (actual)",
        )
    )
