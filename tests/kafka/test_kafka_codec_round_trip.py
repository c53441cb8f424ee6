"""Every generated Kafka message round-trips at every version its spec defines, and encodes
byte for byte as kafka-python (a dev dependency built from the same upstream specs) does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_codec_support import (
    SPECS,
    kafka_python_classes,
    kafka_python_reencode,
    message_class,
    message_strategy,
)

# Each example draws one message per version, so every version is exercised each time.
EXAMPLES = 6
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ids(spec: Any) -> str:
    return str(spec.name)


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_every_version_round_trips(spec: Any) -> None:
    cls = message_class(spec)
    versions = list(spec.versions())

    @FAST
    @given(st.tuples(*(message_strategy(spec, v) for v in versions)))
    def check(messages: tuple[Any, ...]) -> None:
        for version, message in zip(versions, messages, strict=True):
            data = message.encode(version)
            back = cls.decode(data, version)
            assert back == message, f"{spec.name} v{version}"
            assert back.encode(version) == data, f"{spec.name} v{version}"

    check()


ORACLE_SPECS = [s for s in SPECS if s.name in kafka_python_classes()]


@pytest.mark.parametrize("spec", ORACLE_SPECS, ids=ids)
def test_encoding_matches_kafka_python(spec: Any) -> None:
    their_max = kafka_python_classes()[spec.name].max_version
    versions = [v for v in spec.versions() if v <= their_max]
    assert versions, f"kafka-python knows no version of {spec.name} that replog generates"

    @FAST
    @given(st.tuples(*(message_strategy(spec, v) for v in versions)))
    def check(messages: tuple[Any, ...]) -> None:
        for version, message in zip(versions, messages, strict=True):
            if spec.name == "ApiVersionsResponse":
                # kafka-python reads an error answer as a v0 body (what Kafka sends then).
                message.error_code = 0
            data = message.encode(version)
            assert kafka_python_reencode(spec.name, data, version) == data, (
                f"{spec.name} v{version}"
            )

    check()
