"""`replog demo` and `replog storage-demo` as commands: help, refusals, and the storage demo's
run (the cluster demo's full run is tests/test_main_job.py).

Refusals happen before anything starts: each is one line on stderr and exit code 1 (argparse:
2), without a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import replog


def run(*args: str) -> tuple[int, str, str]:
    outcome = replog(*args)
    return outcome.returncode, outcome.stdout, outcome.stderr


def assert_one_line_refusal(result: tuple[int, str, str], code: int, *fragments: str) -> None:
    returncode, _, stderr = result
    assert returncode == code, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_help_names_every_step_and_option() -> None:
    code, out, _ = run("demo", "--help")
    assert code == 0
    for text in ("--records", "--rate", "--data-dir", "--base-port", "--keep", "SIGKILL", "Spark"):
        assert text in out
    assert "(default: .replog/demo)" in " ".join(out.split())
    assert "19292" in out and "its Kafka listener (what the demo" in " ".join(out.split())


def test_without_java_the_demo_stops_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    data_dir = tmp_path / "demo"
    result = run("demo", "--data-dir", str(data_dir))
    assert_one_line_refusal(result, 1, "no java found", "Spark needs Java 17", "JAVA_HOME")
    assert not data_dir.exists()


def test_an_old_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    result = run("demo", "--data-dir", str(tmp_path / "demo"))
    assert_one_line_refusal(result, 1, "is Java 8", "Spark needs Java 17")


def test_a_directory_that_is_not_the_demos_is_never_wiped(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    result = run("demo", "--data-dir", str(precious))
    assert_one_line_refusal(result, 1, str(precious), "holds no cluster.json")
    assert (precious / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--records", "0"), "must be at least 1"),
        (("--rate", "-1"), "must be at least 0"),
        (("--base-port", "70000"), "not a port"),
    ],
)
def test_bad_arguments_are_argparse_errors(args: tuple[str, ...], fragment: str) -> None:
    code, _, stderr = run("demo", *args)
    assert code == 2
    assert fragment in stderr
    assert "Traceback" not in stderr


def test_the_storage_demo_runs_under_its_new_name(tmp_path: Path) -> None:
    code, out, err = run(
        "storage-demo", "--run-seconds", "0.3", "--data-dir", str(tmp_path / "storage")
    )
    assert code == 0, out + err
    assert "[2/6] killed the writer with SIGKILL" in out
    assert "OK: every acknowledged record survived the crash exactly once, in order" in out
    assert os.path.isdir(tmp_path / "storage" / "demo-events-0")


def test_the_demo_s_clients_bootstrap_from_the_brokers_kafka_listeners(tmp_path: Path) -> None:
    """Every broker of the demo's cluster has a Kafka listener at base port + 200 + i - 1, and
    that is what its clients and Spark are given (not the internal listeners on the base
    port)."""
    from replog.cli.demo_cluster import DemoCluster
    from replog.cli.local_cluster import KAFKA_LISTENER
    from tests.local_ports import free_base_port

    base = free_base_port(3)
    cluster = DemoCluster(str(tmp_path / "demo"), base)
    cluster.prepare()  # plans and writes the nodes' files; starts nothing
    assert cluster.layout is not None
    kafka = [f"127.0.0.1:{base + 200 + i}" for i in range(3)]
    assert [node.listeners[KAFKA_LISTENER] for node in cluster.layout.nodes] == kafka
    assert cluster.bootstrap == ",".join(kafka)
