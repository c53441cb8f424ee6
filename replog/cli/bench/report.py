"""The benchmark report: one HTML page with PNG plots from a directory of run results.

Plots (matplotlib, Agg backend): produce throughput over time (one line per run, colour per
system, warm-up shaded), latency percentiles (produce and end-to-end, median of the runs with
min-max whiskers) and the end-to-end latency CDF (one line per run). The table gives each
figure as min / median / max over the runs and, for every system but the baseline, the ratio of
its median to the baseline's (Apache Kafka when it ran, else the first system).

Runs are grouped into series: a system's, or "<system> [<client>]" for each client of a clients
run. Below the table, the goals replog is held to (`goals`) that the runs measured: replog's
median as a ratio of the other side's, met or missed.

Rules: the report is made from the JSON results alone (`replog bench --report DIR` remakes it),
so what a page shows can always be traced to a file. PNGs are kept small (80 dpi, a few tens
of KiB). Client-bound runs and the machine's load are flagged on the page.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from replog.cli.bench.goals import check_goals
from replog.errors import ReplogError

RESULT_SUFFIX = ".json"
# A system keeps its colour in every report, whichever systems ran.
SYSTEM_COLOURS = {
    "replog": "#1f77b4",
    "kafka": "#d62728",
    "replog-kafka": "#2ca02c",
    "etcd": "#17becf",
}
OTHER_COLOURS = ("#9467bd", "#ff7f0e", "#8c564b")
DPI = 80
PLOTS = {
    "throughput.png": "Produce throughput over time (acknowledged MB/s per second)",
    "latency.png": "Latency percentiles (median of the runs; whiskers: min and max)",
    "cdf.png": "End-to-end latency CDF (every run)",
}
TABLE_FIGURES: tuple[tuple[str, str, Callable[[dict[str, Any]], float], bool], ...] = (
    # label, unit, value of one result, higher is better
    ("produce throughput", "MB/s", lambda r: r["produce"]["mb_per_s"], True),
    ("produce throughput", "records/s", lambda r: r["produce"]["records_per_s"], True),
    ("produce latency p50", "ms", lambda r: r["produce"]["latency_ms"]["p50"], False),
    ("produce latency p99", "ms", lambda r: r["produce"]["latency_ms"]["p99"], False),
    ("end-to-end latency p50", "ms", lambda r: r["end_to_end"]["latency_ms"]["p50"], False),
    ("end-to-end latency p99", "ms", lambda r: r["end_to_end"]["latency_ms"]["p99"], False),
    ("end-to-end latency p99.9", "ms", lambda r: r["end_to_end"]["latency_ms"]["p99.9"], False),
    ("driver processes' CPU, summed", "cores", lambda r: r["driver_cpu_cores"], False),
    # Rows that only some runs have (a catch-up run's read; results from before the harness
    # counted requests and metered the servers): shown when every run of the report has them.
    ("servers' CPU while producing", "cores", lambda r: r["server_cpu_cores"], False),
    ("catch-up read", "MB/s", lambda r: r["catch_up"]["mb_per_s"], True),
    ("catch-up read", "records/s", lambda r: r["catch_up"]["records_per_s"], True),
    ("catch-up read", "s", lambda r: r["catch_up"]["seconds"], False),
    (
        "servers' CPU during the catch-up read",
        "cores",
        lambda r: r["catch_up"]["server_cpu_cores"],
        False,
    ),
    # A metadata run's requests: CreateTopics, etcd's Put / Txn, or JetStream's stream creates.
    ("metadata requests answered", "per s", lambda r: r["metadata"]["requests_per_s"], True),
    ("metadata request latency p99", "ms", lambda r: r["metadata"]["latency_ms"]["p99"], False),
    ("partitions created, end to end", "s", lambda r: r["controller"]["created_s"], False),
    (
        "partitions created, CreateTopics answered",
        "s",
        lambda r: r["controller"]["answered_s"],
        False,
    ),
    (
        "controller failover, kill to a CreateTopics answered",
        "s",
        lambda r: r["controller"]["failover"]["seconds"],
        False,
    ),
    (
        "servers' CPU per 1,000 idle partitions",
        "cores",
        lambda r: r["idle"]["cores_per_1000"],
        False,
    ),
    (
        "servers' CPU without the idle partitions",
        "cores",
        lambda r: r["idle"]["server_cpu_cores_without"],
        False,
    ),
    (
        "end-to-end p99 without the idle partitions",
        "ms",
        lambda r: r["idle"]["end_to_end_p99_ms_without"],
        False,
    ),
    (
        "end-to-end p99 beside the idle partitions",
        "ms",
        lambda r: r["idle"]["end_to_end_p99_ms_with"],
        False,
    ),
    (
        "idle topic created, CreateTopics answered",
        "s",
        lambda r: r["idle"]["idle_answered_s"],
        False,
    ),
    (
        "idle topic created, then until every replica was led (before the phase beside it)",
        "s",
        lambda r: r["idle"]["idle_led_wait_s"],
        False,
    ),
    # A transactional run's: its transactional phase against its plain one.
    (
        "transactional produce, committed",
        "MB/s",
        lambda r: r["transactions"]["committed_mb_per_s"],
        True,
    ),
    (
        "plain produce, same run",
        "MB/s",
        lambda r: r["transactions"]["plain_mb_per_s"],
        True,
    ),
    (
        "transactional / plain produce",
        "MB/s ratio",
        lambda r: r["transactions"]["mb_per_s_ratio"],
        True,
    ),
    (
        "transaction commit latency p50",
        "ms",
        lambda r: r["transactions"]["commit_latency_ms"]["p50"],
        False,
    ),
    (
        "transaction commit latency p99",
        "ms",
        lambda r: r["transactions"]["commit_latency_ms"]["p99"],
        False,
    ),
    ("transactions committed", "per s", lambda r: r["transactions"]["commits_per_s"], True),
    ("produce requests", "per s", lambda r: r["requests"]["produce_per_s"], True),
    ("produce requests", "per s per broker", lambda r: r["requests"]["per_broker_per_s"], True),
)


def load_results(directory: str) -> list[dict[str, Any]]:
    """Every run result (`*.json` with a "system" key) in `directory`, in name order."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(RESULT_SUFFIX))
    except OSError as exc:
        raise ReplogError(f"--report {directory}: {exc.strerror or exc}") from None
    results = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except (OSError, ValueError) as exc:
            raise ReplogError(f"{path}: not a benchmark result: {exc}") from None
        if isinstance(document, dict) and "system" in document:
            results.append(document)
    if not results:
        raise ReplogError(f"{directory}: holds no benchmark results (*.json)")
    return results


def series(result: dict[str, Any]) -> str:
    """The series a run belongs to: its system, and its client in a clients run."""
    client = result.get("client")
    return result["system"] if client is None else f"{result['system']} [{client}]"


def by_system(results: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        grouped.setdefault(series(result), []).append(result)
    return grouped


def baseline_of(systems: Sequence[str]) -> str:
    return "kafka" if "kafka" in systems else systems[0]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def write_report(results: Sequence[dict[str, Any]], directory: str) -> str:
    """Write report.html and its PNGs into `directory`; return the page's path."""
    grouped = by_system(results)
    os.makedirs(directory, exist_ok=True)
    _plot_throughput(grouped, os.path.join(directory, "throughput.png"))
    _plot_latency(grouped, os.path.join(directory, "latency.png"))
    _plot_cdf(grouped, os.path.join(directory, "cdf.png"))
    path = os.path.join(directory, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(grouped))
    return path


# --- plots ----------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colour(system: str, index: int) -> str:
    return SYSTEM_COLOURS.get(system, OTHER_COLOURS[index % len(OTHER_COLOURS)])


def _plot_throughput(grouped: dict[str, list[dict[str, Any]]], path: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    warmup = end = 0.0
    for index, (system, runs) in enumerate(grouped.items()):
        for number, result in enumerate(runs):
            size = result["workload"].get("messageSize", 0)  # a metadata run's: none
            per_s = [n * size / 2**20 for n in result["timeline"]["produced_per_s"]]
            label = system if number == 0 else None
            ax.plot(
                range(len(per_s)),
                per_s,
                color=_colour(system, index),
                alpha=0.8,
                lw=1.2,
                label=label,
            )
            # A controller run's workload has no durations.
            warmup = max(warmup, float(result["workload"].get("warmupDurationSeconds", 0)))
            end = max(end, warmup + float(result["workload"].get("testDurationSeconds", 0)))
    if warmup:
        ax.axvspan(0, warmup, color="0.9", label="warm-up")
    ax.axvline(end, color="0.5", ls="--", lw=1, label="sends end (then flush)")
    kills = [r["failover"]["at_s"] for runs in grouped.values() for r in runs if "failover" in r]
    for number, at_s in enumerate(kills):
        ax.axvline(at_s, color="k", ls=":", lw=1, label="leader killed" if number == 0 else None)
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("MB/s acknowledged")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _plot_latency(grouped: dict[str, list[dict[str, Any]]], path: str) -> None:
    plt = _pyplot()
    names = ("p50", "p95", "p99", "p99.9")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    width = 0.8 / max(1, len(grouped))
    for ax, side, title in zip(
        axes, ("produce", "end_to_end"), ("produce", "end to end"), strict=True
    ):
        for index, (system, runs) in enumerate(grouped.items()):
            lows, mids, highs = [], [], []
            for name in names:
                low, mid, high = spread([r[side]["latency_ms"][name] for r in runs])
                lows.append(mid - low)
                mids.append(mid)
                highs.append(high - mid)
            xs = [i + (index - (len(grouped) - 1) / 2) * width for i in range(len(names))]
            ax.bar(
                xs,
                mids,
                width,
                color=_colour(system, index),
                label=system,
                yerr=[lows, highs],
                capsize=2,
            )
        ax.set_xticks(range(len(names)), names)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("ms")
        if any(r[side]["latency_ms"]["max"] > 0 for runs in grouped.values() for r in runs):
            ax.set_yscale("log")  # a metadata run has no end-to-end latencies
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _plot_cdf(grouped: dict[str, list[dict[str, Any]]], path: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for index, (system, runs) in enumerate(grouped.items()):
        for number, result in enumerate(runs):
            points = result["end_to_end"]["cdf"]
            if not points:
                continue
            xs = [max(p[0], 1e-3) for p in points]
            ys = [p[1] for p in points]
            label = system if number == 0 else None
            ax.plot(xs, ys, color=_colour(system, index), alpha=0.8, lw=1.2, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("end-to-end latency (ms)")
    ax.set_ylabel("fraction of records")
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# --- the page -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def summary_rows(grouped: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    """The table's rows: figure, then per system "min / median / max" (and the ratio of its
    median to the baseline's); a figure some run lacks, or that every run has as 0, has none."""
    systems = list(grouped)
    baseline = baseline_of(systems)
    rows = []
    for label, unit, value, _higher_better in TABLE_FIGURES:
        if not all(_has(value, r) for runs in grouped.values() for r in runs):
            continue
        if not any(value(r) for runs in grouped.values() for r in runs):
            continue  # nothing any run measured (a controller run's produce figures)
        row = [f"{label} ({unit})"]
        base_mid = spread([value(r) for r in grouped[baseline]])[1]
        for system in systems:
            low, mid, high = spread([value(r) for r in grouped[system]])
            cell = f"{_number(low)} / {_number(mid)} / {_number(high)}"
            if system != baseline and base_mid:
                cell += f" ({mid / base_mid:.2f}x)"
            row.append(cell)
        rows.append(row)
    return rows


def _has(value: Callable[[dict[str, Any]], float], result: dict[str, Any]) -> bool:
    try:
        value(result)
    except KeyError:
        return False
    return True


def failover_rows(grouped: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    """Rows for runs that killed a leader: the longest time without an acknowledgement (and
    without a receipt) from the kill on, min / median / max."""
    if not any("failover" in r for runs in grouped.values() for r in runs):
        return []
    rows = []
    for label, key in (
        ("unavailable after the leader's kill, produce (s)", "unavailable_s"),
        ("unavailable after the leader's kill, end to end (s)", "end_to_end_unavailable_s"),
    ):
        row = [label]
        for runs in grouped.values():
            values = [r["failover"][key] for r in runs if "failover" in r]
            row.append(" / ".join(_number(v) for v in spread(values)) if values else "-")
        rows.append(row)
    return rows


def render_html(grouped: dict[str, list[dict[str, Any]]]) -> str:
    systems = list(grouped)
    first = next(iter(grouped.values()))[0]
    workload = first["workload"]
    baseline = baseline_of(systems)
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>replog bench: {esc(workload['name'])}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:1em auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;"
        "text-align:right}td:first-child{text-align:left}.warn{color:#a40}</style>",
        "</head><body>",
        f"<h1>replog bench: {esc(workload['name'])}</h1>",
        f"<p>Systems: {esc(', '.join(systems))}; runs per system: "
        f"{esc(', '.join(f'{s} {len(r)}' for s, r in grouped.items()))}. Each cell is min / "
        f"median / max over the runs; (Nx) is the median's ratio to {esc(baseline)}'s.</p>",
        "<table><tr><th>figure</th>",
        *(f"<th>{esc(s)}</th>" for s in systems),
        "</tr>",
    ]
    for row in summary_rows(grouped) + failover_rows(grouped):
        parts.append("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>")
    parts.append("</table>")
    checks = check_goals(grouped)
    if checks:
        parts.append(
            "<h2>Goals</h2><table><tr><th>goal</th><th>sides</th><th>min, median, max</th>"
            "<th>ratio</th><th>verdict</th></tr>"
        )
        for check in checks:
            parts.append(
                "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in check.row()) + "</tr>"
            )
        parts.append("</table>")
    bound = sorted({r["system"] for runs in grouped.values() for r in runs if r["client_bound"]})
    if bound:
        parts.append(
            f"<p class='warn'>Client-bound: a driver process kept a whole core busy, or the "
            f"driver processes together nearly all the cores they may use, in runs of "
            f"{esc(', '.join(bound))}; those figures are the clients' ceiling as much as the "
            "servers'.</p>"
        )
    loads = [r["load_average"]["before"][0] for runs in grouped.values() for r in runs]
    parts.append(
        f"<p class='warn'>Noisy: measured on a shared machine (1-minute load average at the "
        f"runs' starts: {esc(', '.join(f'{x:.1f}' for x in loads))} on "
        f"{esc(str(first['machine']['cores']))} cores).</p>"
    )
    for name, caption in PLOTS.items():
        parts.append(f"<h2>{esc(caption)}</h2><img src='{name}' alt='{esc(caption)}'>")
    parts.append("<h2>Workload</h2><pre>" + esc(json.dumps(workload, indent=2)) + "</pre>")
    parts.append("<h2>Systems, machine and versions</h2><ul>")
    for runs in grouped.values():
        described = "; ".join(f"{k}: {v}" for k, v in runs[0]["system_info"].items())
        parts.append(f"<li>{esc(described)}</li>")
    info = {**first["machine"], **first["versions"]}
    parts.append("".join(f"<li>{esc(str(k))}: {esc(str(v))}</li>" for k, v in info.items()))
    parts.append("</ul>")
    errors = [
        f"{r['system']} run {r['run']}: {side} {r[side]['errors']} errors, first: "
        f"{r[side]['first_error']}"
        for runs in grouped.values()
        for r in runs
        for side in ("produce", "end_to_end")
        if r[side]["errors"]
    ]
    if errors:
        parts.append("<h2>Errors</h2><ul>")
        parts.extend(f"<li class='warn'>{esc(e)}</li>" for e in errors)
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
