"""Rewrite the test modules' asserts once per run, not once per worker.

pytest rewrites every test module's asserts as it imports it (about 0.1 s apiece, some 50 CPU-s
for the whole tree) and keeps the result in `__pycache__`, unless PYTHONDONTWRITEBYTECODE is set
(this CI machine sets it): then every xdist worker rewrites every module again, each time the
suite runs. What pytest has cached it reads whatever that variable says, so before the workers
start, `rewrite_test_modules` has `PARTS` processes collect a share of the tree each, without
the variable: the workers then load the rewritten modules (a collection of about 16 CPU-s
instead of 64). What runs is the same: pytest uses a cached module only while it matches its
source. A part that fails costs nothing but the time: the workers rewrite what is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PARTS = 2
TIMEOUT_S = 300


def shares(tests: Path, parts: int) -> list[list[Path]]:
    """The test tree's folders and top-level modules in `parts` shares of about equal source
    size (largest first, each to the lightest share)."""
    entries = [
        entry
        for entry in tests.iterdir()
        if (entry.is_dir() and entry.name != "__pycache__")
        or (entry.name.startswith("test_") and entry.suffix == ".py")
    ]

    def size(entry: Path) -> int:
        files = entry.rglob("test_*.py") if entry.is_dir() else [entry]
        return sum(file.stat().st_size for file in files)

    weighed = sorted(((size(entry), entry) for entry in entries), key=lambda pair: -pair[0])
    loads = [[0, []] for _ in range(parts)]
    for weight, entry in weighed:
        if weight == 0:
            continue
        lightest = min(loads, key=lambda load: load[0])
        lightest[0] += weight
        lightest[1].append(entry)
    return [sorted(entries) for _, entries in loads if entries]


def rewrite_test_modules(root: Path) -> None:
    """Collect the tree under `root`/tests in `PARTS` processes that write pytest's rewritten
    modules (module docstring); nothing when this process may write them itself."""
    if not sys.dont_write_bytecode:
        return
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    command += ["--noconftest", "-p", "no:cacheprovider"]
    parts = [
        subprocess.Popen(
            [*command, *(str(entry.relative_to(root)) for entry in share)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for share in shares(root / "tests", PARTS)
    ]
    for part in parts:
        try:
            part.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            part.kill()
            part.wait()
