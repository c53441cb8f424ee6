"""The architecture rules of docs/design/architecture.md, held mechanically.

1. Pure cores import no I/O, clock, randomness or concurrency modules.
2. Inside the engine, only `replog/storage/fs.py` touches files and only `replog/clock.py`
   reads the clock.
3. Generated protobuf code is current (`proto/generate.py --check`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PURE_PACKAGES = [
    "timeline",
    "checkpoints",
    "replog/record",
    "quorum",
    "replog/replication",
    "replog/coordinator",
]
FORBIDDEN_IN_PURE = {
    "asyncio",
    "grpc",
    "socket",
    "threading",
    "time",
    "random",
    "os",
    "shutil",
    "subprocess",
    "selectors",
    "multiprocessing",
    "io",
    "pathlib",
    "tempfile",
}
ENGINE_PACKAGES = [
    "replog/storage",
    "replog/record",
    "checkpoints",
    "timeline",
    "quorum",
    "replog/replication",
    "replog/coordinator",
    "replog/server",
]
FILE_CALLS = {
    "open",
    "os.open",
    "os.remove",
    "os.unlink",
    "os.replace",
    "os.rename",
    "os.fsync",
    "os.fdatasync",
    "os.truncate",
    "os.ftruncate",
    "os.pwrite",
    "os.write",
    "os.makedirs",
    "os.mkdir",
    "os.rmdir",
    "os.listdir",
    "os.scandir",
    "shutil.rmtree",
    "shutil.copyfile",
}
CLOCK_CALLS = {
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.perf_counter",
    "datetime.now",
    "datetime.datetime.now",
}


def python_files(package: str) -> list[Path]:
    base = ROOT / package
    if not base.exists():
        return []
    return [p for p in base.rglob("*.py") if "pb" not in p.relative_to(ROOT).parts]


def imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def dotted_calls(tree: ast.AST) -> set[str]:
    calls: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts: list[str] = []
        target = node.func
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        if isinstance(target, ast.Name):
            parts.append(target.id)
            calls.add(".".join(reversed(parts)))
    return calls


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_pure_cores_import_no_io(package: str) -> None:
    offenders = []
    for path in python_files(package):
        bad = imported_modules(ast.parse(path.read_text())) & FORBIDDEN_IN_PURE
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "pure cores must not do I/O:\n" + "\n".join(offenders)


def test_only_the_fs_seam_touches_files_and_only_the_clock_module_reads_time() -> None:
    offenders = []
    for package in ENGINE_PACKAGES:
        for path in python_files(package):
            rel = path.relative_to(ROOT).as_posix()
            calls = dotted_calls(ast.parse(path.read_text()))
            if rel != "replog/storage/fs.py" and calls & FILE_CALLS:
                offenders.append(f"{rel} touches files: {sorted(calls & FILE_CALLS)}")
            if calls & CLOCK_CALLS:
                offenders.append(f"{rel} reads the clock: {sorted(calls & CLOCK_CALLS)}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_checker_can_fail() -> None:
    tree = ast.parse("import os\nimport time\nos.fsync(3)\ntime.monotonic()\n")
    assert {"os", "time"} <= imported_modules(tree)
    assert {"os.fsync", "time.monotonic"} <= dotted_calls(tree)


def test_generated_protobuf_code_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_client_library_loads_neither_the_controller_nor_the_storage_engine() -> None:
    """A client process (a script, a Spark executor) imports the client, not the server: the
    controller and storage packages cost start-up time and tie the client to server code."""
    probe = (
        "import sys, replog.client.sync_producer, replog.client.sync_consumer, "
        "replog.client.sync_admin, replog.aio\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('quorum', 'timeline')"
        " or m.startswith(('replog.storage', 'replog.server.replica_manager'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]", f"the client library imports server modules: {loaded}"
