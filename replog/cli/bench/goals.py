"""The benchmark goals replog is held to (issue #55's ratios against Kafka, etcd and other
clients), checked on a report's results: for each goal whose figure every run of both sides
has, the ratio of replog's median to the other side's and whether it meets the goal.

A side is a report series (`report.series`): a system's name ("replog", "kafka", "etcd"), or
"<system> [<client>]" for a clients run's. A goal names the replog series it may take, in
order of preference, and checks each one present (replog's own client and its Kafka listener
answer different questions). Rules: pure (results in, rows out); a ratio whose baseline
median is 0 or less (an idle cost that the machine's noise hid) is reported as undecided, not
as met or missed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Figure = Callable[[dict[str, Any]], float]
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


def _metadata(r: dict[str, Any]) -> float:
    return float(r["metadata"]["requests_per_s"])


def _created(r: dict[str, Any]) -> float:
    return float(r["controller"]["created_s"])


def _failover(r: dict[str, Any]) -> float:
    return float(r["controller"]["failover"]["seconds"])


def _idle_cores(r: dict[str, Any]) -> float:
    return float(r["idle"]["cores_per_1000"])


def _idle_p99(r: dict[str, Any]) -> float:
    return float(r["idle"]["end_to_end_p99_ms_with"])


def _produced(r: dict[str, Any]) -> float:
    return float(r["produce"]["records_per_s"])


def _consumed(r: dict[str, Any]) -> float:
    return float(r["catch_up"]["records_per_s"])


GOALS = (
    Goal("metadata writes answered per s >= 1.0x Kafka's", _metadata, True, 1.0, "kafka"),
    Goal("metadata writes answered per s >= 1.0x etcd's", _metadata, True, 1.0, "etcd"),
    Goal("partitions created, end to end: <= Kafka's time", _created, False, 1.0, "kafka"),
    Goal("controller failover: <= Kafka's time", _failover, False, 1.0, "kafka"),
    Goal("servers' CPU per 1,000 idle partitions <= Kafka's", _idle_cores, False, 1.0, "kafka"),
    Goal("busy topic's end-to-end p99 beside them <= Kafka's", _idle_p99, False, 1.0, "kafka"),
    *(
        Goal(
            f"{side} records/s >= {target:g}x {client}'s",
            figure,
            True,
            target,
            f"replog [{client}]",
            (REPLOG_CLIENT,),
        )
        for side, figure in (("Producer", _produced), ("Consumer", _consumed))
        for client, target in (("kafka-python", 3.0), ("confluent-kafka", 0.5))
    ),
)


@dataclass(frozen=True, slots=True)
class GoalCheck:
    goal: Goal
    subject: str
    subject_median: float
    against_median: float

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
            f"{_short(self.subject_median)} / {_short(self.against_median)}",
            "-" if ratio is None else f"{ratio:.2f}x",
            self.verdict,
        ]


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _every(figure: Figure, runs: Sequence[dict[str, Any]]) -> list[float] | None:
    try:
        return [figure(r) for r in runs]
    except (KeyError, TypeError):
        return None


def check_goals(grouped: dict[str, list[dict[str, Any]]]) -> list[GoalCheck]:
    """Every goal both of whose sides ran, with a figure in each of their runs."""
    checks = []
    for goal in GOALS:
        against = grouped.get(goal.against)
        base = _every(goal.figure, against) if against else None
        if not base:
            continue
        for subject in goal.subjects:
            mine = _every(goal.figure, grouped.get(subject, []))
            if mine:
                checks.append(
                    GoalCheck(goal, subject, statistics.median(mine), statistics.median(base))
                )
    return checks
