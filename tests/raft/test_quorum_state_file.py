"""The quorum-state file format: Kafka's examples, round trips, and every kind of corrupt file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.checkpoints import (
    QUORUM_STATE,
    QuorumStateData,
    parse_quorum_state,
    render_quorum_state,
)
from replog.errors import CorruptCheckpointError
from replog.quorum.raft import ElectionState

SOURCE = f"/data/metadata/{QUORUM_STATE}"
INT32_MAX = 2**31 - 1


def test_kafka_version_0_example() -> None:
    data = (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}\n'
    )
    state = parse_quorum_state(data, source=SOURCE)
    assert state == QuorumStateData(quorum_epoch=2, leader_id=1, current_voters=(1, 2, 3))
    assert render_quorum_state(state) == data


def test_kafka_version_1_example() -> None:
    data = (
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
        b'"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    state = parse_quorum_state(data, source=SOURCE)
    assert state == QuorumStateData(
        quorum_epoch=2, voted_id=1, voted_directory_id="AAAAAAAAAAAAAAAAAAAAAA", data_version=1
    )


def test_only_the_first_line_counts_and_defaults_fill_missing_keys() -> None:
    state = parse_quorum_state(b'{"data_version":0}\ngarbage', source=SOURCE)
    assert state == QuorumStateData()
    assert ElectionState.from_file_data(state) == ElectionState(0)


ids = st.integers(-1, INT32_MAX)


@given(
    epoch=st.integers(-1, INT32_MAX),
    leader=ids,
    voted=ids,
    voters=st.lists(st.integers(0, INT32_MAX), max_size=5).map(tuple),
)
def test_round_trip(epoch: int, leader: int, voted: int, voters: tuple[int, ...]) -> None:
    state = QuorumStateData(
        quorum_epoch=epoch, leader_id=leader, voted_id=voted, current_voters=voters
    )
    assert parse_quorum_state(render_quorum_state(state), source=SOURCE) == state


@given(st.integers(0, 1000), st.none() | st.integers(0, 9), st.none() | st.integers(0, 9))
def test_election_state_round_trip(epoch: int, leader: int | None, voted: int | None) -> None:
    state = ElectionState(epoch, leader, voted)
    data = render_quorum_state(state.to_file_data((1, 2, 3)))
    assert ElectionState.from_file_data(parse_quorum_state(data, source=SOURCE)) == state


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty file"),
        (b"\n", "empty file"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"leaderEpoch":1', "not JSON"),
        (b"[1, 2]", "expected a JSON object, found list"),
        (b'{"leaderEpoch":1}', "missing data_version"),
        (b'{"data_version":2}', "unsupported data_version 2"),
        (b'{"data_version":true}', "unsupported data_version True"),
        (b'{"data_version":0,"votedDirectoryId":"x"}', "does not define votedDirectoryId"),
        (b'{"data_version":1,"currentVoters":[]}', "does not define currentVoters"),
        (b'{"data_version":0,"leaderEpoch":"3"}', "leaderEpoch '3' is not an integer"),
        (b'{"data_version":0,"leaderEpoch":true}', "leaderEpoch True is not an integer"),
        (b'{"data_version":0,"leaderEpoch":-2}', "leaderEpoch -2 is outside"),
        (b'{"data_version":0,"votedId":2147483648}', "votedId 2147483648 is outside"),
        (b'{"data_version":0,"appliedOffset":-1}', "appliedOffset -1 is outside"),
        (b'{"data_version":0,"clusterId":7}', "clusterId 7 is not a string"),
        (b'{"data_version":0,"currentVoters":{}}', "currentVoters {} is not a list"),
        (b'{"data_version":0,"currentVoters":[{"id":1}]}', "currentVoters entry"),
        (b'{"data_version":0,"currentVoters":[{"voterId":-1}]}', "voterId -1 is not"),
    ],
)
def test_corrupt_files_name_the_file_and_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptCheckpointError) as caught:
        parse_quorum_state(data, source=SOURCE)
    message = str(caught.value)
    assert message.startswith(f"{SOURCE}: "), message
    assert reason in message, message


def test_rendering_refuses_what_parsing_would_refuse() -> None:
    with pytest.raises(ValueError, match="leaderEpoch -2"):
        render_quorum_state(QuorumStateData(quorum_epoch=-2))
    with pytest.raises(ValueError, match="data_version 1"):
        render_quorum_state(QuorumStateData(voted_directory_id="x"))
    with pytest.raises(ValueError, match="unsupported data_version 3"):
        render_quorum_state(QuorumStateData(data_version=3))
