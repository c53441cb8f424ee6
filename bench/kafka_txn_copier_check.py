"""Kafka's TransactionalMessageCopier against replog: exactly-once copying, a judge of #80.

Starts a local 3-node replog cluster (bench/kafka_apps.py), writes `--messages` distinct
values to each of the 3 partitions of `input` (replog's idempotent producer, acks=all), and
runs Apache Kafka 4.4.0's own `org.apache.kafka.tools.TransactionalMessageCopier` (the tool of
Kafka's transactions system test) once per input partition: each reads its partition
read_committed, writes every record to `output` and commits the consumer's offsets in the same
transaction, `--transaction-size` records at a time, aborting about one transaction in three
(`--enable-random-aborts`: the records of an aborted transaction are written and must never be
read by a read_committed consumer; the copier seeks back and copies them again). Midway, the
copier of partition 0 is killed with SIGKILL and started again with the same transactional id:
its successor fences it, the coordinator aborts what it left open, and it resumes from the
offsets committed with the last committed transaction. Then, as Kafka's transactions system
test bounces its brokers, `--broker-kills` times one broker after another is killed with
SIGKILL while every copier runs: once the others have fenced it and elected new leaders, it is
started again, and the next one is killed once every partition has its full ISR again. Checks:

- copied: every copier ends with exit status 0 (it stops once it has copied what the
  partition held when it started);
- exactly once: a read_committed consumer (confluent-kafka) reads from `output` exactly the
  values written to `input`, each once;
- aborted data hidden: a read_uncommitted consumer reads more records than that (the aborted
  transactions' copies), so the aborts did write data that read_committed skipped;
- offsets: the copiers' group has committed, for each input partition, its end offset;
- brokers killed: each kill found every copier still copying (else the run proves nothing
  about them: give it more `--messages`);
- kafka-dump-log: Kafka's DumpLogSegments reads `output`'s segments and `.txnindex` files on
  broker 1 (every batch valid, COMMIT and ABORT markers among them, aborted transactions
  indexed, at most one for each ABORT marker).

    .venv/bin/python bench/kafka_txn_copier_check.py [--messages 6000] [--broker-kills 3]
        [--base-port 27660]

Bench only: it needs Java 17+ and Kafka's jars (bench/kafka/kafka.sh fetches them with Maven;
CI never runs it). Ports: the cluster's base..base+12. Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kafka_apps import JavaProcess, print_results, running_cluster, wait_for
from kafka_tools_check import kafka_libs, tool
from replog_cli import create_topic, replog_cli

from replog import Producer

PARTITIONS = 3
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
GROUP = "txn-copier"
# What a copier prints after each poll: how many records it has copied (committed) so far.
PROCESSED = re.compile(r'"totalProcessed":(\d+)')


def copier(
    libs: Path, bootstrap: str, partition: int, args: argparse.Namespace, work: Path
) -> JavaProcess:
    """A copier of input partition `partition` (its transactional id names the partition, so a
    restarted one fences its predecessor)."""
    return JavaProcess(
        libs,
        COPIER,
        [
            "--broker-list",
            bootstrap,
            "--input-topic",
            "input",
            "--input-partition",
            str(partition),
            "--output-topic",
            "output",
            "--transactional-id",
            f"copier-{partition}",
            "--consumer-group",
            GROUP,
            "--transaction-size",
            str(args.transaction_size),
            "--enable-random-aborts",
        ],
        work / f"copier-{partition}.log",
        work,
    )


def read_values(bootstrap: str, isolation: str, at_least: int, timeout_s: float) -> list[str]:
    """The values of every partition of `output` at `isolation`: read until `at_least` came
    (or `timeout_s` passed), then until nothing more comes for 3 s."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verifier-{isolation}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition("output", p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout_s
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
                quiet_since = time.monotonic()
            elif len(values) >= at_least and time.monotonic() - quiet_since > 3:
                break
    finally:
        consumer.close()
    return values


def committed_offsets(bootstrap: str) -> dict[int, int]:
    """The copiers' group's committed offset of each input partition (-1: none)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        wanted = [confluent_kafka.TopicPartition("input", p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(wanted, timeout=30)}
    finally:
        consumer.close()


def cluster_view(bootstrap: str) -> tuple[set[int], bool]:
    """The brokers the metadata names (a fenced one is left out) and whether every partition
    has a leader and its full ISR, as confluent-kafka's Metadata shows them."""
    import confluent_kafka.admin

    # log_level 2: the killed broker's refused connections, expected here, are not printed
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    try:
        metadata = admin.list_topics(timeout=10)
    except confluent_kafka.KafkaException:  # no broker answered in time: asked again
        return set(), False
    partitions = [p for t in metadata.topics.values() for p in t.partitions.values()]
    whole = all(p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in partitions)
    return set(metadata.brokers), whole


def kill_brokers(
    data_dir: Path, bootstrap: str, args: argparse.Namespace, copiers: dict[int, JavaProcess]
) -> tuple[bool, str]:
    """Kill (SIGKILL) and restart `--broker-kills` brokers in turn while the copiers run (module
    docstring): whether every kill found every copier running, and what was done."""
    done: list[str] = []
    all_running = True
    for n in range(args.broker_kills):
        node = 1 + n % 3
        running = all(c.alive() for c in copiers.values())
        all_running = all_running and running
        began = time.monotonic()
        replog_cli("cluster", "kill", "--data-dir", str(data_dir), str(node))
        # fenced: the controller moved its partitions' leadership with it
        wait_for(
            lambda gone=node: gone not in cluster_view(bootstrap)[0],
            f"broker {node} fenced after its kill",
            args.timeout,
        )
        restart = ("cluster", "restart", "--data-dir", str(data_dir), str(node))
        replog_cli(*restart, "--timeout", str(args.timeout))
        wait_for(
            lambda: cluster_view(bootstrap) == ({1, 2, 3}, True),
            f"broker {node} back, every partition's ISR full",
            args.timeout,
        )
        state = "copiers running" if running else "a copier had ended"
        done.append(f"{node} ({state}, {time.monotonic() - began:.0f} s)")
    return all_running, f"killed and restarted in turn: {', '.join(done) or 'none'}"


def dump_log(libs: Path, data_dir: Path) -> tuple[bool, str]:
    """Kafka's DumpLogSegments over `output`'s segments and `.txnindex` files on broker 1
    (module docstring)."""
    partitions = [data_dir / "node-1" / "data" / f"output-{p}" for p in range(PARTITIONS)]
    files = [str(f) for d in partitions for kind in ("*.log", "*.txnindex") for f in d.glob(kind)]
    status, out, err = tool(
        libs,
        "DumpLogSegments",
        "--files",
        ",".join(sorted(files)),
        "--deep-iteration",
        "--print-data-log",
    )
    valid, invalid = out.count("isvalid: true"), out.count("isvalid: false")
    markers = Counter(re.findall(r"endTxnMarker: (COMMIT|ABORT)", out))
    indexed = len(re.findall(r"lastStableOffset[:=] ?\d+", out))
    ok = (
        status == 0
        and invalid == 0
        and valid > 0
        and markers["COMMIT"] > 0
        and 0 < indexed <= markers["ABORT"]  # none for an aborted transaction without data
    )
    said = (
        f"exit {status}, {len(files)} files: {valid} batches valid, {invalid} not; markers "
        f"{dict(markers)}; {indexed} aborted transactions indexed"
    )
    return ok, said if ok else f"{said} | {err.strip()[-300:]}"


def run(libs: Path, args: argparse.Namespace, work: Path) -> list[tuple[str, bool, str]]:
    results: list[tuple[str, bool, str]] = []
    with running_cluster(work / "cluster", args.base_port) as bootstrap:
        create_topic(bootstrap, "input", PARTITIONS)
        create_topic(bootstrap, "output", PARTITIONS)
        written = [f"p{p}-{i}" for p in range(PARTITIONS) for i in range(args.messages)]
        with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
            for value in written:
                producer.send("input", value.encode(), partition=int(value[1 : value.index("-")]))
            producer.flush()
        began = time.monotonic()
        copiers = {p: copier(libs, bootstrap, p, args, work) for p in range(PARTITIONS)}
        # Kill partition 0's copier once it has committed a few transactions, then restart it.
        log0 = copiers[0].log_path

        def processed() -> int:
            found = PROCESSED.findall(log0.read_text(errors="replace"))
            return max(map(int, found), default=0)

        wait_for(
            lambda: processed() >= 3 * args.transaction_size,
            "copier-0 to commit three transactions",
        )
        copiers[0].process.send_signal(signal.SIGKILL)
        copiers[0].process.wait()
        copiers[0] = copier(libs, bootstrap, 0, args, work)
        if args.broker_kills:
            results.append(
                (
                    "brokers killed while copying",
                    *kill_brokers(work / "cluster", bootstrap, args, copiers),
                )
            )
        for partition, process in copiers.items():
            status = process.process.wait(args.timeout)
            results.append(
                (
                    f"copied partition {partition}",
                    status == 0,
                    f"exit {status}" + ("" if status == 0 else f": {process.log_tail(5)}"),
                )
            )
        seconds = time.monotonic() - began
        committed = read_values(bootstrap, "read_committed", len(written), args.timeout)
        counts = Counter(committed)
        missing = sorted(set(written) - set(counts))
        doubled = sorted(v for v, n in counts.items() if n > 1)
        extra = sorted(set(counts) - set(written))
        results.append(
            (
                "exactly once",
                not missing and not doubled and not extra,
                f"{len(committed)} read_committed for {len(written)} written in {seconds:.1f} s; "
                f"missing {len(missing)} {missing[:3]}, twice or more {len(doubled)} "
                f"{doubled[:3]}, unknown {len(extra)}",
            )
        )
        uncommitted = read_values(bootstrap, "read_uncommitted", len(written), args.timeout)
        results.append(
            (
                "aborted data hidden",
                len(uncommitted) > len(committed),
                f"{len(uncommitted)} records read_uncommitted against {len(committed)}",
            )
        )
        offsets = committed_offsets(bootstrap)
        results.append(
            (
                "offsets",
                all(offsets.get(p) == args.messages for p in range(PARTITIONS)),
                f"committed {offsets} for {args.messages} a partition",
            )
        )
        results.append(("kafka-dump-log", *dump_log(libs, work / "cluster")))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=6000, help="per input partition")
    parser.add_argument(
        "--broker-kills",
        type=int,
        default=3,
        help="brokers killed with SIGKILL and restarted, one at a time, while copying (0: none)",
    )
    parser.add_argument("--transaction-size", type=int, default=50)
    parser.add_argument("--base-port", type=int, default=27660)
    parser.add_argument("--timeout", type=float, default=300, help="seconds, per wait")
    parser.add_argument("--keep", help="copy the work directory (logs) here at the end")
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        print("kafka transactional copier check: needs java on PATH", file=sys.stderr)
        return 1
    libs = kafka_libs()
    with tempfile.TemporaryDirectory(prefix="replog-txn-copier-") as work:
        try:
            results = run(libs, args, Path(work))
        except (RuntimeError, TimeoutError) as exc:
            results = [("run", False, str(exc)[-2000:])]
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    return print_results(results)


if __name__ == "__main__":
    sys.exit(main())
