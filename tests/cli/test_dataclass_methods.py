"""Dataclasses made from kept code behave as `@dataclass` makes them, the code is kept across
processes in one file, and a bad file or a read-only place costs only the compilations."""

from __future__ import annotations

import dataclasses
import marshal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replog.cli import dataclass_methods

# A module of dataclasses, and a child process that installs the kept code, imports the module
# and prints what its classes do, and how many of their methods it compiled.
MODULE = textwrap.dedent(
    """
    import dataclasses

    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: "tuple[str, ...]" = dataclasses.field(default_factory=tuple)

    @dataclasses.dataclass(order=True)
    class Version:
        major: int
        minor: int = 0
    """
)
CHILD = textwrap.dedent(
    """
    import dataclasses, sys
    from replog.cli import dataclass_methods as kept
    kept.install()
    sys.path.insert(0, sys.argv[1])
    from shapes import Point, Version

    p = Point(1, ("a",))
    try:
        p.x = 2
        frozen = "no"
    except dataclasses.FrozenInstanceError:
        frozen = "yes"
    print(repr(p), p == Point(1, ("a",)), hash(p) == hash(Point(1, ("a",))), frozen)
    print(Version(1, 2) < Version(1, 3), repr(Version(2)))
    print(sorted(Point.__init__.__annotations__.items(), key=str))
    print("compiled" if kept._changed else "all kept")
    kept.save(force=len(sys.argv) > 2)
    """
)


def child(directory: Path, *force: str) -> list[str]:
    """The child's lines, over the module `shapes` in `directory` (written if missing)."""
    module = directory / "shapes.py"
    if not module.exists():
        module.write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-B", "-c", CHILD, str(directory), *force],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def kept_file(directory: Path) -> Path:
    return Path(dataclass_methods.cache_path(str(directory / "shapes.py")))


def test_classes_made_from_kept_code_behave_as_compiled_ones(tmp_path: Path) -> None:
    first = child(tmp_path, "force")
    assert first[-1] == "compiled"
    assert kept_file(tmp_path).exists()
    second = child(tmp_path)
    assert second[-1] == "all kept"  # every method from the file
    assert first[:-1] == second[:-1]
    assert first[0] == "Point(x=1, y=('a',)) True True yes"
    assert first[1] == "True Version(major=2, minor=0)"
    # Annotations as `@dataclass` makes them: not strings from this module's future import.
    assert "('x', <class 'int'>)" in first[2] and "('y', 'tuple[str, ...]')" in first[2]


def test_a_corrupt_or_foreign_file_counts_as_empty(tmp_path: Path) -> None:
    child(tmp_path, "force")
    kept = kept_file(tmp_path)
    for content in (
        b"\x00not marshal",
        marshal.dumps(["a list", 1]),
        marshal.dumps({"text": b"not code", 3: compile("1", "<s>", "eval")}),
    ):
        kept.write_bytes(content)
        assert child(tmp_path)[-1] == "compiled"


def test_nothing_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    child(tmp_path)  # sys.dont_write_bytecode: the child runs with -B
    assert not kept_file(tmp_path).exists()
    child(tmp_path, "force")
    assert kept_file(tmp_path).exists()


def test_a_module_without_a_file_is_compiled_as_without_kept_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dataclass_methods, "_kept", {})
    namespace: dict[str, object] = {}
    dataclass_methods._exec("y = 7\n", namespace, namespace)
    assert namespace["y"] == 7
    assert dataclass_methods._kept == {}


def test_past_the_limit_only_the_texts_used_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = str(tmp_path / "m.py")
    kept = Path(dataclass_methods.cache_path(module))
    kept.parent.mkdir()
    stale = {f"x = {i}\n": compile(f"x = {i}\n", "<string>", "exec") for i in range(5)}
    kept.write_bytes(marshal.dumps(stale))
    for name, value in (("_kept", {}), ("_used", {}), ("_changed", set()), ("MAX_ENTRIES", 4)):
        monkeypatch.setattr(dataclass_methods, name, value)
    namespace: dict[str, object] = {"__file__": module}
    dataclass_methods._exec("x = 1\n", namespace, namespace)  # kept: not compiled
    assert dataclass_methods._changed == set()
    dataclass_methods._exec("y = 7\n", namespace, namespace)
    assert namespace["x"] == 1 and namespace["y"] == 7
    dataclass_methods.save(force=True)
    with open(kept, "rb") as f:
        assert set(marshal.load(f)) == {"x = 1\n", "y = 7\n"}


def test_the_replog_command_makes_dataclasses_from_kept_code() -> None:
    import replog.cli.main  # noqa: F401  (installs it, as the command does)

    assert dataclasses.exec is dataclass_methods._exec  # type: ignore[attr-defined]
