"""The compiled methods of dataclasses, kept between runs of the `replog` command.

`@dataclass` writes each class's methods (`__init__`, `__repr__`, `__eq__`, a frozen class's
`__setattr__` ...) as source text and compiles it when the class is made: about 2,000
compilations when a node imports its runtime, half of its import's CPU (0.5 of 1.3 s on a
small VM), paid again by every node start and every command. The text is the same in every
run of the same code, so its compiled form is kept here, keyed by the text, in one file beside
the package's bytecode, and compiled only when a text is new.

Rules:
- Only `replog`'s entry point installs it (`install`), before the command's module is
  imported: a library never changes how an application's own dataclasses are made.
- What runs is what `@dataclass` would run: the code object compiled from the same text, with
  the same flags (none inherited), executed the same way; only the compilation is skipped.
- The file follows Python's own bytecode rules: `__pycache__/dataclass_methods.<tag>.marshal`
  beside this package (or under `PYTHONPYCACHEPREFIX`), one per interpreter version (`tag`:
  `cpython-311`), never written where `PYTHONDONTWRITEBYTECODE` is set (`save(force=True)`
  writes it anyway, as `compileall` writes bytecode), written whole by a rename and merged
  with what another process wrote meanwhile. A file that cannot be read, is corrupt or of
  another shape counts as empty: the methods are then compiled, as without it.
- At most `MAX_ENTRIES` texts are kept: past that, those this process did not use are dropped
  (texts of code since changed).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

MAX_ENTRIES = 20_000
_SUFFIX = ".marshal"

_cache: dict[str, CodeType] = {}
_used: set[str] = set()
_new = 0
_installed = False


def cache_path() -> str:
    """Where the compiled methods are kept for this interpreter (module Rules)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dataclass_methods.py")
    return importlib.util.cache_from_source(source).removesuffix(".pyc") + _SUFFIX


def _read(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as f:
            loaded = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType)}


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """`exec` as `dataclasses` calls it, over kept code for a source text (module Rules)."""
    global _new
    if isinstance(source, str):
        code = _cache.get(source)
        if code is None:
            code = _cache[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _new += 1
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def install() -> None:
    """Make dataclasses from kept code from now on in this process; save new code at exit."""
    global _installed
    if _installed:
        return
    _cache.update(_read(cache_path()))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # the module's global shadows the builtin
    atexit.register(save)
    _installed = True


def save(force: bool = False) -> None:
    """Write the kept code if this process compiled any (module Rules); never raises."""
    global _new
    if not _new or (sys.dont_write_bytecode and not force):
        return
    path = cache_path()
    merged = {**_read(path), **_cache}
    if len(merged) > MAX_ENTRIES:
        merged = {text: _cache[text] for text in _used}
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as f:
            marshal.dump(merged, f)
        os.replace(temporary, path)
        _new = 0
    except OSError:  # a read-only install: compiled as without the file
        with contextlib.suppress(OSError):
            os.unlink(temporary)
