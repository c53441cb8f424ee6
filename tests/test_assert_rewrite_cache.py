"""tests/assert_rewrite_cache.py: the modules pytest has not cached rewritten, in shares of about
equal size; a process that may not write bytecode has them cached by its collecting parts, and
a second run finds nothing left to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.assert_rewrite_cache import REWRITTEN_SUFFIX, shares, uncached_test_modules

ROOT = Path(__file__).resolve().parent.parent


def _tree(root: Path, sizes: dict[str, int]) -> dict[str, Path]:
    made = {}
    for name, size in sizes.items():
        path = root / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def test_it():\n    assert 1 + 1 == 2\n" + "#" * size + "\n")
        made[name] = path
    return made


def test_shares_split_the_modules_by_source_size(tmp_path: Path) -> None:
    made = _tree(tmp_path, {"a/test_a.py": 9000, "b/test_b.py": 5000, "test_c.py": 3000})
    # test_a alone; test_b, then test_c beside it (the lighter share then).
    assert shares(list(made.values()), 2) == [
        [made["a/test_a.py"]],
        [made["b/test_b.py"], made["test_c.py"]],
    ]
    assert len(shares(list(made.values()), 9)) == 3  # no empty share


def test_the_uncached_modules_are_those_without_a_rewritten_module_newer_than_them(
    tmp_path: Path,
) -> None:
    made = _tree(tmp_path, {"a/test_a.py": 10, "a/test_b.py": 10, "test_c.py": 10})
    (tmp_path / "tests" / "a" / "helpers.py").write_text("X = 1\n")  # not a test module
    cache = tmp_path / "tests" / "a" / "__pycache__"
    cache.mkdir()
    (cache / ("test_a" + REWRITTEN_SUFFIX)).write_bytes(b"")
    stale = cache / ("test_b" + REWRITTEN_SUFFIX)
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))  # older than its module
    tests = tmp_path / "tests"
    assert uncached_test_modules([tests]) == [made["a/test_b.py"], made["test_c.py"]]
    assert uncached_test_modules([made["test_c.py"], tests / "missing.py"]) == [made["test_c.py"]]


REWRITE = """
import sys
from pathlib import Path
from tests.assert_rewrite_cache import rewrite_test_modules, uncached_test_modules
assert sys.dont_write_bytecode
tests = Path(sys.argv[1]) / "tests"
rewrite_test_modules(tests.parent, [tests])
print(len(uncached_test_modules([tests])))
"""


def test_a_process_that_may_not_write_bytecode_has_the_rewritten_modules_cached(
    tmp_path: Path,
) -> None:
    _tree(tmp_path, {"a/test_one.py": 10, "b/test_two.py": 10, "test_three.py": 10})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", REWRITE, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert run.stdout.strip() == "0", run.stdout + run.stderr
    cached = sorted(path.name.split(".")[0] for path in tmp_path.rglob("*" + REWRITTEN_SUFFIX))
    assert cached == ["test_one", "test_three", "test_two"]
