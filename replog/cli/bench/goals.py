"""The benchmark goals replog is held to (issue #55's ratios against Kafka, etcd and other
clients), checked on a report's results: for each goal whose figure every run of both sides
has, the ratio of replog's median to the other side's and whether it meets the goal.

A side is a report series (`report.series`): a system's name ("replog", "kafka", "etcd"), or
"<system> [<client>]" for a clients run's. A goal names the replog series it may take, in
order of preference, and checks each one present (replog's own client and its Kafka listener
answer different questions). A data-path goal holds for one shape of workload only (peak
MB/s for an unthrottled run with each client's defaults, p99 for a paced one, ...): its
`applies` reads the workload each run records, and a run of another shape has no figure for
it. A row gives each side's min / median / max over its runs and the ratio of the medians.
Rules: pure (results in, rows out); a ratio whose baseline median is 0 or less (an idle
cost that the machine's noise hid) is reported as undecided, not as met or missed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Figure = Callable[[dict[str, Any]], float]
Applies = Callable[[dict[str, Any]], bool]
REPLOG = ("replog", "replog-kafka")
REPLOG_CLIENT = "replog [replog]"


@dataclass(frozen=True, slots=True)
class Goal:
    text: str
    figure: Figure
    higher_is_better: bool
    target: float  # the ratio replog / against must reach (higher) or not exceed (lower)
    against: str
    subjects: tuple[str, ...] = REPLOG
    applies: Applies = lambda workload: True  # the shape of workload the goal holds for


def _at(*keys: str) -> Figure:
    """The figure at `keys` in a run's result."""

    def figure(result: dict[str, Any]) -> float:
        value: Any = result
        for key in keys:
            value = value[key]
        return float(value)

    return figure


def _plain(w: dict[str, Any]) -> bool:
    """A produce-and-consume run with nothing else in it: no leader kill, backlog, idle
    partitions or clients."""
    return (
        not w.get("killLeaderAtSeconds")
        and not w.get("consumerBacklogSizeGB")
        and not w.get("idlePartitions")
        and not w.get("clients")
        and not w.get("metadataClients")
        and not w.get("createPartitions")
        and not w.get("recordsPerTransaction")
    )


def _unthrottled(w: dict[str, Any]) -> bool:
    return w.get("producerRate") in ("max", 0, 0.0)


def _peak_run(w: dict[str, Any]) -> bool:
    """Unthrottled, each client with its own defaults (max-rate-1kb.yaml)."""
    return _plain(w) and _unthrottled(w) and not w.get("producerConfig")


def _paced_run(w: dict[str, Any]) -> bool:
    """A fixed rate (paced-latency-1kb.yaml): latency, not queueing."""
    rate = w.get("producerRate")
    return _plain(w) and isinstance(rate, (int, float)) and rate > 0


def _kafka_batching_run(w: dict[str, Any]) -> bool:
    """Unthrottled with Kafka's default batch.size and linger.ms (kafka-defaults-16k.yaml)."""
    config = w.get("producerConfig") or {}
    return (
        _plain(w)
        and _unthrottled(w)
        and str(config.get("batch.size")) == "16384"
        and str(config.get("linger.ms")) == "5"
    )


def _transactional(w: dict[str, Any]) -> bool:
    """A transactional run (txn-produce-1kb.yaml): its transactional phase's figures."""
    return bool(w.get("recordsPerTransaction"))


def _workload(goal: Goal, r: dict[str, Any]) -> bool:
    return goal.applies(r.get("workload") or {})


GOALS = (
    Goal(
        "produce MB/s >= 1.0x Kafka's peak",
        _at("produce", "mb_per_s"),
        True,
        1.0,
        "kafka",
        applies=_peak_run,
    ),
    Goal(
        "end-to-end p99 at a fixed rate <= Kafka's",
        _at("end_to_end", "latency_ms", "p99"),
        False,
        1.0,
        "kafka",
        applies=_paced_run,
    ),
    Goal(
        "unavailability after a leader's kill -9 <= Kafka's",
        _at("failover", "unavailable_s"),
        False,
        1.0,
        "kafka",
        applies=lambda w: bool(w.get("killLeaderAtSeconds")),
    ),
    Goal(
        "catch-up read MB/s >= 1.0x Kafka's",
        _at("catch_up", "mb_per_s"),
        True,
        1.0,
        "kafka",
        applies=lambda w: bool(w.get("consumerBacklogSizeGB")) and not w.get("clients"),
    ),
    Goal(
        "produce requests per s per broker >= 1.0x Kafka's",
        _at("requests", "per_broker_per_s"),
        True,
        1.0,
        "kafka",
        applies=_kafka_batching_run,
    ),
    Goal(
        "metadata writes answered per s >= 1.0x Kafka's",
        _at("metadata", "requests_per_s"),
        True,
        1.0,
        "kafka",
    ),
    Goal(
        "metadata writes answered per s >= 1.0x etcd's",
        _at("metadata", "requests_per_s"),
        True,
        1.0,
        "etcd",
    ),
    Goal(
        "partitions created, end to end: <= Kafka's time",
        _at("controller", "created_s"),
        False,
        1.0,
        "kafka",
    ),
    Goal(
        "controller failover: <= Kafka's time",
        _at("controller", "failover", "seconds"),
        False,
        1.0,
        "kafka",
    ),
    Goal(
        "transactional produce MB/s (committed) >= 1.0x Kafka's",
        _at("transactions", "committed_mb_per_s"),
        True,
        1.0,
        "kafka",
        applies=_transactional,
    ),
    Goal(
        "transaction commit p99 <= Kafka's",
        _at("transactions", "commit_latency_ms", "p99"),
        False,
        1.0,
        "kafka",
        applies=_transactional,
    ),
    Goal(
        "servers' CPU per 1,000 idle partitions <= Kafka's",
        _at("idle", "cores_per_1000"),
        False,
        1.0,
        "kafka",
    ),
    Goal(
        "busy topic's end-to-end p99 beside them <= Kafka's",
        _at("idle", "end_to_end_p99_ms_with"),
        False,
        1.0,
        "kafka",
    ),
    # The clients goal compares each client with its own defaults (clients-1kb.yaml); a run
    # giving every producer the same settings (clients-matched-1kb.yaml) gets rows of its own,
    # labelled so, beside them rather than in their place.
    *(
        Goal(
            f"{side} records/s{label} >= {target:g}x {client}'s",
            figure,
            True,
            target,
            f"replog [{client}]",
            (REPLOG_CLIENT,),
            applies=applies,
        )
        for label, applies in (
            ("", lambda w: not w.get("producerConfig")),
            (", same producer settings", lambda w: bool(w.get("producerConfig"))),
        )
        for side, figure, client, target in (
            (side, figure, client, target)
            for side, figure, targets in (
                (
                    "Producer",
                    _at("produce", "records_per_s"),
                    (("kafka-python", 3.0), ("confluent-kafka", 0.5), ("aiokafka", 1.0)),
                ),
                (
                    "Consumer",
                    _at("catch_up", "records_per_s"),
                    (("kafka-python", 3.0), ("confluent-kafka", 1.0)),
                ),
            )
            for client, target in targets
        )
    ),
)


@dataclass(frozen=True, slots=True)
class GoalCheck:
    goal: Goal
    subject: str
    subject_values: tuple[float, ...]  # the figure of each run, either side
    against_values: tuple[float, ...]

    @property
    def subject_median(self) -> float:
        return statistics.median(self.subject_values)

    @property
    def against_median(self) -> float:
        return statistics.median(self.against_values)

    @property
    def ratio(self) -> float | None:
        """replog's median / the other side's; None when the other side's is 0 or less."""
        if self.against_median <= 0:
            return None
        return self.subject_median / self.against_median

    @property
    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None:
            return "undecided"
        met = ratio >= self.goal.target if self.goal.higher_is_better else ratio <= self.goal.target
        return "met" if met else "missed"

    def row(self) -> list[str]:
        ratio = self.ratio
        return [
            self.goal.text,
            f"{self.subject} / {self.goal.against}",
            f"{_spread(self.subject_values)} / {_spread(self.against_values)}",
            "-" if ratio is None else f"{ratio:.2f}x",
            self.verdict,
        ]


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _spread(values: Sequence[float]) -> str:
    """min / median / max, or the one value of a single run."""
    if len(values) == 1:
        return _short(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"({_short(low)}, {_short(mid)}, {_short(high)})"


def _every(goal: Goal, runs: Sequence[dict[str, Any]]) -> list[float] | None:
    try:
        return [goal.figure(r) for r in runs if _workload(goal, r)] or None
    except (KeyError, TypeError):
        return None


def check_goals(grouped: dict[str, list[dict[str, Any]]]) -> list[GoalCheck]:
    """Every goal both of whose sides ran, with a figure in each of their runs."""
    checks = []
    for goal in GOALS:
        against = grouped.get(goal.against)
        base = _every(goal, against) if against else None
        if not base:
            continue
        for subject in goal.subjects:
            mine = _every(goal, grouped.get(subject, []))
            if mine:
                checks.append(GoalCheck(goal, subject, tuple(mine), tuple(base)))
    return checks
