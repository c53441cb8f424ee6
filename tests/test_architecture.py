"""The architecture rules of docs/design/architecture.md, held mechanically.

1. The import contracts of pyproject.toml's `[tool.importlinter]` hold (`lint-imports`): the
   layers import downward only, pure cores import no I/O, clock, randomness or concurrency
   module, the client library imports no server code, no package's modules import each other
   in a cycle (but for the type-only imports the contract lists). Every import counts,
   deferred and type-only ones included. Every package sits in a layer.
2. Inside the engine, only `replog/storage/fs.py` touches files (and the file maker child,
   `replog/storage/file_maker_process.py`, used only over the plain `OsFileSystem`, and the
   cleaning process's pipes, and the internal links' PEM files, `replog/wire/link_security.py`)
   and only `replog/clock.py` reads the clock.
3. Generated protobuf code and Kafka codecs are current (`proto/generate.py --check`,
   `proto/generate_kafka.py --check`).
4. A client process loads no server module at run time (lazy exports included).
5. The shared value types of `replog/common` are defined there only.
6. Nothing imports `quorum`, `timeline` or `checkpoints` by a top-level name: they are
   installed as `replog.quorum`, `replog.timeline` and `replog.checkpoints` only (their folders
   stay at the top of the checkout, linked under `replog/`).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ENGINE_PACKAGES = [
    "replog/storage",
    "replog/record",
    "checkpoints",
    "timeline",
    "quorum",
    "replog/replication",
    "replog/coordinator",
    "replog/common",
    "replog/wire",
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


# Files touched outside the seam: the file maker child is a process of its own (standard
# library only: it cannot import fs.py), used only over the plain `OsFileSystem`
# (`LogManager.plain_file_system`), so a test that swaps the seam still sees every file call.
# The cleaning process writes only its pipes there (its child's files go through fs.py).
# The internal links' TLS material is PEM files read whole (gRPC takes the bytes), not the
# logs' data, as the Kafka listeners' is read by the `ssl` module.
FILE_SEAMS = {
    "replog/storage/fs.py",
    "replog/storage/file_maker_process.py",
    "replog/storage/cleaner/cleaning_process.py",
    "replog/wire/link_security.py",
}


def test_only_the_fs_seam_touches_files_and_only_the_clock_module_reads_time() -> None:
    offenders = []
    for package in ENGINE_PACKAGES:
        for path in python_files(package):
            rel = path.relative_to(ROOT).as_posix()
            calls = dotted_calls(ast.parse(path.read_text()))
            if rel not in FILE_SEAMS and calls & FILE_CALLS:
                offenders.append(f"{rel} touches files: {sorted(calls & FILE_CALLS)}")
            if calls & CLOCK_CALLS:
                offenders.append(f"{rel} reads the clock: {sorted(calls & CLOCK_CALLS)}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_checker_can_fail() -> None:
    tree = ast.parse("import os\nimport time\nos.fsync(3)\ntime.monotonic()\n")
    assert {"os.fsync", "time.monotonic"} <= dotted_calls(tree)


def lint_imports(config: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the checkout with the contracts of `config`; exit status 1 when a
    contract is broken."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--config", str(config), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_import_contracts_hold() -> None:
    result = lint_imports(ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout, result.stdout


def test_a_broken_import_contract_fails_the_check(tmp_path: Path) -> None:
    """The same check over a contract the tree breaks: the node imports storage, so storage
    placed above it is a broken layer, reported with the import."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        "[tool.importlinter]\n"
        'root_packages = ["replog"]\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "inverted"\n'
        'type = "layers"\n'
        'layers = ["replog.storage", "replog.server"]\n'
    )
    result = lint_imports(config)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    assert "replog.server" in result.stdout and "-> replog.storage" in result.stdout


def layered_modules() -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in contracts["contracts"] if c.get("id") == "layers"]
    return {
        name.strip() for layer in layers["layers"] for name in layer.replace(":", "|").split("|")
    }


def test_every_package_sits_in_a_layer() -> None:
    """A package or top-level module outside the layers contract could import anything."""
    found: set[str] = set()
    for child in (ROOT / "replog").iterdir():
        if child.name.startswith(("_", ".")):
            continue
        if child.suffix == ".py" or (child / "__init__.py").exists():
            found.add(f"replog.{child.stem}")
    assert found - layered_modules() == set(), "add these to [tool.importlinter]'s layers"


@pytest.mark.parametrize("generator", ["generate.py", "generate_kafka.py"])
def test_generated_code_is_current(generator: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / generator), "--check"],
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
        "print(sorted(m for m in sys.modules if m.startswith(('replog.quorum', "
        "'replog.timeline', 'replog.storage', 'replog.server.data_plane.replica_manager'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]", f"the client library imports server modules: {loaded}"


SHARED_VALUE_NAMES = {
    "TopicPartition",
    "TopicPartitionKey",
    "OffsetAndMetadata",
    "UUID_BYTES",
    "NO_OFFSET",
    "NO_LEADER_EPOCH",
}


def top_level_definitions(tree: ast.Module) -> set[str]:
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    return defined


def test_shared_value_types_are_defined_in_replog_common_only() -> None:
    offenders = []
    for package in ["replog", "quorum", "checkpoints", "timeline"]:
        for path in python_files(package):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("replog/common/"):
                continue
            again = top_level_definitions(ast.parse(path.read_text())) & SHARED_VALUE_NAMES
            if again:
                offenders.append(f"{rel} defines {sorted(again)}: import them from replog.common")
    assert not offenders, "\n".join(offenders)
    tree = ast.parse("TopicPartition = tuple[str, int]\nclass NO_OFFSET: ...\n")
    assert top_level_definitions(tree) == {"TopicPartition", "NO_OFFSET"}


TOP_LEVEL_CORES = ("quorum", "timeline", "checkpoints")
SOURCE_FOLDERS = ["replog", *TOP_LEVEL_CORES, "tests", "bench", "proto"]


def top_level_core_imports(tree: ast.AST) -> list[str]:
    """The imports in `tree` that name a core by its top-level name (`import quorum`,
    `from timeline import X`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in TOP_LEVEL_CORES]
    return found


def test_nothing_imports_the_cores_by_their_top_level_names() -> None:
    offenders = []
    paths = [ROOT / "pyspark_replog.py", *(p for f in SOURCE_FOLDERS for p in python_files(f))]
    for path in paths:
        text = path.read_text()
        if not any(core in text for core in TOP_LEVEL_CORES):
            continue  # parsed only where a core's name appears
        found = top_level_core_imports(ast.parse(text))
        if found:
            rel = path.relative_to(ROOT).as_posix()
            offenders.append(f"{rel} imports {found}: use replog.quorum, .timeline, .checkpoints")
    assert not offenders, "\n".join(offenders)
    # `quorum.x`: no real submodule, so the rewrite of module names leaves this sample alone
    tree = ast.parse("import quorum.x\nfrom timeline import X\nfrom replog.quorum import raft\n")
    assert top_level_core_imports(tree) == ["quorum.x", "timeline"]
