"""The `quorum-state` file: a Raft node's persisted election state (quorum epoch, leader, vote).

Raft's core (`replog.quorum.raft`) must never forget, across a crash, which quorum epoch it reached,
whom it voted for in that epoch and whom it knew as leader: forgetting the vote lets a node vote
twice in one epoch, and two leaders can then be elected. The shell writes this file to
`quorum-state.tmp`, fsyncs it, renames it over `quorum-state` and fsyncs the directory, before it
sends any message that the new state implies. This module is the format only: bytes to values
and back.

Grammar (one line of compact JSON, UTF-8, ending in ``\\n``; readers look at the first line)::

    version 0 (static voter set):
      {"clusterId":"<str>","leaderId":<int32>,"leaderEpoch":<int32>,"votedId":<int32>,
       "appliedOffset":<int64>,"currentVoters":[{"voterId":<int32>},...],"data_version":0}
    version 1 (KIP-853 voter keys):
      {"leaderId":<int32>,"leaderEpoch":<int32>,"votedId":<int32>,
       "votedDirectoryId":"<str>","data_version":1}

    leaderEpoch  the quorum epoch (Raft term), -1 when none was ever reached
    leaderId     the leader known in that epoch, -1 when none is known
    votedId      the voter this node voted for in that epoch, -1 when it has not voted

Worked example: node 2 voted for node 1 in quorum epoch 5 and knows no leader yet::

    QuorumStateData(quorum_epoch=5, leader_id=-1, voted_id=1, current_voters=(1, 2, 3))
    ->  {"clusterId":"","leaderId":-1,"leaderEpoch":5,"votedId":1,"appliedOffset":0,
         "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

Rules:
- `data_version` is required and must be 0 or 1. Every other key is optional and takes its
  default (-1 for ids and the epoch, 0 for `appliedOffset`, empty for the rest) when absent.
- Keys that the version does not define are rejected, as are values of the wrong JSON type (a
  boolean is not an integer here) or outside their range: ids and the epoch in
  [-1, 2**31 - 1], `appliedOffset` in [0, 2**63 - 1].
- Every problem raises `CorruptCheckpointError` naming the file (`source`) and the reason.
  Rendering refuses what parsing would refuse, with ValueError.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from replog.checkpoints.text_format import INT32_MAX, INT64_MAX, decode_utf8
from replog.errors import CorruptCheckpointError

QUORUM_STATE = "quorum-state"
QUORUM_STATE_TEMP = "quorum-state.tmp"
NO_ID = -1
NO_QUORUM_EPOCH = -1

_V0_KEYS = frozenset(
    {"clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters"}
)
_V1_KEYS = frozenset({"leaderId", "leaderEpoch", "votedId", "votedDirectoryId"})
_KEYS_BY_VERSION = {0: _V0_KEYS, 1: _V1_KEYS}
_INTEGER_RANGES = {
    "leaderId": (NO_ID, INT32_MAX),
    "leaderEpoch": (NO_QUORUM_EPOCH, INT32_MAX),
    "votedId": (NO_ID, INT32_MAX),
    "appliedOffset": (0, INT64_MAX),
}


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """The content of one `quorum-state` file; -1 means "none" as in Kafka's file."""

    quorum_epoch: int = NO_QUORUM_EPOCH
    leader_id: int = NO_ID
    voted_id: int = NO_ID
    current_voters: tuple[int, ...] = ()
    cluster_id: str = ""
    applied_offset: int = 0
    voted_directory_id: str = ""
    data_version: int = 0


def _is_json_integer(value: object) -> bool:
    # bool is a subclass of int in Python, but `true` is not an integer in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def _integer_problem(key: str, value: object) -> str | None:
    low, high = _INTEGER_RANGES[key]
    if not _is_json_integer(value):
        return f"{key} {value!r} is not an integer"
    assert isinstance(value, int)
    if not low <= value <= high:
        return f"{key} {value} is outside [{low}, {high}]"
    return None


def render_quorum_state(state: QuorumStateData) -> bytes:
    """The file content for `state`; ValueError for anything `parse_quorum_state` would refuse."""
    content: dict[str, object]
    if state.data_version == 0:
        if state.voted_directory_id:
            raise ValueError("votedDirectoryId needs data_version 1")
        content = {
            "clusterId": state.cluster_id,
            "leaderId": state.leader_id,
            "leaderEpoch": state.quorum_epoch,
            "votedId": state.voted_id,
            "appliedOffset": state.applied_offset,
            "currentVoters": [{"voterId": voter_id} for voter_id in state.current_voters],
        }
    elif state.data_version == 1:
        if state.current_voters or state.cluster_id or state.applied_offset:
            raise ValueError("data_version 1 keeps voters in the log, not in quorum-state")
        content = {
            "leaderId": state.leader_id,
            "leaderEpoch": state.quorum_epoch,
            "votedId": state.voted_id,
            "votedDirectoryId": state.voted_directory_id,
        }
    else:
        raise ValueError(f"unsupported data_version {state.data_version}, expected 0 or 1")
    for key in _INTEGER_RANGES.keys() & content.keys():
        problem = _integer_problem(key, content[key])
        if problem is not None:
            raise ValueError(problem)
    for voter_id in state.current_voters:
        if not 0 <= voter_id <= INT32_MAX:
            raise ValueError(f"voterId {voter_id} is outside [0, {INT32_MAX}]")
    content["data_version"] = state.data_version
    line = json.dumps(content, separators=(",", ":")) + "\n"
    data = line.encode("utf-8")
    # Pair the write with the read: what replog writes, replog must read back unchanged.
    assert parse_quorum_state(data, source="<render>") == state
    return data


def parse_quorum_state(data: bytes, *, source: str) -> QuorumStateData:
    """The election state held by a `quorum-state` file; `source` names the file in errors."""

    def corrupt(reason: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{source}: {reason}")

    text = decode_utf8(data, source=source)
    first_line = text.split("\n", 1)[0]
    if not first_line.strip():
        raise corrupt("empty file, expected one line of JSON")
    try:
        content = json.loads(first_line)
    except json.JSONDecodeError as e:
        raise corrupt(f"not JSON: {e}") from None
    if not isinstance(content, dict):
        raise corrupt(f"expected a JSON object, found {type(content).__name__}")
    if "data_version" not in content:
        raise corrupt("missing data_version")
    version = content.pop("data_version")
    if not _is_json_integer(version) or version not in _KEYS_BY_VERSION:
        raise corrupt(f"unsupported data_version {version!r}, expected 0 or 1")
    unknown = sorted(content.keys() - _KEYS_BY_VERSION[version])
    if unknown:
        raise corrupt(f"data_version {version} does not define {', '.join(unknown)}")
    for key in _INTEGER_RANGES.keys() & content.keys():
        problem = _integer_problem(key, content[key])
        if problem is not None:
            raise corrupt(problem)
    for key in ("clusterId", "votedDirectoryId"):
        if key in content and not isinstance(content[key], str):
            raise corrupt(f"{key} {content[key]!r} is not a string")
    return QuorumStateData(
        quorum_epoch=content.get("leaderEpoch", NO_QUORUM_EPOCH),
        leader_id=content.get("leaderId", NO_ID),
        voted_id=content.get("votedId", NO_ID),
        current_voters=_parse_voters(content.get("currentVoters", []), corrupt),
        cluster_id=content.get("clusterId", ""),
        applied_offset=content.get("appliedOffset", 0),
        voted_directory_id=content.get("votedDirectoryId", ""),
        data_version=version,
    )


def _parse_voters(
    value: object, corrupt: Callable[[str], CorruptCheckpointError]
) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise corrupt(f"currentVoters {value!r} is not a list")
    voters: list[int] = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"voterId"}:
            raise corrupt(f'currentVoters entry {entry!r} is not {{"voterId": <int>}}')
        voter_id = entry["voterId"]
        if not _is_json_integer(voter_id) or not 0 <= voter_id <= INT32_MAX:
            raise corrupt(f"voterId {voter_id!r} is not an integer in [0, {INT32_MAX}]")
        voters.append(voter_id)
    return tuple(voters)
