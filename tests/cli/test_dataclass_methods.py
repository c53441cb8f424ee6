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

# A child process: installs the kept code (from the file named), makes these classes and prints
# what they do, and how many of their methods it compiled.
CHILD = textwrap.dedent(
    """
    import dataclasses, sys
    from replog.cli import dataclass_methods as kept
    kept.cache_path = lambda: sys.argv[1]
    kept.install()

    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: "tuple[str, ...]" = dataclasses.field(default_factory=tuple)

    @dataclasses.dataclass(order=True)
    class Version:
        major: int
        minor: int = 0

    p = Point(1, ("a",))
    try:
        p.x = 2
        frozen = "no"
    except dataclasses.FrozenInstanceError:
        frozen = "yes"
    print(repr(p), p == Point(1, ("a",)), hash(p) == hash(Point(1, ("a",))), frozen)
    print(Version(1, 2) < Version(1, 3), repr(Version(2)))
    print(sorted(Point.__init__.__annotations__.items(), key=str))
    print("compiled", kept._new)
    kept.save(force=len(sys.argv) > 2)
    """
)


def child(cache: Path, *force: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache), *force],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_classes_made_from_kept_code_behave_as_compiled_ones(tmp_path: Path) -> None:
    cache = tmp_path / "kept.marshal"
    first = child(cache, "force")
    assert first[-1].startswith("compiled ") and int(first[-1].split()[1]) >= 6
    assert cache.exists()
    second = child(cache)
    assert second[-1] == "compiled 0"  # every method from the file
    assert first[:-1] == second[:-1]
    assert first[0] == "Point(x=1, y=('a',)) True True yes"
    assert first[1] == "True Version(major=2, minor=0)"
    # Annotations as `@dataclass` makes them: not strings from this module's future import.
    assert "('x', <class 'int'>)" in first[2] and "('y', 'tuple[str, ...]')" in first[2]


def test_a_corrupt_or_foreign_file_counts_as_empty(tmp_path: Path) -> None:
    cache = tmp_path / "kept.marshal"
    cache.write_bytes(b"\x00not marshal")
    assert int(child(cache)[-1].split()[1]) >= 6
    cache.write_bytes(marshal.dumps(["a list", 1]))
    assert int(child(cache)[-1].split()[1]) >= 6
    cache.write_bytes(marshal.dumps({"text": b"not code", 3: compile("1", "<s>", "eval")}))
    assert int(child(cache)[-1].split()[1]) >= 6


def test_nothing_is_written_where_bytecode_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "kept.marshal"
    monkeypatch.setattr(dataclass_methods, "cache_path", lambda: str(cache))
    monkeypatch.setattr(dataclass_methods, "_cache", {})
    monkeypatch.setattr(dataclass_methods, "_used", set())
    monkeypatch.setattr(dataclass_methods, "_new", 0)
    dataclass_methods._exec("def f():\n return 1\n", {}, {})
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    dataclass_methods.save()
    assert not cache.exists()
    dataclass_methods.save(force=True)
    assert cache.exists()


def test_past_the_limit_only_the_texts_used_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "kept.marshal"
    stale = {f"x = {i}\n": compile(f"x = {i}\n", "<string>", "exec") for i in range(5)}
    cache.write_bytes(marshal.dumps(stale))
    monkeypatch.setattr(dataclass_methods, "cache_path", lambda: str(cache))
    monkeypatch.setattr(dataclass_methods, "_cache", dict(stale))
    monkeypatch.setattr(dataclass_methods, "_used", set())
    monkeypatch.setattr(dataclass_methods, "_new", 0)
    monkeypatch.setattr(dataclass_methods, "MAX_ENTRIES", 4)
    namespace: dict[str, object] = {}
    dataclass_methods._exec("y = 7\n", namespace, namespace)
    assert namespace["y"] == 7
    dataclass_methods.save(force=True)
    with open(cache, "rb") as f:
        assert set(marshal.load(f)) == {"y = 7\n"}


def test_the_replog_command_makes_dataclasses_from_kept_code() -> None:
    import replog.cli.main  # noqa: F401  (installs it, as the command does)

    assert dataclasses.exec is dataclass_methods._exec  # type: ignore[attr-defined]
