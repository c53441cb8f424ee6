"""`replog bench WORKLOAD.yaml [--systems replog,kafka] [--runs N] [--server-cpus LIST
--driver-cpus LIST]`: run an OpenMessaging-Benchmark-style workload against replog, Apache
Kafka and NATS JetStream on this machine, and report.

For each system in turn: start a 3-node cluster on loopback (replog: in `--work-dir`; Apache
Kafka: with bench/kafka/kafka.sh, which fetches Kafka's jars with Maven the first time), run
the workload `--runs` times (fresh topics each run, replication factor 3,
min.insync.replicas=2, acks=all), stop the cluster. Every run's result is one JSON file, and
the HTML report with its PNG plots is written beside them, in a new directory under
`--output` (named by the time and the workload). `--report DIR` remakes a report from the
JSON files in DIR.

Systems: `replog` (replog's own Python client) and `replog-kafka` (confluent-kafka), both
through replog's Kafka listeners, `kafka` (confluent-kafka against Apache Kafka 4.x),
`jetstream` (NATS JetStream, through a compiled Go driver built by bench/jetstream/build.sh),
`etcd` (3 etcd members, for metadata runs only); a transactional run (`recordsPerTransaction`)
runs on the first three. A workload with `clients` (a clients run)
drives the `replog` system's cluster through each of those clients in turn, run by run.
Every producer and consumer runs in a driver process of its own. `--server-cpus` and
`--driver-cpus` (taskset lists) pin the servers and the driver processes to those CPUs.
Workload files: bench/workloads/*.yaml; their fields are in docs/benchmarks.md ("Harness").
Needs the bench extra (`pip install -e '.[bench]'`: confluent-kafka, matplotlib, PyYAML); the
`kafka` system needs Java 17+ and Maven, `jetstream` Go.

Rules: the module imports nothing heavy until a run starts, so `replog --help` stays fast. A
bad workload file is a `WorkloadError` naming the field; a workload a system cannot run, or
a system that cannot start, is a `BenchSystemError` (the former before anything starts), and a
started system is stopped whatever happens. `--base-port` gives each system its first port in
turn (a system past the list's end takes the last one's plus 300 for each step).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from replog.cli.arguments import add_documented_command, at_least
from replog.errors import ReplogError

DEFAULT_SYSTEMS = "replog,kafka"
DEFAULT_RUNS = 3
DEFAULT_WARM_UP_RUNS = 2
DEFAULT_OUTPUT = os.path.join(".replog", "bench-results")
DEFAULT_WORK_DIR = os.path.join(".replog", "bench")
DEFAULT_BASE_PORT = 39092
PORTS_PER_SYSTEM = 300  # a system's nodes listen at its base port .. base + 299
DISK_HEADROOM = 1.1  # a catch-up run's backlog x 3 replicas, and indexes and logs beside it


def _systems(text: str) -> list[str]:
    from replog.cli.bench.systems import SYSTEMS

    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a comma-separated list of {', '.join(SYSTEMS)}"
        )
    return list(dict.fromkeys(names))


def _base_ports(text: str) -> list[int]:
    ports = []
    for part in text.split(","):
        try:
            port = int(part)
        except ValueError:
            port = 0
        if not 1024 <= port <= 65535 - PORTS_PER_SYSTEM:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected ports in [1024, {65535 - PORTS_PER_SYSTEM}], comma-separated"
            )
        ports.append(port)
    return ports


def base_port_of(ports: list[int], index: int) -> int:
    """The first port of the `index`-th system (the module docstring)."""
    if index < len(ports):
        return ports[index]
    return ports[-1] + (index - len(ports) + 1) * PORTS_PER_SYSTEM


# The systems each kind of workload runs on (the rest are refused before anything starts).
CONTROLLER_SYSTEMS: tuple[str, ...] = ("replog", "replog-kafka", "kafka")
METADATA_SYSTEMS: tuple[str, ...] = ("replog", "replog-kafka", "kafka", "etcd", "jetstream")
CLIENTS_SYSTEMS: tuple[str, ...] = ("replog",)
DATA_SYSTEMS: tuple[str, ...] = ("replog", "replog-kafka", "kafka", "jetstream")
TRANSACTIONAL_SYSTEMS: tuple[str, ...] = ("replog", "replog-kafka", "kafka")


def check_systems(workload: Any, systems: list[str], source: str) -> None:
    """Refuse a workload a named system cannot run (`BenchSystemError` naming both), and one
    whose partitions Kafka's nodes could not hold under this machine's limits."""
    from replog.cli.bench.etcd import TXN_OPS_MAX
    from replog.errors import BenchSystemError

    if workload.controller:
        kind, allowed = "a controller run (createPartitions)", CONTROLLER_SYSTEMS
    elif workload.metadata_clients:
        kind, allowed = "a metadata run (metadataClients)", METADATA_SYSTEMS
    elif workload.clients:
        kind, allowed = "a clients run (clients)", CLIENTS_SYSTEMS
    elif workload.records_per_transaction:
        kind, allowed = "a transactional run (recordsPerTransaction)", TRANSACTIONAL_SYSTEMS
    else:
        kind, allowed = "a produce and consume run", DATA_SYSTEMS
    refused = [s for s in systems if s not in allowed]
    if refused:
        raise BenchSystemError(
            f"bench: {source} is {kind}: {', '.join(refused)} cannot run it; run it against "
            f"{', '.join(allowed)}"
        )
    if "kafka" in systems:
        from replog.cli.bench.systems import check_kafka_limits

        check_kafka_limits(workload.most_partitions)
    if "etcd" in systems and workload.topics_per_request > TXN_OPS_MAX:
        raise BenchSystemError(
            f"bench: {source}: topicsPerRequest {workload.topics_per_request}: etcd writes a "
            f"request's topics in one Txn, of at most {TXN_OPS_MAX} puts"
        )


def run(args: argparse.Namespace) -> int:
    from replog.cli.bench.report import load_results, write_report

    if args.report:
        results = load_results(args.report)
        page = write_report(results, args.report)
        print_goals(results)
        print(f"report: {page}")
        return 0
    if args.workload is None:
        raise ReplogError("bench: name a WORKLOAD.yaml (or --report DIR)")
    from replog.cli.bench.pinning import check_cpus
    from replog.cli.bench.workload import load_workload

    workload = load_workload(args.workload)
    check_systems(workload, args.systems, args.workload)
    check_cpus(args.server_cpus, "--server-cpus")
    check_cpus(args.driver_cpus, "--driver-cpus")
    check_disk(workload, args.work_dir)
    stem = os.path.splitext(os.path.basename(args.workload))[0]
    output = os.path.join(args.output, f"{time.strftime('%Y%m%d-%H%M%S')}-{stem}")
    os.makedirs(output, exist_ok=True)
    results = []
    for index, system_name in enumerate(args.systems):
        base_port = base_port_of(args.base_port, index)
        results += run_system(system_name, workload, args, base_port, output)
    page = write_report(results, output)
    print_goals(results)
    print(f"report: {page}")
    return 0


def print_goals(results: list[dict[str, Any]]) -> None:
    """The goals the runs measured (`goals`), one line each: each side's figure (min, median,
    max of its runs, or the one run's) and the ratio of the medians."""
    from replog.cli.bench.goals import check_goals
    from replog.cli.bench.report import by_system

    for check in check_goals(by_system(results)):
        goal, sides, figures, ratio, verdict = check.row()
        print(f"goal: {goal}: {sides} = {figures} = {ratio}: {verdict}")


def check_disk(workload: Any, work_dir: str) -> None:
    """A catch-up run's backlog, three replicas of it, must fit the disk of `work_dir` (a run's
    topics are deleted after it, so one run's worth is enough)."""
    import shutil

    from replog.cli.bench.drivers import REPLICATION_FACTOR
    from replog.cli.bench.workload import GIB

    if workload.backlog_gib is None:
        return
    os.makedirs(work_dir, exist_ok=True)
    need = workload.backlog_gib * GIB * REPLICATION_FACTOR * DISK_HEADROOM
    free = shutil.disk_usage(work_dir).free
    if free < need:
        raise ReplogError(
            f"bench: the {workload.backlog_gib:g} GiB backlog needs {need / GIB:.1f} GiB free in "
            f"--work-dir {work_dir} (three replicas and {DISK_HEADROOM - 1:.0%} more); "
            f"{free / GIB:.1f} GiB are"
        )


def run_system(
    system_name: str, workload: Any, args: argparse.Namespace, base_port: int, output: str
) -> list[dict[str, Any]]:
    """Start `system_name`, run the workload `args.warm_up_runs` times untimed and then
    `args.runs` times, stop it; the measured runs' results (each also written to
    `output/<system>-run<N>.json`)."""
    from replog.cli.bench.runner import machine
    from replog.cli.bench.systems import make_system

    work_dir = os.path.realpath(args.work_dir)
    system = make_system(system_name, work_dir, base_port, args.kafka_script, args.server_cpus)
    print(f"{system_name}: starting a 3-node cluster", flush=True)
    results = []
    system.start()
    try:
        for number in range(1 - args.warm_up_runs, args.runs + 1):
            # A clients run takes every client in turn, first one later each run.
            clients = list(workload.clients) or [None]
            shift = (number - 1) % len(clients)
            for client in clients[shift:] + clients[:shift]:
                result = _run_one(system, client, workload, args, work_dir)
                label = system_name if client is None else f"{system_name}-{client}"
                if number < 1:
                    warm_up = number + args.warm_up_runs
                    print(
                        f"{label} warm-up run {warm_up}/{args.warm_up_runs} (not measured): "
                        f"{run_text(result)}",
                        flush=True,
                    )
                    continue
                result.update(
                    {
                        "system": system_name,
                        "run": number,
                        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "workload": workload.to_json(),
                        "system_info": system.describe(),
                        "machine": machine(),
                        "versions": versions(),
                    }
                )
                path = os.path.join(output, f"{label}-run{number}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(result, f, indent=1)
                    f.write("\n")
                print(f"{label} run {number}/{args.runs}: {run_text(result)}", flush=True)
                results.append(result)
    finally:
        system.stop()
    return results


def _run_one(
    system: Any, client: str | None, workload: Any, args: argparse.Namespace, work_dir: str
) -> dict[str, Any]:
    """One run of `workload` on the running `system` (through `client`, in a clients run)."""
    from replog.cli.bench.pinning import pinned
    from replog.cli.bench.runner import Target, run_once

    # Kafka removes a deleted topic's logs a minute later: not during this run (a no-op when
    # nothing was deleted before it, so the last run's deletions cost no wait).
    getattr(system, "wait_deleted", lambda: None)()
    target = Target(
        driver=client or system.driver,
        servers=system.servers_for(client) if client else system.bootstrap_servers,
        program=system.program,
        create_topics=system.create_topics,
        delete_topics=system.delete_topics,
        kill_leader=system.kill_leader,
        server_pids=system.server_pids,
        create_led=getattr(system, "create_led", None),
        fail_controller=getattr(system, "fail_controller", None),
        restart_killed=system.restart_killed,
    )
    # The harness's own threads (the drain loop, the leader's kill) run with the drivers.
    with pinned(args.driver_cpus):
        result = run_once(
            target,
            workload,
            work_dir=os.path.join(work_dir, "drivers"),
            driver_cpus=args.driver_cpus,
        )
    system.restart_killed()
    if client is not None:
        result["client"] = client
    return result


def run_text(result: dict[str, Any]) -> str:
    """A run's one line of figures, as printed after it."""
    if "controller" in result:
        return _controller_text(result["controller"])
    if "metadata" in result:
        return _metadata_text(result)
    produce, e2e = result["produce"], result["end_to_end"]
    return (
        f"{produce['mb_per_s']:.1f} MB/s "
        f"({produce['records_per_s']:,.0f} records/s), produce p99 "
        f"{produce['latency_ms']['p99']:.1f} ms, end-to-end p99 "
        f"{e2e['latency_ms']['p99']:.1f} ms, errors {produce['errors']}"
        + _catch_up_text(result.get("catch_up"))
        + f", {result['requests']['produce_per_s']:,.0f} produce requests/s, servers "
        f"{result['server_cpu_cores']:.2f} cores"
        + _failover_text(result.get("failover"))
        + _idle_text(result.get("idle"))
        + _transactions_text(result.get("transactions"))
        + (" [client-bound]" if result["client_bound"] else "")
    )


def _controller_text(controller: dict[str, Any]) -> str:
    text = (
        f"{controller['partitions']:,} partitions created in {controller['created_s']:.2f} s "
        f"end to end (answered after {controller['answered_s']:.2f} s), "
        f"{controller['partitions_per_s']:,.0f} partitions/s"
    )
    failover = controller.get("failover")
    if failover:
        text += (
            f"; controller {failover['killed_node']} killed at "
            f"{failover['image_partitions']:,} partitions: a CreateTopics answered after "
            f"{failover['seconds']:.3f} s"
        )
        if failover.get("restart_error"):
            text += f"; the killed node did not come back: {failover['restart_error']}"
    return text


def _idle_text(idle: dict[str, Any] | None) -> str:
    if idle is None or "cores_per_1000" not in idle:  # a catch-up run's: its creation only
        return ""
    wait = idle.get("idle_led_wait_s")
    return (
        f"; {idle['partitions']:,} idle partitions"
        + ("" if wait is None else f" (all led {wait:.1f} s after their CreateTopics answer)")
        + f": servers {idle['server_cpu_cores_without']:.2f}"
        f" -> {idle['server_cpu_cores_with']:.2f} cores ({idle['cores_per_1000']:+.3f} per "
        f"1,000), end-to-end p99 {idle['end_to_end_p99_ms_without']:.1f} -> "
        f"{idle['end_to_end_p99_ms_with']:.1f} ms"
    )


def _transactions_text(transactions: dict[str, Any] | None) -> str:
    if transactions is None:
        return ""
    latency = transactions["commit_latency_ms"]
    return (
        f"; {transactions['commits']:,} commits of {transactions['records_per_transaction']} "
        f"records: {transactions['committed_mb_per_s']:.1f} MB/s committed, commit p50 "
        f"{latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms; plain produce "
        f"{transactions['plain_mb_per_s']:.1f} MB/s "
        f"(transactional / plain {transactions['mb_per_s_ratio']:.2f}x)"
    )


def _metadata_text(result: dict[str, Any]) -> str:
    metadata = result["metadata"]
    return (
        f"{metadata['requests_per_s']:,.1f} metadata requests/s answered "
        f"({metadata['topics_per_s']:,.1f} topics/s) from {metadata['clients']} processes, "
        f"p99 {metadata['latency_ms']['p99']:.1f} ms, errors {metadata['errors']}, servers "
        f"{result['server_cpu_cores']:.2f} cores"
    )


def _catch_up_text(catch_up: dict[str, Any] | None) -> str:
    if catch_up is None:
        return ""
    return (
        f"; catch-up read {catch_up['mb_per_s']:.1f} MB/s ({catch_up['records']:,} of "
        f"{catch_up['expected']:,} records in {catch_up['seconds']:.1f} s)"
    )


def _failover_text(failover: dict[str, Any] | None) -> str:
    if failover is None:
        return ""
    if failover["error"]:
        return f"; the leader's kill failed: {failover['error']}"
    return (
        f"; node {failover['killed_node']} killed at {failover['at_s']:.1f} s: "
        f"{failover['unavailable_s']:.2f} s without an acknowledgement"
    )


def versions() -> dict[str, str]:
    """The versions and commit every result records."""
    import contextlib
    import importlib.metadata
    import subprocess

    import confluent_kafka

    from replog import __version__

    found = {
        "replog": __version__,
        "confluent-kafka": (
            f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
        ),
    }
    for client in ("kafka-python", "aiokafka"):  # the clients runs' other clients
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[client] = importlib.metadata.version(client)
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        commit = subprocess.run(
            ["git", "-C", checkout, "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    found["replog commit"] = commit or "unknown"
    return found


def register(commands: Any) -> None:
    parser = add_documented_command(commands, "bench", __doc__)
    parser.add_argument("workload", nargs="?", metavar="WORKLOAD.yaml", help="the workload file")
    parser.add_argument(
        "--systems",
        type=_systems,
        default=_systems_default(),
        metavar="LIST",
        help=f"systems to run, in order (default: {DEFAULT_SYSTEMS}; also replog-kafka, jetstream)",
    )
    parser.add_argument(
        "--runs",
        type=at_least(1),
        default=DEFAULT_RUNS,
        metavar="N",
        help=f"runs per system (default: {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--warm-up-runs",
        type=at_least(0),
        default=DEFAULT_WARM_UP_RUNS,
        metavar="N",
        help="runs per system before the measured ones, printed but left out of the results "
        "and the report: a JVM compiles its hot paths in its first minutes (default: "
        f"{DEFAULT_WARM_UP_RUNS})",
    )
    parser.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        metavar="DIR",
        help=f"results and report go to a new directory in DIR (default: {DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--work-dir",
        default=DEFAULT_WORK_DIR,
        metavar="DIR",
        help=f"the clusters' data (default: {DEFAULT_WORK_DIR}; wiped at each start)",
    )
    parser.add_argument(
        "--base-port",
        type=_base_ports,
        default=[DEFAULT_BASE_PORT],
        metavar="PORT[,PORT...]",
        help=f"each system's first port, in --systems' order; past the list's end, the last "
        f"one's plus {PORTS_PER_SYSTEM} a system (default: {DEFAULT_BASE_PORT})",
    )
    parser.add_argument(
        "--kafka-script",
        metavar="PATH",
        help="bench/kafka/kafka.sh (default: the one of the checkout replog runs from)",
    )
    parser.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="run every system's server processes on these CPUs (taskset's list: 0 or 0,2-3)",
    )
    parser.add_argument(
        "--driver-cpus",
        metavar="LIST",
        help="run the producer and consumer processes (and the harness) on these CPUs",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="only remake the report from the JSON results in DIR",
    )
    parser.set_defaults(run=run)


def _systems_default() -> list[str]:
    return DEFAULT_SYSTEMS.split(",")
