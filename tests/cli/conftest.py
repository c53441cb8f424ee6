"""The CLI tests answer the commands with the fake controller of `tests/admin`.

tests/ holds no packages (a `tests/checkpoints` directory on sys.path would shadow the real
`checkpoints` package), so this makes `tests/admin/fake_controller.py` importable by module
name, as `tests/raft/conftest.py` does for the simulator.
"""

from __future__ import annotations

import sys
from pathlib import Path

ADMIN_TESTS = str(Path(__file__).resolve().parent.parent / "admin")
if ADMIN_TESTS not in sys.path:
    sys.path.insert(0, ADMIN_TESTS)
