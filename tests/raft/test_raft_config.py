"""Quorum configuration: Kafka's property names and defaults, and errors that name the key."""

from __future__ import annotations

import pytest

from replog.errors import ConfigError
from replog.quorum.raft import RaftConfig, VoterAddress, parse_voters

VOTERS = "controller.quorum.voters"


def test_defaults_are_kafkas() -> None:
    config = RaftConfig.from_properties({VOTERS: "1@localhost:9093"})
    assert (
        config.election_timeout_ms,
        config.fetch_timeout_ms,
        config.election_backoff_ms_max,
        config.request_timeout_ms,
        config.append_linger_ms,
        config.retry_backoff_ms,
    ) == (1000, 2000, 1000, 2000, 25, 20)
    assert config.check_quorum_timeout_ms == 3000
    assert config.begin_quorum_epoch_resend_ms == 1000


def test_dotted_names_map_to_fields_and_other_components_keys_are_ignored() -> None:
    config = RaftConfig.from_properties(
        {
            VOTERS: "1@a:1,2@b:2,3@[::1]:3",
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": " 600 ",
            "controller.quorum.election.backoff.max.ms": "200",
            "controller.quorum.request.timeout.ms": "900",
            "controller.quorum.append.linger.ms": "0",
            "controller.quorum.retry.backoff.ms": "5",
            "node.id": "1",
            "log.dirs": "/tmp/x",
        }
    )
    assert config.voters == (
        VoterAddress(1, "a", 1),
        VoterAddress(2, "b", 2),
        VoterAddress(3, "::1", 3),
    )
    assert config.voter_ids == {1, 2, 3}
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (300, 600)
    assert (config.election_backoff_ms_max, config.request_timeout_ms) == (200, 900)
    assert (config.append_linger_ms, config.retry_backoff_ms) == (0, 5)


@pytest.mark.parametrize(
    ("properties", "key", "reason"),
    [
        ({}, VOTERS, "required"),
        ({VOTERS: ""}, VOTERS, "expected id@host:port"),
        ({VOTERS: "1@h"}, VOTERS, "expected host:port"),
        ({VOTERS: "x@h:1"}, VOTERS, "node id 'x'"),
        ({VOTERS: "-1@h:1"}, VOTERS, "node id '-1'"),
        ({VOTERS: "1@h:0"}, VOTERS, "port '0'"),
        ({VOTERS: "1@h:70000"}, VOTERS, "port '70000'"),
        ({VOTERS: "1@::1:9"}, VOTERS, "IPv6 host must be written in brackets"),
        ({VOTERS: "1@a:1,1@b:2"}, VOTERS, "voter ids repeat"),
        (
            {VOTERS: "1@a:1", "controller.quorum.election.timeout.ms": "soon"},
            "controller.quorum.election.timeout.ms",
            "expected an integer",
        ),
        (
            {VOTERS: "1@a:1", "controller.quorum.election.timeout.ms": "1_000"},
            "controller.quorum.election.timeout.ms",
            "expected an integer",
        ),
        (
            {VOTERS: "1@a:1", "controller.quorum.fetch.timeout.ms": "0"},
            "controller.quorum.fetch.timeout.ms",
            "must be an integer >= 1",
        ),
        (
            {VOTERS: "1@a:1", "controller.quorum.append.linger.ms": "-1"},
            "controller.quorum.append.linger.ms",
            "must be an integer >= 0",
        ),
        (
            {VOTERS: "1@a:1", "controller.quorum.request.timeout.ms": "100"},
            "controller.quorum.request.timeout.ms",
            "must exceed the fetch wait",
        ),
        (
            {VOTERS: "1@a:1", "controller.quorum.electon.timeout.ms": "5"},
            "controller.quorum.electon.timeout.ms",
            "unknown quorum property",
        ),
    ],
)
def test_errors_name_the_property(properties: dict[str, str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RaftConfig.from_properties(properties)
    message = str(caught.value)
    assert message.startswith(key + ":"), message
    assert reason in message, message


def test_parse_voters_keeps_the_order() -> None:
    assert [v.node_id for v in parse_voters("3@c:3, 1@a:1")] == [3, 1]


def test_the_high_watermark_linger_may_be_zero_but_not_negative() -> None:
    voters = (VoterAddress(1, "a", 1),)
    assert RaftConfig(voters=voters, high_watermark_linger_ms=0).high_watermark_linger_ms == 0
    with pytest.raises(ConfigError, match=r"^high_watermark_linger_ms: must be an integer >= 0"):
        RaftConfig(voters=voters, high_watermark_linger_ms=-1)


def test_integers_are_read_as_kafka_reads_them() -> None:
    # Java's Long.parseLong after a trim: a leading '+' is a number.
    config = RaftConfig.from_properties(
        {VOTERS: "1@a:1", "controller.quorum.election.timeout.ms": " +1500 "}
    )
    assert config.election_timeout_ms == 1500
