"""A bench's figures against a commit's code in the same run (`--base COMMIT` of the in-process
CPU benches: bench/metadata_apply_cpu.py, bench/replica_creation_cpu.py,
bench/controller_replay.py).

Rules: the base's packages come from `git archive` of the commit into a temporary directory,
its compiled modules built there by its setup.py (`build_extensions`);
every run is a fresh process per side (the bench's own script with `--runs 1 --emit-json` and
its arguments, the working directory and `PYTHONPATH` at that side's root), the sides taking
turns, which goes first swapping every run, so both see the same machine load. A child prints
its figures as its last line, JSON `{case: [ms, ...]}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence

PACKAGES = ("replog", "quorum", "timeline", "checkpoints")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the working tree

Figures = dict[str, list[float]]


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--base COMMIT`, and the hidden `--emit-json` a child runs with."""
    parser.add_argument("--base", metavar="COMMIT", help="also time this commit's code")
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)


def build_extensions(commit: str, root: str) -> None:
    """The commit's compiled modules (its setup.py's, e.g. the Spark source's record decoder),
    built in place in `root`, as the working tree has them built: else the base would time its
    pure-Python fallbacks."""
    have = subprocess.run(["git", "cat-file", "-e", f"{commit}:setup.py"], cwd=HERE)
    if have.returncode != 0:
        return
    archive = subprocess.run(
        ["git", "archive", commit, "setup.py", "pyproject.toml"],
        cwd=HERE,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace", "-q"],
        cwd=root,
        check=True,
        capture_output=True,
    )


def one_run_in(code_root: str, script: str, child_args: Sequence[str]) -> Figures:
    """One run of `script` in a fresh process whose packages come from `code_root`."""
    command = [sys.executable, os.path.abspath(script), "--runs", "1", "--emit-json", *child_args]
    env = dict(os.environ, PYTHONPATH=code_root)
    done = subprocess.run(command, cwd=code_root, env=env, check=True, capture_output=True)
    figures: Figures = json.loads(done.stdout.decode().splitlines()[-1])
    return figures


def runs_against(
    script: str,
    child_args: Sequence[str],
    runs: int,
    base: str | None,
    extra_paths: Sequence[str] = (),
) -> tuple[Figures, Figures | None]:
    """The working tree's figures and, with `base`, that commit's (its `PACKAGES` and
    `extra_paths`), `runs` fresh processes a side (module Rules)."""
    sides: list[tuple[str, Figures]] = [(HERE, {})]
    with tempfile.TemporaryDirectory(prefix="bench-base-") as base_root:
        if base:
            paths = [*PACKAGES, *extra_paths]
            archive = subprocess.run(
                ["git", "archive", base, *paths], cwd=HERE, check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", base_root], input=archive, check=True)
            build_extensions(base, base_root)
            sides.append((base_root, {}))
        for run in range(runs):
            for root, into in sides if run % 2 == 0 else list(reversed(sides)):
                for case, times in one_run_in(root, script, child_args).items():
                    into.setdefault(case, []).extend(times)
    return sides[0][1], sides[1][1] if base else None


def against_lines(work: Figures, base: Figures | None, commit: str | None) -> list[str]:
    """Per case: the working tree's min / median / max and, with a base, the base's and the
    working tree / base ratio per run pair."""
    lines = []
    for case, times in work.items():
        line = f"{case}: working tree {spread(times)}"
        if base is not None:
            line += f"; base {commit} {spread(base[case])}"
            if all(base[case]):  # a figure that can be 0 (a count) has no ratio
                ratios = [w / b for w, b in zip(times, base[case], strict=True)]
                line += f"; working tree / base per run {spread(ratios)}"
        lines.append(line)
    return lines
