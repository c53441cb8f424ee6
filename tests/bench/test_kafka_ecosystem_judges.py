"""The pure parts of bench/kafka_ecosystem.py: how a tool's output and franz-go's are judged."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench.bench_script import load_bench_script

franz_go = load_bench_script("franz_go_check.py", "franz_go_check")
# The matrix runs tools through kafka_tools_check, which starts clusters with replog_cli.
load_bench_script("replog_cli.py", "replog_cli")
load_bench_script("kafka_tools_check.py", "kafka_tools_check")
matrix = load_bench_script("kafka_tools_matrix.py", "kafka_tools_matrix")
# franz_go_sasl imports franz_go_check and replog_cli, both loaded above.
franz_go_sasl = load_bench_script("franz_go_sasl.py", "franz_go_sasl")


def event(action: str, test: str, output: str = "") -> str:
    fields = {"Action": action, "Package": "kgo", "Test": test}
    if output:
        fields["Output"] = output
    return json.dumps(fields)


GO_EVENTS = "\n".join(
    [
        event("run", "TestGroupETL"),
        event("output", "TestGroupETL", "=== RUN   TestGroupETL\n"),
        event("run", "TestTxnEtl"),
        event("output", "TestTxnEtl", "    txn_test.go:40: unable to init: UNSUPPORTED_VERSION\n"),
        event("output", "TestGroupETL", "    group_test.go:9: deleting topic abc\n"),
        event("fail", "TestTxnEtl"),
        event("output", "TestSCRAMAuth", "    client_test.go:294: KGO_TEST_SCRAM not set\n"),
        event("skip", "TestSCRAMAuth"),
        event("pass", "TestGroupETL/range"),
        event("pass", "TestGroupETL"),
        "FAIL",
    ]
)


def test_franz_go_outcomes_reasons_and_needs() -> None:
    names = ["TestGroupETL", "TestTxnEtl", "TestSCRAMAuth", "TestPing"]
    results = {r.name: r for r in franz_go.judge(names, GO_EVENTS)}
    assert results["TestGroupETL"].outcome == "PASS"
    assert results["TestGroupETL"].said == ""
    assert results["TestTxnEtl"].outcome == "FAIL"
    assert results["TestTxnEtl"].said == "txn_test.go:40: unable to init: UNSUPPORTED_VERSION"
    assert results["TestTxnEtl"].needs is None  # transactions are built: a failure counts
    assert results["TestSCRAMAuth"].outcome == "SKIP"
    assert results["TestSCRAMAuth"].needs is None  # SCRAM is built: franz_go_sasl runs it
    assert results["TestPing"].outcome == "NOT RUN"
    assert results["TestPing"].needs is None


def test_a_scram_test_passes_only_with_every_mechanism() -> None:
    def result(name: str, outcome: str, said: str = "") -> object:
        return franz_go.TestResult(name, outcome, said, None)

    results = [
        ("SCRAM-SHA-256", result("TestSCRAMAuth", "PASS")),
        ("SCRAM-SHA-256", result("TestSCRAMAuthBadCredentials", "PASS")),
        ("SCRAM-SHA-512", result("TestSCRAMAuth", "FAIL", "client_test.go:310: SASL failed")),
        ("SCRAM-SHA-512", result("TestSCRAMAuthBadCredentials", "PASS")),
    ]
    combined = {r.name: r for r in franz_go_sasl.per_test(results)}
    assert list(combined) == ["TestSCRAMAuth", "TestSCRAMAuthBadCredentials"]
    assert combined["TestSCRAMAuthBadCredentials"].outcome == "PASS"
    assert combined["TestSCRAMAuth"].outcome == "FAIL"
    assert combined["TestSCRAMAuth"].said == (
        "with SCRAM-SHA-512: fail (client_test.go:310: SASL failed)"
    )
    skipped = franz_go_sasl.per_test([("SCRAM-SHA-256", result("TestSCRAMAuth", "SKIP", "no"))])
    assert skipped[0].outcome == "SKIP"


def test_integration_tests_are_those_that_reach_a_broker(tmp_path: Path) -> None:
    kgo = tmp_path / "pkg" / "kgo"
    kgo.mkdir(parents=True)
    (kgo / "a_test.go").write_text(
        "package kgo\n\n"
        "func TestUnit(t *testing.T) {\n\tif 1 != 1 {\n\t\tt.Fatal()\n\t}\n}\n\n"
        "func TestBroker(t *testing.T) {\n\tcl, _ := newTestClient()\n\tdefer cl.Close()\n}\n\n"
        "func helper() { tmpTopic(nil) }\n"
    )
    assert franz_go.integration_tests(tmp_path) == ["TestBroker"]


def test_a_tool_that_prints_an_error_and_exits_0_fails() -> None:
    ok, why = matrix.clean(matrix.Said(0, "TOPIC PARTITION STATUS\n", "Error: UNSUPPORTED_VERSION"))
    assert not ok
    assert "UNSUPPORTED_VERSION" in why


def test_a_tool_must_print_what_is_expected() -> None:
    assert matrix.clean(matrix.Said(0, "Created topic tools.\n", ""), r"Created topic")[0]
    ok, why = matrix.clean(matrix.Said(0, "nothing\n", ""), r"Created topic")
    assert not ok
    assert "Created topic" in why
    assert not matrix.clean(matrix.Said(1, "Created topic tools.\n", ""), r"Created topic")[0]
