"""bench/tls_produce.py's parts that need no cluster: the brokers and clients it takes, the
ports of each broker's clusters, each mode's ratio over the same client's and broker's
plaintext, replog's median over Kafka's, and the printed tables."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

bench = load_bench_script("tls_produce.py", "bench_tls_produce")


def test_brokers_and_clients_are_lists_of_known_names_in_a_fixed_order() -> None:
    args = bench.parser().parse_args(["--broker", "kafka,replog", "--client", "kafka"])
    assert args.broker == ("replog", "kafka")
    assert args.client == ("kafka",)
    defaults = bench.parser().parse_args([])
    assert (defaults.broker, defaults.client) == (("replog",), ("replog",))
    for wrong in ("redpanda", "replog,redpanda", ","):
        with pytest.raises(SystemExit):
            bench.parser().parse_args(["--broker", wrong])
    with pytest.raises(Exception, match="'java': one or more of replog, kafka"):
        bench.names(bench.CLIENTS, "--client")("java")


def test_no_two_clusters_share_a_port() -> None:
    """replog's cluster from B takes B.., B + 100.. (metrics), B + 200.. (Kafka listeners) and
    B + 300.. (controllers' Kafka listeners); Kafka's from K takes K.. and K + 100.. (kafka.sh),
    and its files are planned on K + 200.. and K + 300.., which nothing opens."""
    taken: dict[int, str] = {}
    for broker, offsets in (("replog", (0, 100, 200, 300)), ("kafka", (0, 100))):
        for index, mode in enumerate(bench.MODES):
            base = bench.base_port_of(broker, index, 27000)
            for offset in offsets:
                for node in range(3):
                    port = base + offset + node
                    assert port not in taken, (broker, mode, port, taken.get(port))
                    taken[port] = f"{broker} {mode}"
    assert max(taken) < 28000  # within a range of 1,000 ports


RATES = {
    ("kafka", "replog", "plaintext"): [20_000.0, 18_000.0, 19_000.0],
    ("kafka", "replog", "ssl"): [15_200.0, 14_000.0, 16_000.0],
    ("kafka", "replog", "sasl_ssl"): [17_000.0, 17_100.0, 16_900.0],
    ("kafka", "kafka", "plaintext"): [40_000.0, 38_000.0, 42_000.0],
    ("kafka", "kafka", "ssl"): [30_000.0, 32_000.0, 31_000.0],
    ("kafka", "kafka", "sasl_ssl"): [35_000.0, 34_000.0, 36_000.0],
}
# Each run's CPU per MB: the nodes' 1,000,000 / rate ms (faster runs cheaper), the client's 50,
# 70 and 60 ms in turn.
FIGURES = {
    key: [bench.Sample(rate, 1e6 / rate, 50.0 + 10 * (i * 2 % 3)) for i, rate in enumerate(rates)]
    for key, rates in RATES.items()
}


def test_each_ratio_is_over_the_same_brokers_plaintext_and_replog_over_kafka_per_mode() -> None:
    rows = {(row.broker, row.mode): row for row in bench.results(FIGURES)}

    ssl = rows[("replog", "ssl")]
    assert (ssl.min, ssl.median, ssl.max) == (14_000.0, 15_200.0, 16_000.0)
    assert ssl.ratio == pytest.approx(15_200 / 19_000)
    assert ssl.nodes_ms_per_mb == pytest.approx(1e6 / 15_200)
    assert ssl.client_ms_per_mb == 60.0
    assert [run["rate"] for run in ssl.runs] == RATES[("kafka", "replog", "ssl")]
    assert rows[("kafka", "ssl")].ratio == pytest.approx(31_000 / 40_000)
    assert rows[("kafka", "plaintext")].ratio == 1.0
    assert bench.replog_over_kafka(FIGURES) == {
        "kafka": {
            "plaintext": pytest.approx(19_000 / 40_000),
            "ssl": pytest.approx(15_200 / 31_000),
            "sasl_ssl": pytest.approx(17_000 / 35_000),
        }
    }
    one_broker = {key: runs for key, runs in FIGURES.items() if key[1] == "kafka"}
    assert bench.replog_over_kafka(one_broker) == {}


def test_the_report_prints_a_table_per_client_and_broker_then_replog_over_kafka() -> None:
    rows = bench.results(FIGURES)
    lines = bench.report_lines(rows, bench.replog_over_kafka(FIGURES), 100_000, 1024)

    headings = [line for line in lines if line.startswith("kafka client, ")]
    assert [heading.split(",")[1] for heading in headings[:2]] == [
        " replog broker",
        " kafka broker",
    ]
    assert headings[0].startswith("kafka client, replog broker, 100000 records of 1024 B")
    assert "ssl           14000    15200    16000  0.800     66     60  BELOW GOAL" in lines
    assert "sasl_ssl      34000    35000    36000  0.875     29     60  goal met" in lines
    assert "plaintext     38000    40000    42000  1.000     25     60" in lines
    assert lines[-1] == (
        "kafka client, replog's median records/s over Kafka's: plaintext 0.475, ssl 0.490, "
        "sasl_ssl 0.486"
    )
