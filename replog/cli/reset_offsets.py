"""`replog consumer-groups --reset-offsets`: move a group's committed offsets, as
kafka-consumer-groups.sh does.

    replog consumer-groups --reset-offsets --group G (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime DATETIME | --shift-by N)
        [--dry-run | --execute] [--json]

Prints the new offsets as Kafka does (GROUP TOPIC PARTITION NEW-OFFSET; with `--json`, a list
of {"group", "topic", "partition", "newOffset"}); `--execute` commits them, `--dry-run` (the
default, with a line on stderr saying so, as Kafka's) only shows them.

Rules (Kafka's `ConsumerGroupCommand`):
- Refused while the group has members (state other than Empty, or a group not known at all;
  a consumer-protocol group's state and members are ConsumerGroupDescribe's, as DescribeGroups
  calls such a group Dead):
  "Assignments can only be reset if the group 'G' is inactive, but the current state is
  Stable." (exit code 1); members would overwrite the offsets with their positions.
- `--topic T` takes every partition of T, `--topic T:0,2` those partitions; `--all-topics`
  the partitions the group has committed offsets for.
- `--to-offset N` and `--shift-by N` are clamped into each partition's [log start, high
  watermark]; `--shift-by` moves the committed offset, and a partition without one is an
  error naming it. `--to-datetime` takes ISO 8601 (`2026-01-31T12:00:00.000`, with `Z` or
  `+hh:mm`; local time without one) and gives the first offset whose timestamp is at or after
  it, or the high watermark when no record is that late.
- Commits are simple commits (generation -1, no member), which the coordinator accepts for a
  group without members.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replog.errors import GroupIdNotFoundError, ReplogError

if TYPE_CHECKING:
    from replog.client.admin import Admin

HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
DRY_RUN_NOTE = (
    "WARN: No action will be performed as the --execute option is missing. Add --dry-run to "
    "say so explicitly, or --execute to reset the offsets."
)
INACTIVE_STATES = ("Empty", "Dead")

Partition = tuple[str, int]


@dataclass(frozen=True)
class ResetStrategy:
    """Where to move each offset: `kind` is earliest, latest, offset, datetime or shift."""

    kind: str
    value: int = 0  # the offset, the timestamp (ms) or the shift

    def describe(self) -> str:
        return {"offset": f"--to-offset {self.value}", "shift": f"--shift-by {self.value}"}.get(
            self.kind, f"--to-{self.kind}"
        )


def parse_topics(specs: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    """`--topic` values: "T" (every partition, None) or "T:0,2"; a ReplogError naming a bad one."""
    parsed: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        topic, colon, numbers = spec.partition(":")
        if not topic:
            raise ReplogError(f"--topic {spec!r}: expected TOPIC or TOPIC:PARTITION,PARTITION...")
        if not colon:
            parsed.append((topic, None))
            continue
        try:
            partitions = [int(n) for n in numbers.split(",")]
        except ValueError:
            raise ReplogError(
                f"--topic {spec!r}: partitions must be whole numbers separated by commas"
            ) from None
        if any(p < 0 for p in partitions):
            raise ReplogError(f"--topic {spec!r}: partitions must be >= 0")
        parsed.append((topic, partitions))
    return parsed


def parse_datetime(text: str) -> int:
    """`--to-datetime`'s value as epoch milliseconds (module docstring)."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ReplogError(
            f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS[.sss] with an optional Z "
            "or +hh:mm"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool reads it
    return int(moment.timestamp() * 1000)


def new_offsets(
    strategy: ResetStrategy,
    partitions: Sequence[Partition],
    committed: Mapping[Partition, int | None],
    earliest: Mapping[Partition, int],
    latest: Mapping[Partition, int],
    at_time: Mapping[Partition, int | None],
) -> dict[Partition, int]:
    """Each partition's new offset (module docstring); `at_time`: the first offset at or after
    `--to-datetime` (None: no record that late)."""
    found: dict[Partition, int] = {}
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        if strategy.kind == "earliest":
            found[tp] = low
        elif strategy.kind == "latest":
            found[tp] = high
        elif strategy.kind == "datetime":
            offset = at_time.get(tp)
            found[tp] = high if offset is None else offset
        elif strategy.kind == "offset":
            found[tp] = min(max(strategy.value, low), high)
        else:
            current = committed.get(tp)
            if current is None:
                raise ReplogError(
                    f"cannot shift the offset of {tp[0]}-{tp[1]}: the group has no committed "
                    "offset for it"
                )
            found[tp] = min(max(current + strategy.value, low), high)
    return found


async def reset_offsets(
    config: Mapping[str, object],
    group_id: str,
    topics: list[tuple[str, list[int] | None]] | None,
    strategy: ResetStrategy,
    *,
    execute: bool,
    coordinator: tuple[int, str],
    request_timeout_ms: int,
) -> dict[Partition, int]:
    """The new offsets of the chosen partitions (`topics` None: `--all-topics`), committed when
    `execute`; refused while the group has members. `coordinator`: the group's coordinator
    (node id, Kafka listener)."""
    from replog.client.admin import Admin
    from replog.client.admin_results import OffsetSpec
    from replog.client.config import security_sasl
    from replog.client.tls_connection import security_ssl_context
    from replog.common import OffsetAndMetadata, TopicPartition
    from replog.wire.kafka_coordinator_client import KafkaCoordinatorClient

    async with KafkaCoordinatorClient(
        coordinator[1],
        request_timeout_ms=request_timeout_ms,
        client_id=str(config.get("client.id", "replog-consumer-groups")),
        tls=security_ssl_context(config),
        sasl=security_sasl(config),
    ) as client:
        group = await client.describe_group(group_id)
        state, members = group.state, len(group.members)
        if state == "Dead":
            # DescribeGroups describes a group of KIP-848's consumer protocol as Dead.
            try:
                modern = await client.describe_consumer_group(group_id)
            except GroupIdNotFoundError:
                pass  # no such group either: nothing to refuse
            else:
                state, members = modern.state, len(modern.members)
        if state not in INACTIVE_STATES or members:
            raise ReplogError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                f"current state is {state}."
            )
        fetched = await client.offset_fetch(group_id, None)
        committed = {
            (tp.topic, tp.partition): None if o is None else o.offset for tp, o in fetched.items()
        }
        async with Admin(dict(config)) as admin:
            partitions = await _chosen(admin, topics, committed)
            wanted = [TopicPartition(t, p) for t, p in partitions]

            async def edge(spec: OffsetSpec | int) -> dict[Partition, int | None]:
                answers = await admin.list_offsets(dict.fromkeys(wanted, spec))
                return {(tp.topic, tp.partition): None if a is None else a.offset
                        for tp, a in answers.items()}  # fmt: skip

            earliest = await edge(OffsetSpec.EARLIEST)
            latest = await edge(OffsetSpec.LATEST)
            at_time = await edge(strategy.value) if strategy.kind == "datetime" else {}
        offsets = new_offsets(
            strategy,
            partitions,
            committed,
            {tp: o or 0 for tp, o in earliest.items()},
            {tp: o or 0 for tp, o in latest.items()},
            at_time,
        )
        if execute and offsets:
            answers, _ = await client.offset_commit(
                group_id,
                {TopicPartition(t, p): OffsetAndMetadata(o) for (t, p), o in offsets.items()},
            )
            failed = [f"{tp.topic}-{tp.partition}: {e}" for tp, e in answers.items() if e]
            if failed:
                raise ReplogError(f"resetting group '{group_id}' failed: " + "; ".join(failed))
    return offsets


async def _chosen(
    admin: Admin,
    topics: list[tuple[str, list[int] | None]] | None,
    committed: Mapping[Partition, int | None],
) -> list[Partition]:
    """The partitions `--topic`/`--all-topics` name (module docstring)."""
    if topics is None:
        return sorted(committed)
    described = await admin.describe_topics(sorted({t for t, _ in topics}))
    chosen: list[Partition] = []
    for topic, numbers in topics:
        have = {p.partition for p in described[topic].partitions}
        for number in sorted(have) if numbers is None else numbers:
            if number not in have:
                raise ReplogError(f"topic {topic!r} has no partition {number}")
            chosen.append((topic, number))
    return sorted(set(chosen))


def print_dry_run_note() -> None:
    print(DRY_RUN_NOTE, file=sys.stderr)
