"""Load a script of bench/ as a module, for tests of its pure parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_script(filename: str, module_name: str) -> ModuleType:
    # By path, not through sys.path: bench/ first on it would shadow packages (bench/timeline.py).
    spec = importlib.util.spec_from_file_location(module_name, BENCH / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
