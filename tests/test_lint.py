"""Static checks run with the suite: ruff over the tree and strict mypy over the packages.

They are part of the test command so that CI fails on them like on any other broken rule.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TYPED_PACKAGES = ["replog"]  # replog.quorum, .timeline, .checkpoints included


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes_on_the_packages() -> None:
    packages = [p for p in TYPED_PACKAGES if (ROOT / p).exists()]
    result = run("mypy", *packages)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_test_skips_when_a_dependency_is_missing() -> None:
    """Every package a test imports is a dev dependency (pyproject.toml): a missing one must fail
    the run, not skip its tests silently, so `pytest.importorskip` has no place here."""
    marker = "importor" + "skip("
    users = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if marker in path.read_text(encoding="utf-8")
    )
    assert users == [], f"import the package instead (it fails when missing): {users}"
