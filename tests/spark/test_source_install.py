"""Spark finds `format("replog")` in a fresh venv, after an editable and after a normal install.

Spark's lookup (`pyspark.sql.worker.lookup_data_sources`) imports every module `pkgutil.
iter_modules()` lists under a `pyspark_` name. setuptools' default editable install of a flat
layout maps packages with an import hook that iter_modules cannot see, so the README's
`pip install -e '.[spark]'` left `format("replog")` unknown (DATA_SOURCE_NOT_FOUND);
pyproject.toml's `package-dir` makes it a plain path entry. Each venv here is new and empty; its
dependencies come from this venv's site-packages (a path line in a .pth, so this venv's own
install of replog stays out of it), and replog itself is installed from the checkout by pip, as
the README does. The lookup is pyspark's own function, run in the fresh venv; the editable venv
also starts a real local[1] SparkSession. Nothing here skips: a missing tool fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a copy of the checkout to install from leaves out (.gitignore's entries): environments,
# caches, build output, local clusters' and benchmarks' data.
NOT_SOURCE_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache", ".hypothesis")
NOT_SOURCE_AT_TOP = {".venv", ".git", "build", "dist", "data", ".replog"}


def not_source(directory: str, names: list[str]) -> set[str]:
    ignored = set(NOT_SOURCE_ANYWHERE(directory, names))
    if Path(directory) == ROOT:
        ignored |= NOT_SOURCE_AT_TOP & set(names)
    if Path(directory) == ROOT / "bench":
        ignored |= {"out"} & set(names)
    return ignored


# Runs pyspark's lookup as a Spark worker would (its `_main`), then prints what it registered
# and where the modules came from.
LOOKUP = textwrap.dedent(
    """
    import io, json, pickle, sys
    from pyspark.serializers import read_int
    from pyspark.sql.worker import lookup_data_sources

    out = io.BytesIO()
    lookup_data_sources._main(io.BytesIO(), out)
    out.seek(0)
    found = {}
    for _ in range(read_int(out)):
        name = out.read(read_int(out)).decode()
        found[name] = pickle.loads(out.read(read_int(out))).__module__
    import pyspark_replog, replog
    print(json.dumps({"found": found, "module": pyspark_replog.__file__,
                      "replog": replog.__file__}))
    """
)

# The README's read, on a real local[1] session, without replog.spark.register().
SESSION = textwrap.dedent(
    """
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false") \\
        .getOrCreate()
    try:
        df = spark.read.format("replog").option("bootstrap.servers", "127.0.0.1:1") \\
            .option("subscribe", "orders").load()
        print(df.schema.simpleString())
    finally:
        spark.stop()
    """
)


def fresh_venv(path: Path, *, editable: bool) -> Path:
    """A venv at `path` with replog installed from the checkout (a normal install from a copy
    of it: pip builds in the source tree, and the checkout keeps no `build/`); returns its
    python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    if editable:
        target = ["-e", str(ROOT)]
    else:
        source = path.parent / "source"
        shutil.copytree(ROOT, source, ignore=not_source)
        target = [str(source)]
    result = subprocess.run(
        [*install, "--no-deps", *target], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return python


def run_in(python: Path, code: str, cwd: Path) -> str:
    # Spark's workers run PYSPARK_PYTHON (else python3 on PATH): the venv's, as when activated.
    env = {
        **os.environ,
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    env.pop("PYTHONPATH", None)  # what a user's shell has: nothing pointing at the checkout
    result = subprocess.run(
        [python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("editable", [True, False], ids=["editable", "normal"])
def test_spark_finds_the_source_in_a_fresh_install(tmp_path: Path, editable: bool) -> None:
    python = fresh_venv(tmp_path / "venv", editable=editable)
    # run from elsewhere: the current directory must not put the checkout on the path
    answer = json.loads(run_in(python, LOOKUP, cwd=tmp_path))
    assert answer["found"] == {"replog": "replog.spark.source"}
    home = ROOT if editable else tmp_path / "venv"
    assert Path(answer["module"]).is_relative_to(home), answer
    assert Path(answer["replog"]).is_relative_to(home), answer
    if editable:  # the README's install: a real session resolves format("replog") too
        schema = run_in(python, SESSION, cwd=tmp_path)
        assert schema.startswith("struct<key:binary,value:binary,topic:string,partition:int")
