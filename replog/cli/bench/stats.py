"""What one benchmark run measured, summed up: rates, latency percentiles, a per-second timeline
and a latency CDF, as the JSON keys the report reads (docs/benchmarks.md, "Harness").

Rules: pure (samples in, numbers out). The measured window runs from the end of the warm-up
for the test duration: rates count the records acknowledged (or received) in it, latencies
those sent in it; the timeline covers the whole run, warm-up included, by the second each
record was acknowledged or received. MB is
1024 * 1024 bytes of record values, as Kafka's perf tools and the OpenMessaging Benchmark count.
"""

from __future__ import annotations

import itertools
import math
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MB = 1024 * 1024
COMMITS_SUFFIX = ".commits"  # a transactional producer's commit samples, beside its records'
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999))
CDF_QUANTILES = (
    *(i / 100 for i in range(100)),
    0.995,
    0.999,
    0.9995,
    0.9999,
    1.0,
)


@dataclass(slots=True)
class Samples:
    """One side of a run: for each acknowledged (or received) record, when it was sent (s since
    the run started) and its latency (ms); failures are counted apart. Appending to an `array`
    is one C call, so client threads and callbacks may share one instance."""

    sent_s: array[float] = field(default_factory=lambda: array("d"))
    latency_ms: array[float] = field(default_factory=lambda: array("d"))
    errors: int = 0
    first_error: str = ""

    def add(self, sent_s: float, latency_ms: float) -> None:
        self.sent_s.append(sent_s)
        self.latency_ms.append(latency_ms)

    def error(self, text: str) -> None:
        if not self.errors:
            self.first_error = text
        self.errors += 1

    def extend(self, other: Samples) -> None:
        self.sent_s.extend(other.sent_s)
        self.latency_ms.extend(other.latency_ms)
        if other.errors and not self.errors:
            self.first_error = other.first_error
        self.errors += other.errors


def write_samples(path: str, samples: Samples) -> None:
    """Write `samples` as a driver process hands them over: little-endian float64 pairs (sent
    s, latency ms), the format bench/jetstream/main.go writes too."""
    pairs = array("d", [0.0]) * (2 * len(samples.sent_s))
    pairs[0::2] = samples.sent_s
    pairs[1::2] = samples.latency_ms
    if sys.byteorder != "little":
        pairs.byteswap()
    with open(path, "wb") as f:
        f.write(pairs.tobytes())


def read_samples(path: str, *, errors: int = 0, first_error: str = "") -> Samples:
    """The samples a driver process wrote to `path` (`write_samples`), with its error count."""
    pairs = array("d")
    with open(path, "rb") as f:
        pairs.frombytes(f.read())
    if sys.byteorder != "little":
        pairs.byteswap()
    return Samples(pairs[0::2], pairs[1::2], errors, first_error)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile of sorted values (0.0 when there are none)."""
    if not ordered:
        return 0.0
    rank = max(0, math.ceil(q * len(ordered)) - 1)
    return ordered[min(rank, len(ordered) - 1)]


def latency_summary(ordered: Sequence[float]) -> dict[str, float]:
    summary = {"mean": sum(ordered) / len(ordered) if ordered else 0.0}
    summary.update({name: percentile(ordered, q) for name, q in PERCENTILES})
    summary["max"] = ordered[-1] if ordered else 0.0
    return summary


def timeline(samples: Samples, seconds: int) -> list[int]:
    """Records per second of the run, by the second each was acknowledged or received."""
    counts = [0] * seconds
    for sent, latency in zip(samples.sent_s, samples.latency_ms, strict=True):
        second = int(sent + latency / 1000)
        if 0 <= second < seconds:
            counts[second] += 1
    return counts


def summarize(
    samples: Samples, *, warmup_s: float, duration_s: float, message_size: int
) -> dict[str, Any]:
    """Rates: the records acknowledged (or received) in [warmup_s, warmup_s + duration_s), as
    the OpenMessaging Benchmark counts them. Latencies: the records sent in that window."""
    end = warmup_s + duration_s
    ordered = []
    count = 0
    for sent, latency in zip(samples.sent_s, samples.latency_ms, strict=True):
        if warmup_s <= sent < end:
            ordered.append(latency)
        if warmup_s <= sent + latency / 1000 < end:
            count += 1
    ordered.sort()
    return {
        "records": count,
        "records_per_s": count / duration_s,
        "mb_per_s": count * message_size / MB / duration_s,
        "errors": samples.errors,
        "first_error": samples.first_error,
        "latency_ms": latency_summary(ordered),
        "cdf": [[percentile(ordered, q), q] for q in CDF_QUANTILES] if ordered else [],
    }


def unavailability(samples: Samples, *, from_s: float, to_s: float) -> float:
    """The longest time in [from_s, to_s] without an acknowledgement (or receipt): from the
    kill to the first one after it, between two, or from the last one to `to_s`."""
    times = sorted(
        t
        for sent, latency in zip(samples.sent_s, samples.latency_ms, strict=True)
        if from_s <= (t := sent + latency / 1000) <= to_s
    )
    edges = [from_s, *times, to_s]
    return max(b - a for a, b in itertools.pairwise(edges))


def run_result(
    produced: Samples,
    consumed: Samples,
    *,
    warmup_s: float,
    duration_s: float,
    message_size: int,
    run_seconds: int,
) -> dict[str, Any]:
    """The measured part of a run's JSON result: "produce" (send to acknowledgement),
    "end_to_end" (send to receipt by a consumer) and the per-second "timeline"."""

    def summed(samples: Samples) -> dict[str, Any]:
        return summarize(
            samples, warmup_s=warmup_s, duration_s=duration_s, message_size=message_size
        )

    return {
        "produce": summed(produced),
        "end_to_end": summed(consumed),
        "timeline": {
            "interval_s": 1,
            "produced_per_s": timeline(produced, run_seconds),
            "consumed_per_s": timeline(consumed, run_seconds),
        },
    }
