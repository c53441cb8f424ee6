"""The pure judge of bench/kafka_streams_check.py's exactly_once_v2 run: a word's counts read
read_committed must be 1, 2, ... n for a word written n times."""

from __future__ import annotations

from collections import Counter

from tests.bench.bench_script import load_bench_script

load_bench_script("replog_cli.py", "replog_cli")
load_bench_script("kafka_apps.py", "kafka_apps")
streams = load_bench_script("kafka_streams_check.py", "kafka_streams_check")

WRITTEN = Counter({"kafka": 3, "log": 1})


def test_counts_one_to_n_pass() -> None:
    assert streams.not_exactly_once({"kafka": [1, 2, 3], "log": [1]}, WRITTEN) == {}


def test_a_repeated_count_is_a_duplicate() -> None:
    # A record processed twice after a crash counts the word again from the restored state.
    wrong = streams.not_exactly_once({"kafka": [1, 2, 2, 3], "log": [1]}, WRITTEN)
    assert wrong == {"kafka": [1, 2, 2, 3]}
    assert "repeated [2]" in streams.said_counts(wrong["kafka"])


def test_a_skipped_or_short_count_is_a_loss() -> None:
    assert streams.not_exactly_once({"kafka": [1, 3], "log": [1]}, WRITTEN) == {"kafka": [1, 3]}
    assert streams.not_exactly_once({"kafka": [1, 2], "log": [1]}, WRITTEN) == {"kafka": [1, 2]}


def test_a_word_missing_or_never_written_fails() -> None:
    assert streams.not_exactly_once({"kafka": [1, 2, 3]}, WRITTEN) == {"log": []}
    assert streams.said_counts([]) == "(0 counts, last None, repeated [])"
    wrong = streams.not_exactly_once({"kafka": [1, 2, 3], "log": [1], "spark": [1]}, WRITTEN)
    assert wrong == {"spark": [1]}
