"""bench/kafka_listener_requests.py's pure parts: shapes and their producer settings, counts
between two instants from sparse marks, and the brokers' Produce series read from a metrics
page."""

from __future__ import annotations

import argparse

import pytest
from bench_script import load_bench_script

requests = load_bench_script("kafka_listener_requests.py", "kafka_listener_requests_bench")
Shape = requests.Shape


def test_a_shape_is_producers_by_partitions_with_kafkas_defaults() -> None:
    shape = Shape.parse("4x12")
    assert (shape.producers, shape.partitions, shape.in_flight) == (4, 12, 0)
    assert str(shape) == "4x12"
    assert shape.settings() == {
        "acks": "all",
        "enable.idempotence": True,
        "batch.size": 16384,
        "linger.ms": 5,
    }


def test_a_pipelined_shape_turns_idempotence_off_and_bounds_requests_in_flight() -> None:
    shape = Shape.parse("1x3p5")
    assert str(shape) == "1x3p5"
    settings = shape.settings()
    assert settings["enable.idempotence"] is False
    assert settings["max.in.flight.requests.per.connection"] == 5
    assert settings["batch.size"] == 16384 and settings["linger.ms"] == 5


@pytest.mark.parametrize("text", ["1y3", "x3", "1x", "1x3p", "1x3p5x"])
def test_a_malformed_shape_is_refused_naming_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        Shape.parse(text)


def test_a_count_between_two_instants_is_interpolated_from_its_marks() -> None:
    marks = [(10.0, 0), (11.0, 100), (12.0, 300)]
    assert requests._between(marks, 10.5, 11.5) == pytest.approx(150)
    # Past either end, the nearest mark holds.
    assert requests._between(marks, 9.0, 13.0) == pytest.approx(300)


def test_the_produce_series_are_read_from_a_metrics_page() -> None:
    page = "\n".join(
        [
            "# HELP replog_kafka_request_duration_seconds ...",
            'replog_kafka_request_duration_seconds_count{api="Fetch"} 7.0',
            'replog_kafka_request_duration_seconds_count{api="Produce"} 5323.0',
            'replog_kafka_request_duration_seconds_sum{api="Produce"} 53.99',
            'replog_kafka_request_duration_seconds_bucket{api="Produce",le="0.005"} 3085.0',
        ]
    )
    assert sorted(requests._PRODUCE_SERIES.findall(page)) == [
        ("count", "5323.0"),
        ("sum", "53.99"),
    ]
