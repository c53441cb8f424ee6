"""The Kafka clients that are not Python packages, installed by the tests themselves into a cache
directory (`REPLOG_TEST_TOOLS`, default `~/.cache/replog-test-tools`), once per machine:

- kcat from Debian's packages: `apt-get download` of kcat and the libraries it needs that a
  machine may lack (librdkafka1 2.0.2, libyajl2), unpacked with `dpkg -x` (no root needed;
  as root, `apt-get update` first if the package lists lack them), run with `LD_LIBRARY_PATH`
  pointing into the unpacked tree;
- kafkajs from npm, at a pinned version, with `npm install --prefix`; `run_kafkajs` runs
  `kafkajs_client.js` (this directory) with it.

A client that cannot be installed fails the test that needs it (never a skip): the Kafka
clients' tests are required.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

KAFKAJS_VERSION = "2.2.4"
KAFKAJS_CLIENT = Path(__file__).with_name("kafkajs_client.js")
KCAT_PACKAGES = ("kcat", "librdkafka1", "libyajl2")
_TIMEOUT_S = 300


def tools_dir() -> Path:
    root = Path(os.environ.get("REPLOG_TEST_TOOLS", Path.home() / ".cache" / "replog-test-tools"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _locked(name: str) -> Iterator[Path]:
    """The tool's directory, held against other test processes installing it at once."""
    directory = tools_dir() / name
    directory.mkdir(exist_ok=True)
    with (tools_dir() / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield directory


def _run(what: str, command: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"cannot install {what}: {' '.join(command)}: {exc}")
    if done.returncode != 0:
        pytest.fail(
            f"cannot install {what}: {' '.join(command)} exited {done.returncode}: "
            f"{done.stderr.strip()[-2000:]}"
        )


def _succeeds(command: list[str], cwd: Path) -> bool:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class Kcat:
    binary: Path
    env: dict[str, str]

    def run(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        done = subprocess.run(
            [str(self.binary), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"kcat {' '.join(args)}: {done.stderr}"
        return done.stdout


def kcat() -> Kcat:
    """kcat 1.7.1 with Debian 12's librdkafka 2.0.2, unpacked from Debian's packages."""
    with _locked("kcat") as directory:
        root = directory / "root"
        binary = root / "usr" / "bin" / "kcat"
        if not binary.exists():
            if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
                pytest.fail("cannot install kcat: apt-get and dpkg (Debian) are needed")
            for deb in directory.glob("*.deb"):
                deb.unlink()
            download = ["apt-get", "download", *KCAT_PACKAGES]
            if not _succeeds(download, directory) and os.geteuid() == 0:
                # A fresh machine may have no package lists yet (root can fetch them).
                _run("kcat", ["apt-get", "update"], directory)
            if not list(directory.glob("*.deb")):
                _run("kcat", download, directory)
            for deb in sorted(directory.glob("*.deb")):
                _run("kcat", ["dpkg", "-x", str(deb), str(root)], directory)
        libraries = [str(p) for p in (root / "usr" / "lib").glob("*-linux-gnu")]
        env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(libraries)}
        check = subprocess.run(
            [str(binary), "-V"], capture_output=True, text=True, env=env, check=False
        )
        if check.returncode != 0:
            pytest.fail(f"kcat does not run: {check.stderr.strip()}")
        return Kcat(binary, env)


def kafkajs() -> Path:
    """The `node_modules` directory holding kafkajs at `KAFKAJS_VERSION`."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("cannot install kafkajs: node and npm are needed")
    with _locked("npm") as directory:
        installed = directory / "node_modules" / "kafkajs" / "package.json"
        if not installed.exists() or f'"version": "{KAFKAJS_VERSION}"' not in (
            installed.read_text()
        ):
            _run(
                "kafkajs",
                [
                    "npm",
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    str(directory),
                    f"kafkajs@{KAFKAJS_VERSION}",
                ],
                directory,
            )
        return directory / "node_modules"


def run_kafkajs(broker: str, *args: str, timeout: float = 120) -> Any:
    """`node kafkajs_client.js BROKER ARGS` (its comment lists the modes): the JSON of its last
    line of output."""
    modules = kafkajs()
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, str(KAFKAJS_CLIENT), broker, *args],
        capture_output=True,
        text=True,
        env={"NODE_PATH": str(modules), "PATH": str(Path(node).parent)},
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
