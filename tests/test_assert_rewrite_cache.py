"""tests/assert_rewrite_cache.py: the tree in shares of about equal size, and a process that may
not write bytecode has every test module's rewritten asserts cached by its collecting parts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.assert_rewrite_cache import shares

ROOT = Path(__file__).resolve().parent.parent


def _tree(root: Path, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        path = root / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def test_it():\n    assert 1 + 1 == 2\n" + "#" * size + "\n")


def test_shares_split_the_folders_and_top_modules_by_source_size(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "big/test_a.py": 9000,
            "mid/test_b.py": 5000,
            "mid/test_c.py": 1000,
            "small/test_d.py": 3000,
            "test_top.py": 1000,
        },
    )
    (tmp_path / "tests" / "helpers.py").write_text("X = 1\n")  # not a test module
    (tmp_path / "tests" / "empty").mkdir()
    tests = tmp_path / "tests"
    # big 9 kB, then mid 6 kB and small 3 kB beside it, then top 1 kB to the lighter.
    assert shares(tests, 2) == [
        [tests / "big", tests / "test_top.py"],
        [tests / "mid", tests / "small"],
    ]
    assert shares(tests, 9)[0] == [tests / "big"]
    assert len(shares(tests, 9)) == 4  # no empty share, no empty folder


REWRITE = """
import sys
from pathlib import Path
from tests.assert_rewrite_cache import rewrite_test_modules
assert sys.dont_write_bytecode
rewrite_test_modules(Path(sys.argv[1]))
"""


def test_a_process_that_may_not_write_bytecode_has_the_rewritten_modules_cached(
    tmp_path: Path,
) -> None:
    _tree(tmp_path, {"a/test_one.py": 10, "b/test_two.py": 10, "test_three.py": 10})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-c", REWRITE, str(tmp_path)],
        cwd=ROOT,
        env=env,
        timeout=120,
        check=True,
    )
    cached = sorted(path.name.split(".")[0] for path in tmp_path.rglob("*-pytest-*.pyc"))
    assert cached == ["test_one", "test_three", "test_two"]
