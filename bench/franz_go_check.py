"""franz-go's integration tests (`pkg/kgo`) against a running cluster: fetch, build, run, judge.

franz-go's module zip (from the Go module proxy) carries its tests; `go test -c` builds them
once into a binary kept in the cache. Its integration tests are the ones that reach a broker
(they use the package's test client, topic or group helpers); they run with `KGO_SEEDS` at the
cluster's Kafka listeners, `KGO_TEST_RF=3` and few records (the default of 500,000 is too many
for two cores). A test that needs a feature replog does not build (docs/not-built.md) is named
in NEEDS: its failure or skip is expected and reported as such. The SCRAM tests skip here (no
SASL listener named); `bench/franz_go_sasl.py` runs them on one. Used by
`bench/kafka_ecosystem.py`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MODULE = "github.com/twmb/franz-go"
VERSION = "v1.22.3"
RUN_TIMEOUT = "30m"

# What a test's body calls when it reaches a broker (franz-go's helpers_test.go).
BROKER_HELPERS = (
    "newTestClient",
    "testClientOpts",
    "getSeedBrokers",
    "adm()",
    "tmpTopic",
    "tmpNamedTopic",
    "tmpGroup",
    "tmpShareGroup",
    "newTestConsumer",
    "testChainETL",
    "internalTopic",
    "scramSeeds",
    "oauthSeeds",
)

# Tests that need a feature of the "not built" list, and which.
NEEDS = {
    "TestShareGroup": "share groups",
    "TestShareGroupETL": "share groups",
    "TestShareGroupAckOnClose": "share groups",
    "TestShareGroupOffsetsAdmin": "share groups",
    "TestConsumeRegexShareSkipsInternal": "share groups",
    "TestOAuthAuth": "SASL/OAUTHBEARER",
}

# Tests not run at all (name -> why): for a test that would hang the whole binary until its
# time-out (empty: every integration test runs).
NOT_RUN: dict[str, str] = {}


@dataclass
class TestResult:
    name: str
    outcome: str  # PASS, FAIL, SKIP, or NOT RUN (the binary ended before it)
    said: str  # a skip's reason or a failure's first lines
    needs: str | None


def cache_dir() -> Path:
    root = os.environ.get("REPLOG_BENCH_CACHE", str(Path.home() / ".cache/replog-bench"))
    return Path(root) / f"franz-go-{VERSION}"


def fetch_and_build() -> tuple[Path, Path]:
    """franz-go's source (a writable copy of the module) and its kgo test binary, built once."""
    cache = cache_dir()
    source, binary = cache / "src", cache / "kgo.test"
    if binary.exists() and source.exists():
        return source, binary
    if shutil.which("go") is None:
        raise RuntimeError("go not found on PATH: franz-go's tests are built with Go")
    scratch = cache / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-modcacherw"}
    if not (scratch / "go.mod").exists():
        go(["mod", "init", "franz-go-fetch"], scratch, env)
    said = go(["mod", "download", "-json", f"{MODULE}@{VERSION}"], scratch, env)
    module_dir = Path(json.loads(said)["Dir"])
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(module_dir, source)
    for path in [source, *source.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    go(["test", "-c", "-o", str(binary), "./pkg/kgo"], source, env)
    return source, binary


def go(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["go", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"go {' '.join(args)} failed: {done.stderr.strip()[-1500:]}")
    return done.stdout


def integration_tests(source: Path) -> list[str]:
    """The tests of pkg/kgo whose bodies reach a broker, in file order."""
    names = []
    for test_file in sorted((source / "pkg" / "kgo").glob("*_test.go")):
        for body in re.split(r"\nfunc ", "\n" + test_file.read_text()):
            found = re.match(r"(Test\w+)\(t \*testing\.T\)", body)
            if found and any(helper in body for helper in BROKER_HELPERS):
                names.append(found.group(1))
    return names


def run(binary: Path, source: Path, seeds: str, log: Path) -> list[TestResult]:
    """Every integration test against `seeds`; the test events (`go tool test2json`, which
    tells each parallel test's output apart) go to `log`."""
    names = integration_tests(source)
    env = {
        **os.environ,
        "KGO_SEEDS": seeds,
        "KGO_TEST_RF": "3",
        "KGO_TEST_RECORDS": "5000",
    }
    with log.open("w") as out:
        subprocess.run(
            [
                "go",
                "tool",
                "test2json",
                "-p",
                "kgo",
                str(binary),
                "-test.v=test2json",
                "-test.timeout",
                RUN_TIMEOUT,
                "-test.run",
                "^(" + "|".join(names) + ")$",
                *(["-test.skip", "^(" + "|".join(NOT_RUN) + ")$"] if NOT_RUN else []),
            ],
            cwd=source / "pkg" / "kgo",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return judge(names, log.read_text(errors="replace"))


def judge(names: list[str], events: str) -> list[TestResult]:
    """Each test's outcome and what it logged, from test2json's events (one JSON per line)."""
    outcomes: dict[str, str] = {}
    logged: dict[str, list[str]] = {}
    for line in events.splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        test = event.get("Test")
        if test is None or "/" in test:
            continue
        if event["Action"] in ("pass", "fail", "skip"):
            outcomes[test] = event["Action"].upper()
        elif event["Action"] == "output":
            text = event["Output"].strip()
            if text and not text.startswith(("=== ", "--- ", "[", "{")):
                logged.setdefault(test, []).append(text)
    results = []
    for name in names:
        outcome = outcomes.get(name, "NOT RUN")
        said = "" if outcome == "PASS" else " / ".join(logged.get(name, [])[:3])[:300]
        if outcome == "NOT RUN" and name in NOT_RUN:
            said = f"skipped by this harness: {NOT_RUN[name]}"
        results.append(TestResult(name, outcome, said, NEEDS.get(name)))
    return results
