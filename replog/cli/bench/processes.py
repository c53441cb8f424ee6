"""The benchmark's driver processes, seen from the harness: each producer and each consumer of
a run is a process of its own, started here and steered over its stdin and stdout.

The protocol (every driver program speaks it: `python -m replog.cli.bench.worker` for the
Python clients, bench/jetstream/main.go's `jsbench` for NATS JetStream):

1. the harness writes the task, one JSON line, to the process's stdin;
2. the process builds its client and prints "ready";
3. the harness writes "go START_NS": start now, and count send times from START_NS (ns since
   the epoch: the run's start, the same for all; a producer paces itself from it, so the
   harness gives producers the time it sends "go");
4. a consumer prints "n COUNT" (records received so far) a few times a second, and stops at
   "stop"; a producer stops by itself;
5. the process writes its samples to the task's `samples_path` (`stats.write_samples`), prints
   "result {JSON}" (records, errors, first_error, cpu_s: its CPU seconds since "go", requests,
   last_receive_ns; a transactional producer's "commits", its commit samples written beside
   the others, `stats.COMMITS_SUFFIX`) and exits 0.

Rules: a process that exits before its result, or does not answer in time, is a
`BenchSystemError` naming the process and the end of its stderr (kept in a file beside the
samples); every process started is killed by `kill` whatever happens. With `cpus`, a process
runs under `taskset -c CPUS` (its threads inherit the set).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from replog.cli.bench.stats import COMMITS_SUFFIX, Samples, read_samples
from replog.errors import BenchSystemError

READY_TIMEOUT_S = 60.0
STDERR_TAIL = 2000
PYTHON_WORKER = (sys.executable, "-m", "replog.cli.bench.worker")


@dataclass(slots=True)
class DriverResult:
    """What one driver process handed back."""

    name: str
    samples: Samples
    cpu_s: float
    requests: int
    last_receive_ns: int
    wall_s: float  # from "go" to its result
    commits: Samples = field(default_factory=Samples)  # a transactional producer's commits

    @property
    def cores(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


class DriverProcess:
    """One driver process (the module docstring's protocol)."""

    def __init__(
        self,
        name: str,
        program: Sequence[str],
        task: dict[str, Any],
        scratch_dir: str,
        cpus: str | None = None,
    ) -> None:
        self.name = name
        self.samples_path = os.path.join(scratch_dir, f"{name}.samples")
        self.stderr_path = os.path.join(scratch_dir, f"{name}.stderr")
        argv = [*(["taskset", "-c", cpus] if cpus else []), *program]
        self._ready = threading.Event()
        self._finished = threading.Event()
        self._received = 0
        self._result: dict[str, Any] | None = None
        self._go_mono = 0.0
        self._result_mono = 0.0
        with open(self.stderr_path, "wb") as stderr:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                bufsize=1,
            )
        self._send(json.dumps({**task, "samples_path": self.samples_path}))
        self._reader = threading.Thread(target=self._read, name=f"bench-{name}-stdout", daemon=True)
        self._reader.start()

    def _send(self, line: str) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # it exited: `_failed` says why

    def _read(self) -> None:
        stdout: IO[str] | None = self._process.stdout
        assert stdout is not None
        for line in stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "ready":
                self._ready.set()
            elif word == "n":
                with contextlib.suppress(ValueError):
                    self._received = int(rest)
            elif word == "result":
                self._result_mono = time.monotonic()
                self._result = json.loads(rest)
        self._finished.set()

    @property
    def received(self) -> int:
        """Records a consumer received by its latest report."""
        return self._received

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def _failed(self, what: str) -> BenchSystemError:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-STDERR_TAIL:].strip()
        except OSError:
            tail = ""
        code = self._process.poll()
        exited = f"exit {code}" if code is not None else "still running"
        return BenchSystemError(
            f"bench driver process {self.name} {what} ({exited}); its stderr: {tail or '(empty)'}"
        )

    def wait_ready(self, deadline: float) -> None:
        while not self._ready.wait(0.1):
            if self._finished.is_set() or time.monotonic() > deadline:
                raise self._failed("did not get ready")

    def go(self, start_ns: int) -> None:
        self._go_mono = time.monotonic()
        self._send(f"go {start_ns}")

    def stop(self) -> None:
        self._send("stop")

    def result(self, timeout_s: float) -> DriverResult:
        """Wait for the process's result (and its exit); its samples."""
        if not self._finished.wait(timeout_s) or self._result is None:
            raise self._failed(f"gave no result within {timeout_s:g} s")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(10)
        doc = self._result
        samples = read_samples(
            self.samples_path, errors=int(doc["errors"]), first_error=str(doc["first_error"])
        )
        with contextlib.suppress(OSError):
            os.remove(self.samples_path)
        commits = Samples()
        if "commits" in doc:
            commits = read_samples(self.samples_path + COMMITS_SUFFIX)
            with contextlib.suppress(OSError):
                os.remove(self.samples_path + COMMITS_SUFFIX)
        return DriverResult(
            name=self.name,
            samples=samples,
            cpu_s=float(doc["cpu_s"]),
            requests=int(doc.get("requests", 0)),
            last_receive_ns=int(doc.get("last_receive_ns", 0)),
            wall_s=max(self._result_mono - self._go_mono, 0.0),
            commits=commits,
        )

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(10)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


def run_role(
    program: Sequence[str], task: dict[str, Any], scratch_dir: str, timeout_s: float
) -> dict[str, Any]:
    """Run a driver program for a one-shot role (no "go": it does its work and prints its
    result), e.g. creating JetStream streams; its result's JSON."""
    name = f"{task['role']}-{time.monotonic_ns()}"
    stderr_path = os.path.join(scratch_dir, f"{name}.stderr")
    with open(stderr_path, "wb") as stderr:
        try:
            done = subprocess.run(
                list(program),
                input=json.dumps(task) + "\n",
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BenchSystemError(
                f"bench driver {program[0]} {task['role']}: no answer within {timeout_s:g} s"
            ) from None
    with open(stderr_path, encoding="utf-8", errors="replace") as f:
        tail = f.read()[-STDERR_TAIL:].strip()
    os.remove(stderr_path)
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "result" and done.returncode == 0:
            parsed: dict[str, Any] = json.loads(rest)
            return parsed
    raise BenchSystemError(
        f"bench driver {program[0]} {task['role']} failed (exit {done.returncode}): {tail}"
    )
