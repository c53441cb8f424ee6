"""The compiled methods of dataclasses, kept between runs of the `replog` command.

`@dataclass` writes each class's methods (`__init__`, `__repr__`, `__eq__`, a frozen class's
`__setattr__` ...) as source text and compiles it when the class is made: about 2,000
compilations when a node imports its runtime, half of its import's CPU (0.5 of 1.3 s on a
small VM), paid again by every node start and every command. The text is the same in every
run of the same code, so its compiled form is kept, keyed by the text, in a file beside the
module's bytecode, and compiled only when a text is new.

Rules:
- Only `replog`'s entry point installs it (`install`), before the command's module is
  imported: a library never changes how an application's own dataclasses are made.
- What runs is what `@dataclass` would run: the code object compiled from the same text, with
  the same flags (none inherited), executed the same way; only the compilation is skipped.
- One file per module that makes dataclasses, read when it makes its first (a command reads
  only its own modules' files): `__pycache__/<module>.<tag>.dataclasses.marshal` beside the
  module's `.pyc` (`importlib.util.cache_from_source`: under `PYTHONPYCACHEPREFIX` when set;
  `tag` such as `cpython-311`, one per interpreter). A module without a file of its own
  (`python -c`) is compiled as without this.
- Written as Python writes bytecode: never where `PYTHONDONTWRITEBYTECODE` is set (`save(force=
  True)` writes anyway, as `compileall` writes bytecode), whole, by a rename, merged with what
  another process wrote meanwhile; only the texts this process used are kept once a file holds
  more than `MAX_ENTRIES` (texts of code since changed). A file that cannot be read, is corrupt
  or of another shape counts as empty: the methods are then compiled, as without it.
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

MAX_ENTRIES = 500

# Per module file: its kept code by source text, the texts used, whether any was compiled.
_kept: dict[str, dict[str, CodeType]] = {}
_used: dict[str, set[str]] = {}
_changed: set[str] = set()
_installed = False


def cache_path(module_file: str) -> str:
    """Where the compiled methods of the module in `module_file` are kept (module Rules)."""
    bytecode = importlib.util.cache_from_source(module_file)
    return bytecode.removesuffix(".pyc") + ".dataclasses.marshal"


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
    module_file = globals.get("__file__") if isinstance(globals, dict) else None
    if isinstance(source, str) and isinstance(module_file, str):
        kept = _kept.get(module_file)
        if kept is None:
            try:
                path = cache_path(module_file)
            except NotImplementedError:  # an interpreter without a bytecode cache tag
                builtins.exec(source, globals, locals)
                return
            kept = _kept[module_file] = _read(path)
            _used[module_file] = set()
        code = kept.get(source)
        if code is None:
            code = kept[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _changed.add(module_file)
        _used[module_file].add(source)
        source = code
    builtins.exec(source, globals, locals)


def install() -> None:
    """Make dataclasses from kept code from now on in this process; save new code at exit."""
    global _installed
    if _installed:
        return
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # the module's global shadows the builtin
    atexit.register(save)
    _installed = True


def save(force: bool = False) -> None:
    """Write the files of the modules whose code this process compiled (module Rules); never
    raises: a place that cannot be written leaves its module compiled each time."""
    if sys.dont_write_bytecode and not force:
        return
    for module_file in sorted(_changed):
        path = cache_path(module_file)
        merged = {**_read(path), **_kept[module_file]}
        if len(merged) > MAX_ENTRIES:
            merged = {text: _kept[module_file][text] for text in _used[module_file]}
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temporary, "wb") as f:
                marshal.dump(merged, f)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            continue
        _changed.discard(module_file)
