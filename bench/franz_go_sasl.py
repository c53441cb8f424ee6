"""franz-go's SASL integration tests against replog: `TestSCRAMAuth` (a client signs in with
SCRAM, pings, asks Metadata) and `TestSCRAMAuthBadCredentials` (an unknown user is refused), with
SCRAM-SHA-256 and SCRAM-SHA-512.

franz-go selects them by environment (its helpers_test.go): `KGO_TEST_SCRAM_SEEDS` names a SASL
listener and `KGO_TEST_SCRAM=user:password[:256|512]` the credentials; without them both skip.
Its SCRAM tests dial without TLS (they build their client with `SeedBrokers` and `SASL` only),
so the listener is SASL_PLAINTEXT: a one-node cluster (`replog cluster start --nodes 1`) whose
node serves a PLAINTEXT listener for the tests' other helpers and the user's creation, and a
SASL_PLAINTEXT one beside it, with SCRAM-SHA-256 and SCRAM-SHA-512 enabled. The user is made
with `replog configs alter --entity-type users`, once per mechanism.

    .venv/bin/python bench/franz_go_sasl.py [--base-port 24500]

Bench only (needs Go; the test binary is `franz_go_check`'s, built once). Exit status 1 when a
test does not pass. `bench/kafka_ecosystem.py` runs them too, one row per test in its franz-go
table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import franz_go_check
from replog_cli import replog_cli

TESTS = ("TestSCRAMAuth", "TestSCRAMAuthBadCredentials")
USER, PASSWORD = "kgo", "kgo-scram-secret"
MECHANISMS = {"256": "SCRAM-SHA-256", "512": "SCRAM-SHA-512"}


def start(data_dir: Path, base_port: int) -> tuple[str, str]:
    """The one-node cluster (module docstring); its PLAINTEXT and SASL_PLAINTEXT addresses."""
    kafka, sasl, controller = base_port + 200, base_port + 201, base_port + 300
    listeners = (
        f"CONTROLLER://127.0.0.1:{base_port},PLAINTEXT://127.0.0.1:{kafka},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl},CONTROLLER_KAFKA://127.0.0.1:{controller}"
    )
    protocols = (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "CONTROLLER_KAFKA:PLAINTEXT"
    )
    replog_cli(
        "cluster", "start", "--data-dir", str(data_dir), "--nodes", "1", "--base-port",
        str(base_port), "--kafka-base-port", str(kafka),
        "--override", f"listeners={listeners}",
        "--override", f"advertised.listeners={listeners}",
        "--override", f"listener.security.protocol.map={protocols}",
        "--override", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
    )  # fmt: skip
    return f"127.0.0.1:{kafka}", f"127.0.0.1:{sasl}"


def make_user(plaintext: str) -> None:
    for mechanism in MECHANISMS.values():
        replog_cli(
            "configs", "alter", "--bootstrap-server", plaintext, "--entity-type", "users",
            "--entity-name", USER, "--add-config",
            f"{mechanism}=[iterations=8192,password={PASSWORD}]",
        )  # fmt: skip


def run_tests(
    binary: Path, source: Path, plaintext: str, sasl: str, bits: str, log: Path
) -> list[franz_go_check.TestResult]:
    env = {
        **os.environ,
        "KGO_SEEDS": plaintext,
        "KGO_TEST_SCRAM_SEEDS": sasl,
        "KGO_TEST_SCRAM": f"{USER}:{PASSWORD}:{bits}",
    }
    with log.open("w") as out:
        subprocess.run(
            [
                "go", "tool", "test2json", "-p", "kgo", str(binary), "-test.v=test2json",
                "-test.timeout", "5m", "-test.run", "^(" + "|".join(TESTS) + ")$",
            ],
            cwd=source / "pkg" / "kgo", env=env, stdout=out, stderr=subprocess.STDOUT,
            check=False,
        )  # fmt: skip
    return franz_go_check.judge(list(TESTS), log.read_text(errors="replace"))


def run(
    binary: Path, source: Path, base_port: int, work: Path
) -> list[tuple[str, franz_go_check.TestResult]]:
    """`TESTS` with each mechanism, on a cluster of their own in `work` (module docstring):
    (mechanism, result) pairs."""
    results: list[tuple[str, franz_go_check.TestResult]] = []
    data_dir = work / "cluster"
    try:
        plaintext, sasl = start(data_dir, base_port)
        make_user(plaintext)
        for bits, mechanism in MECHANISMS.items():
            log = work / f"scram-{bits}.jsonl"
            for result in run_tests(binary, source, plaintext, sasl, bits, log):
                results.append((mechanism, result))
    finally:
        if (data_dir / "cluster.json").exists():
            replog_cli("cluster", "stop", "--data-dir", str(data_dir))
    return results


def per_test(
    results: list[tuple[str, franz_go_check.TestResult]],
) -> list[franz_go_check.TestResult]:
    """One result per test over every mechanism: passed when it passed with each; otherwise
    what it did with the mechanisms it did not pass with."""
    combined = []
    for name in dict.fromkeys(result.name for _, result in results):
        missed = [(m, r) for m, r in results if r.name == name and r.outcome != "PASS"]
        if not missed:
            combined.append(franz_go_check.TestResult(name, "PASS", "", None))
            continue
        outcome = "FAIL" if any(r.outcome == "FAIL" for _, r in missed) else missed[0][1].outcome
        said = "; ".join(
            f"with {m}: {r.outcome.lower()}" + (f" ({r.said})" if r.said else "") for m, r in missed
        )
        combined.append(franz_go_check.TestResult(name, outcome, said, None))
    return combined


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-port", type=int, default=24500)
    args = parser.parse_args(argv)
    source, binary = franz_go_check.fetch_and_build()
    with tempfile.TemporaryDirectory(prefix="replog-franz-go-sasl-") as work:
        results = run(binary, source, args.base_port, Path(work))
    for mechanism, result in results:
        said = f"  ({result.said})" if result.said else ""
        print(f"{result.outcome:<7} {result.name} with {mechanism}{said}")
    return 0 if all(result.outcome == "PASS" for _, result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
