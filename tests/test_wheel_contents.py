"""A built wheel installs replog's packages under `replog` only: no top-level `quorum`,
`timeline` or `checkpoints`, names other PyPI packages own, and the three are all there as
`replog.quorum`, `replog.timeline` and `replog.checkpoints`.

The wheel is built by pip from a copy of the checkout (pip builds in the source tree, and the
checkout keeps no `build/`), with this venv's setuptools (no build isolation: no download), in
about 4 s here. The folders' symlinks under `replog/` are copied as symlinks, as git checks them
out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.spark.test_source_install import ROOT, not_source

CORES = ("quorum", "timeline", "checkpoints")
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]


def wheel_names(tmp_path: Path) -> list[str]:
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=not_source, symlinks=True)
    subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path / "out"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "out").glob("replog-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def top_level_names(names: list[str]) -> set[str]:
    return {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}


@pytest.mark.slow
def test_the_wheel_holds_the_cores_under_replog_only(tmp_path: Path) -> None:
    names = wheel_names(tmp_path)
    assert top_level_names(names) == {"replog", "pyspark_replog.py"}, sorted(top_level_names(names))
    for core in CORES:
        files = {n for n in names if n.startswith(f"replog/{core}/") and n.endswith(".py")}
        on_disk = {
            f"replog/{core}/{p.relative_to(ROOT / core).as_posix()}"
            for p in (ROOT / core).rglob("*.py")
        }
        assert files == on_disk, f"replog.{core} in the wheel differs: {sorted(files ^ on_disk)}"


def test_the_top_level_check_can_fail() -> None:
    assert top_level_names(["quorum/raft/node.py", "replog/x.py", "replog-0.1.0.dist-info/R"]) == {
        "quorum",
        "replog",
    }
