"""Rewrite the test modules' asserts once per run, not once per worker.

pytest rewrites every test module's asserts as it imports it (about 0.1 s apiece, some 50 CPU-s
for the whole tree) and keeps the result in `__pycache__`, unless PYTHONDONTWRITEBYTECODE is set
(this CI machine sets it): then every xdist worker rewrites every module again, each time the
suite runs. What pytest has cached it reads whatever that variable says, so before the workers
start, `rewrite_test_modules` has up to `PARTS` processes collect a share each of the test
modules the session runs that pytest has not cached yet, without the variable: the workers then
load the rewritten modules (a whole collection of about 16 CPU-s instead of 64). What runs is
the same: pytest uses a cached module only while it matches its source. A part that fails costs
nothing but the time: the workers rewrite what is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PARTS = 2
TIMEOUT_S = 300
TEST_MODULE = "test_*.py"  # pytest's `python_files`
# The name pytest gives a rewritten module in `__pycache__` (its `PYC_TAIL`). Should pytest ever
# name them otherwise, every module looks uncached and is rewritten here each run: slower, the
# same tests.
REWRITTEN_SUFFIX = f".{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"


def uncached_test_modules(paths: list[Path]) -> list[Path]:
    """The test modules under `paths` (folders, or modules) whose rewritten module pytest has
    not cached, or cached before the module last changed."""
    modules = set()
    for path in paths:
        if path.is_dir():
            modules.update(path.rglob(TEST_MODULE))
        elif path.match(TEST_MODULE) and path.exists():
            modules.add(path)

    def cached(module: Path) -> bool:
        rewritten = module.parent / "__pycache__" / (module.stem + REWRITTEN_SUFFIX)
        try:
            return rewritten.stat().st_mtime >= module.stat().st_mtime
        except FileNotFoundError:
            return False

    return sorted(module for module in modules if not cached(module))


def shares(modules: list[Path], parts: int) -> list[list[Path]]:
    """`modules` in at most `parts` shares of about equal source size (largest first, each to
    the lightest share), none empty."""
    sizes = [0] * parts
    split: list[list[Path]] = [[] for _ in range(parts)]
    for size, module in sorted(
        ((module.stat().st_size, module) for module in modules), reverse=True
    ):
        lightest = sizes.index(min(sizes))
        sizes[lightest] += size
        split[lightest].append(module)
    return [sorted(share) for share in split if share]


def rewrite_test_modules(root: Path, paths: list[Path]) -> None:
    """Collect the test modules under `paths` that pytest has not cached rewritten, in up to
    `PARTS` processes started in `root` that cache them (module docstring); nothing when this
    process may write them itself."""
    if not sys.dont_write_bytecode:
        return
    modules = uncached_test_modules(paths)
    if not modules:
        return
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    command += ["--noconftest", "-p", "no:cacheprovider"]
    parts = [
        subprocess.Popen(
            [*command, *(str(module) for module in share)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for share in shares(modules, PARTS)
    ]
    for part in parts:
        try:
            part.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            part.kill()
            part.wait()
