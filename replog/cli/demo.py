"""What `replog demo` does, step by step (`demo_command` builds its parser and describes the
steps in its help): a 3-node cluster streams through a leader's SIGKILL, the stream is verified
exactly once, and Spark aggregates it.

Rules: every step prints what it does as it goes; a failed check is a `FAILED:` line and makes
the exit code 1; the cluster is stopped at the end, also after a failure or Ctrl-C, unless
`--keep`.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any

from replog.cli.demo_cluster import DemoCluster
from replog.cli.demo_command import NODE_COUNT
from replog.cli.demo_events import KEY_PREFIX, parse_event
from replog.cli.demo_series import Sample, progress_line, series_table
from replog.cli.demo_spark import aggregate, check_prerequisites, start_session
from replog.cli.demo_stream import EventStream
from replog.cli.demo_verify import LogRecord, Verification, verify
from replog.client.admin_results import TopicDescription
from replog.client.records import TopicPartition
from replog.client.sync_admin import Admin, NewTopic
from replog.client.sync_consumer import Consumer
from replog.errors import ReplogError, TopicAlreadyExistsError

TOPIC = "events"
PARTITIONS = 3
MIN_INSYNC_REPLICAS = 2
KEY_COUNT = 100
KILLED_PARTITION = 0
RESTART_AFTER_S = 3.0
RESTART_AT_LATEST_S = 15.0  # restart even if the ISRs never showed the node gone
RECOVERY_TIMEOUT_S = 120.0
SAMPLE_INTERVAL_S = 1.0
TICK_S = 0.05
ADMIN_TIMEOUT_MS = 1500
READ_TIMEOUT_S = 60.0
STEPS = 8


def say(text: str = "") -> None:
    print(text, flush=True)


def step(number: int, text: str) -> None:
    say(f"\n[{number}/{STEPS}] {text}")


@dataclass
class Outage:
    """What happened to the killed leader, for the summary."""

    node_id: int | None = None
    killed_at_s: float | None = None
    restarted_at_s: float | None = None
    recovered_at_s: float | None = None
    max_urp: int = 0
    new_leader: int | None = None


def run(args: argparse.Namespace) -> int:
    java = check_prerequisites()  # before anything starts: a missing Java is one line
    cluster = DemoCluster(args.data_dir, args.base_port)
    failures: list[str] = []
    completed = False
    try:
        failures = _run(args, cluster, java)
        completed = True
    finally:
        if args.keep and completed:
            say(f"\n[8/{STEPS}] --keep: the cluster keeps running in {cluster.directory}")
            say(f"  stop it with: replog cluster stop --data-dir {cluster.directory}")
        else:
            step(8, f"stopping the cluster in {cluster.directory}")
            for line in cluster.stop():
                say(f"  {line}")
    say()
    if failures:
        for failure in failures:
            say(f"FAILED: {failure}")
        return 1
    say(
        "OK: every acknowledged event survived the leader's SIGKILL exactly once, in order, "
        "and Spark read the same records"
    )
    return 0


def _run(args: argparse.Namespace, cluster: DemoCluster, java: str) -> list[str]:
    step(1, f"starting a {NODE_COUNT}-node cluster in {cluster.directory}")
    cluster.prepare()
    started = time.monotonic()
    quorum = cluster.start()
    say(f"  up in {time.monotonic() - started:.1f} s; {quorum}; bootstrap {cluster.bootstrap}")
    with Admin(bootstrap_servers=cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
        step(
            2,
            f"creating topic {TOPIC!r}: {PARTITIONS} partitions, replication factor "
            f"{NODE_COUNT}, min.insync.replicas={MIN_INSYNC_REPLICAS}",
        )
        topic = _create_topic(admin)
        for p in topic.partitions:
            say(f"  partition {p.partition}: leader {p.leader}, replicas {list(p.replicas)}")
        step(
            3,
            f"streaming {args.records:,} events over {KEY_COUNT} keys "
            f"({KEY_PREFIX}0..{KEY_PREFIX}{KEY_COUNT - 1}) at up to "
            f"{args.rate or 'unlimited'}/s, acks=all, enable.idempotence=true",
        )
        stream = EventStream(cluster.bootstrap, TOPIC, args.records, args.rate, KEY_COUNT)
        try:
            samples, outage = _stream_through_a_failure(args, cluster, admin, stream)
        finally:
            stream.abort()  # a no-op once the stream ended; stops it after a failure
    failures: list[str] = []
    if stream.error is not None:
        failures.append(f"the stream stopped: {type(stream.error).__name__}: {stream.error}")
    say("\n  the series (* = something happened in that second):")
    for line in series_table(samples):
        say(f"  {line}".rstrip())
    _summarise_outage(outage, samples)

    acknowledged, failed, sent = stream.outcomes()
    step(6, "verifying: every partition read from its start up to its high watermark")
    verification, read_s = _verify(cluster.bootstrap, acknowledged, set(failed), sent)
    _print_verification(verification, read_s, failed)
    failures += verification.problems()

    step(7, f"Spark: spark.read.format('replog') over {TOPIC!r}, local[2], {java}")
    failures += _spark_step(cluster, verification, args.data_dir)
    return failures


def _create_topic(admin: Admin) -> TopicDescription:
    new = NewTopic(TOPIC, PARTITIONS, NODE_COUNT, {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)})
    (created,) = admin.create_topics([new], timeout_ms=30_000)
    if created.error is not None and not isinstance(created.error, TopicAlreadyExistsError):
        raise created.error
    deadline = time.monotonic() + 30
    while True:
        try:
            topic = admin.describe_topics([TOPIC], timeout_ms=ADMIN_TIMEOUT_MS)[TOPIC]
            if all(p.leader is not None for p in topic.partitions):
                return topic
        except ReplogError:
            pass
        if time.monotonic() > deadline:
            raise ReplogError(f"topic {TOPIC!r} has no leader for every partition after 30 s")
        time.sleep(0.1)


def _describe(admin: Admin) -> TopicDescription | None:
    try:
        return admin.describe_topics([TOPIC], timeout_ms=ADMIN_TIMEOUT_MS)[TOPIC]
    except ReplogError:
        return None  # a node just died or the controller moves: try again next second


def _stream_through_a_failure(
    args: argparse.Namespace, cluster: DemoCluster, admin: Admin, stream: EventStream
) -> tuple[list[Sample], Outage]:
    """Steps 3 and 4 with the per-second lines of step 5; returns the samples."""
    step(
        4,
        f"after {max(1, args.records // 3):,} acknowledgements: SIGKILL the leader of "
        f"{TOPIC}-{KILLED_PARTITION}, keep producing, restart it ~{RESTART_AFTER_S:g} s later, "
        "wait until it is back in every ISR",
    )
    step(
        5,
        "every second: acknowledged so far, acks/s, failed sends, under-replicated "
        "partitions (URP: ISR smaller than the replicas)",
    )
    outage = Outage()
    samples: list[Sample] = []
    kill_at = max(1, args.records // 3)
    stream.start()
    started = time.monotonic()
    next_sample = started + SAMPLE_INTERVAL_S
    note = ""
    while True:
        time.sleep(TICK_S)
        now = time.monotonic() - started
        acked, _ = stream.counts()
        if outage.killed_at_s is None and (acked >= kill_at or stream.done()):
            note = _kill_leader(cluster, admin, outage, now, stream.done())
        elif (
            outage.killed_at_s is not None
            and outage.restarted_at_s is None
            and now - outage.killed_at_s >= RESTART_AFTER_S
            and (outage.max_urp > 0 or now - outage.killed_at_s >= RESTART_AT_LATEST_S)
        ):
            assert outage.node_id is not None
            pid = cluster.restart(outage.node_id)
            outage.restarted_at_s = now
            note = _join(note, f"restarted node {outage.node_id} (pid {pid})")
        if time.monotonic() < next_sample:
            continue
        next_sample += SAMPLE_INTERVAL_S
        cluster.check_alive()
        topic = _describe(admin)
        urp = None if topic is None else sum(p.under_replicated for p in topic.partitions)
        if outage.killed_at_s is not None and outage.recovered_at_s is None and urp:
            outage.max_urp = max(outage.max_urp, urp)
            if topic is not None:
                outage.new_leader = topic.partitions[KILLED_PARTITION].leader
        acked, failed = stream.counts()
        sample = Sample(now, acked, failed, urp, note)
        say(progress_line(samples[-1] if samples else None, sample))
        samples.append(sample)
        note = ""
        if outage.restarted_at_s is not None and urp == 0 and outage.recovered_at_s is None:
            outage.recovered_at_s = now
        if stream.done() and outage.recovered_at_s is not None:
            return samples, outage
        if outage.restarted_at_s is not None and now - outage.restarted_at_s > RECOVERY_TIMEOUT_S:
            raise ReplogError(
                f"node {outage.node_id} was not back in every ISR {RECOVERY_TIMEOUT_S:g} s "
                f"after its restart (URP {urp})"
            )


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def _kill_leader(
    cluster: DemoCluster, admin: Admin, outage: Outage, now: float, stream_done: bool
) -> str:
    topic = _describe(admin)
    leader = None if topic is None else topic.partitions[KILLED_PARTITION].leader
    if leader is None:
        return ""  # unknown this tick: try again
    pid = cluster.kill(leader)
    outage.node_id, outage.killed_at_s = leader, now
    late = " (the stream had already ended: use a lower --rate or more --records)"
    return f"SIGKILL node {leader} (pid {pid}), leader of {TOPIC}-{KILLED_PARTITION}" + (
        late if stream_done else ""
    )


def _summarise_outage(outage: Outage, samples: list[Sample]) -> None:
    if outage.killed_at_s is None or outage.node_id is None:
        return
    say(
        f"  node {outage.node_id} killed at t={outage.killed_at_s:.1f}s; "
        f"partition {KILLED_PARTITION}'s new leader: node {outage.new_leader}; "
        f"at most {outage.max_urp} under-replicated partitions while it was away"
    )
    if outage.restarted_at_s is not None and outage.recovered_at_s is not None:
        say(
            f"  restarted at t={outage.restarted_at_s:.1f}s, back in every ISR by "
            f"t={outage.recovered_at_s:.1f}s (URP 0); stream of {samples[-1].acknowledged:,} "
            f"acknowledgements over {samples[-1].elapsed_s:.0f} s"
        )


def _verify(
    bootstrap: str, acknowledged: set[tuple[str, int]], failed: set[tuple[str, int]], sent: int
) -> tuple[Verification, float]:
    started = time.monotonic()
    records: list[LogRecord] = []
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    with Consumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="replog-demo-verify",
    ) as consumer:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)  # the high watermarks
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + READ_TIMEOUT_S
        remaining = {tp for tp in partitions if consumer.position(tp) < ends[tp]}
        while remaining:
            if time.monotonic() > deadline:
                raise ReplogError(
                    f"reading {TOPIC} up to its high watermarks took over {READ_TIMEOUT_S:g} s"
                )
            for tp, batch in consumer.poll(timeout_ms=500, max_records=5000).items():
                for r in batch:
                    if r.offset >= ends[tp]:
                        continue
                    records.append(_log_record(tp.partition, r.offset, r.key, r.value))
            remaining = {tp for tp in remaining if consumer.position(tp) < ends[tp]}
    # Per partition in offset order (poll keeps each partition's order; sort to be sure).
    records.sort(key=lambda r: (r.partition, r.offset))
    return verify(acknowledged, failed, sent, records), time.monotonic() - started


def _log_record(partition: int, offset: int, key: bytes | None, value: bytes | None) -> LogRecord:
    try:
        return LogRecord(partition, offset, parse_event(key, value))
    except ValueError as exc:
        return LogRecord(partition, offset, None, str(exc))


def _print_verification(v: Verification, read_s: float, failed: dict[Any, str]) -> None:
    parts = ", ".join(f"{TOPIC}-{p}: {n:,}" for p, n in v.per_partition.items())
    say(f"  read {v.records_in_log:,} records in {read_s:.1f} s ({parts})")
    say(
        f"  acknowledged sends: {v.acknowledged:,}; in the log exactly once: "
        f"{v.acknowledged_found_once:,}; lost: {len(v.lost)}; duplicated: {len(v.duplicated)}"
    )
    say(
        f"  failed sends: {v.failed:,} (reported, not losses: {v.failed_in_log} of them were "
        f"written anyway)"
    )
    for (key, seq), error in list(failed.items())[:3]:
        say(f"    {key} seq {seq}: {error}")
    say(
        f"  per-key order: {'every key in sequence order' if not v.out_of_order else 'BROKEN'}; "
        f"records that were never sent: {len(v.stray)}; sum of amounts: {v.total_amount / 100:,.2f}"
    )
    say("  exactly once: OK" if v.ok else "  exactly once: FAILED (see below)")


def _spark_step(cluster: DemoCluster, verification: Verification, data_dir: str) -> list[str]:
    started = time.monotonic()
    spark = start_session(os.path.join(data_dir, "spark"))
    try:
        say(f"  SparkSession up in {time.monotonic() - started:.1f} s; per key group:")
        totals = aggregate(spark, cluster.bootstrap, TOPIC)
    finally:
        spark.stop()
    say(
        f"  Spark read {totals.rows:,} rows, sum of amounts {totals.total_amount / 100:,.2f}, "
        f"in {totals.seconds:.1f} s"
    )
    failures = []
    if totals.rows != verification.records_in_log:
        failures.append(
            f"Spark read {totals.rows:,} rows, the verification {verification.records_in_log:,}"
        )
    if totals.total_amount != verification.total_amount:
        failures.append(
            f"Spark's sum of amounts {totals.total_amount} differs from the verification's "
            f"{verification.total_amount}"
        )
    say("  Spark row count and sum equal the verified ones: " + ("no" if failures else "yes"))
    return failures
