"""`replog features` against scripted fake Kafka listeners: the UpdateFeatures each form of
`upgrade`, `downgrade` and `disable` sends (levels, upgrade types at v1 or later, the dry
run), kafka-features.sh's lines for success and refusal, `--bootstrap-controller` asking the
next controller after NOT_CONTROLLER, and the argument errors Kafka's tool gives, before any
request.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli_runner import replog
from fake_kafka_listener import FakeKafkaListener, listening

from replog.kafka.messages import update_features_response as ufr

REFUSED = (
    "The update failed for all features since the following feature had an error: Invalid "
    "update version 3 for feature transaction.version. Local controller 1 only supports "
    "versions 0-2"
)


@pytest.fixture(autouse=True)
def no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLOG_DEBUG", raising=False)


@pytest.fixture
def broker() -> Iterator[FakeKafkaListener]:
    with listening() as (listener,):
        listener.script("UpdateFeatures", ufr.UpdateFeaturesResponse(error_message=None))
        yield listener


def sent(listener: FakeKafkaListener) -> list[tuple[str, int, int]]:
    (request,) = listener.asked("UpdateFeatures")
    return [(u.feature, u.max_version_level, u.upgrade_type) for u in request.feature_updates]


def test_upgrade_sends_the_levels_and_prints_each_feature(broker: FakeKafkaListener) -> None:
    done = replog(
        "features", "upgrade", "--feature", "transaction.version=2", "--metadata", "3.6-IV0",
        "--bootstrap-server", broker.address,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        " `metadata` flag is deprecated and may be removed in a future release.\n"
        "metadata.version was upgraded to 12.\n"
        "transaction.version was upgraded to 2.\n"
    )
    assert sent(broker) == [("metadata.version", 12, 1), ("transaction.version", 2, 1)]
    assert broker.versions("UpdateFeatures") == [2]
    assert broker.asked("UpdateFeatures")[0].validate_only is False


def test_a_release_version_downgrade_sets_every_feature(broker: FakeKafkaListener) -> None:
    done = replog(
        "features", "downgrade", "--release-version", "3.5", "--unsafe", "--dry-run",
        "--bootstrap-server", broker.address,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "eligible.leader.replicas.version can be downgraded to 0.\n"
        "metadata.version can be downgraded to 11.\n"
        "transaction.version can be downgraded to 0.\n"
    )
    assert sorted(sent(broker)) == [
        ("eligible.leader.replicas.version", 0, 3),
        ("metadata.version", 11, 3),
        ("transaction.version", 0, 3),
    ]
    assert broker.asked("UpdateFeatures")[0].validate_only is True


def test_a_refusal_is_every_features_line_and_exit_1(broker: FakeKafkaListener) -> None:
    refusal = ufr.UpdateFeaturesResponse(error_code=95, error_message=REFUSED)
    broker.script("UpdateFeatures", refusal)
    refused = replog(
        "features", "disable", "--feature", "transaction.version", "--feature", "group.version",
        "--bootstrap-server", broker.address,
    )  # fmt: skip
    assert refused.returncode == 1
    assert refused.stdout == (
        f"Could not disable group.version. {REFUSED}\n"
        f"Could not disable transaction.version. {REFUSED}\n"
    )
    assert refused.stderr == "replog features: 2 out of 2 operation(s) failed.\n"
    assert sorted(sent(broker)) == [
        ("group.version", 0, 2),
        ("transaction.version", 0, 2),
    ]


def test_bootstrap_controller_asks_the_next_controller_after_not_controller() -> None:
    with listening(2) as (standby, active):
        standby.script(
            "UpdateFeatures", ufr.UpdateFeaturesResponse(error_code=41, error_message="standby")
        )
        active.script("UpdateFeatures", ufr.UpdateFeaturesResponse(error_message=None))
        done = replog(
            "features", "upgrade", "--feature", "metadata.version=12",
            "--bootstrap-controller", f"{standby.address},{active.address}", "--timeout", "10",
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "metadata.version was upgraded to 12.\n")
        assert len(active.asked("UpdateFeatures")) == 1


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (
            ["upgrade", "--release-version", "3.6-IV0", "--feature", "transaction.version=2"],
            "Can not specify `release-version` with other feature flags.",
        ),
        (
            ["upgrade", "--feature", "transaction.version"],
            "Can't parse feature=level string transaction.version: equals sign not found.",
        ),
        (
            ["upgrade", "--feature", "transaction.version=two"],
            "Can't parse feature=level string transaction.version=two: unable to parse two as a "
            "short.",
        ),
        (
            ["upgrade", "--metadata", "3.6-IV0", "--feature", "metadata.version=12"],
            "Feature metadata.version was specified more than once.",
        ),
        (
            ["downgrade", "--metadata", "2.8-IV1"],
            "Unknown metadata.version 2.8-IV1. Supported metadata.version are 3.0-IV1, "
            "3.1-IV0, 3.2-IV0, 3.3-IV0, 3.3-IV1, 3.3-IV2, 3.3-IV3, 3.4-IV0, 3.5-IV0, 3.5-IV1, "
            "3.5-IV2, 3.6-IV0",
        ),
        (["disable"], "You must specify at least one feature to disable"),
    ],
)
def test_argument_errors_are_kafkas_before_any_request(
    broker: FakeKafkaListener, words: list[str], error: str
) -> None:
    refused = replog("features", *words, "--bootstrap-server", broker.address)
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == f"replog features: {error}"
    assert broker.asked("UpdateFeatures") == []
