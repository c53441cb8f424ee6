"""The CLI tests use the fake controller of `tests/admin` and the real clusters of
`tests/cluster`.

tests/ holds no packages (a `tests/checkpoints` directory on sys.path would shadow the real
`checkpoints` package), so this makes `tests/admin/fake_controller.py` and
`tests/cluster/client_cluster.py` importable by module name, as `tests/raft/conftest.py` does
for the simulator.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
for folder in (str(TESTS / "admin"), str(TESTS / "cluster")):
    if folder not in sys.path:
        sys.path.insert(0, folder)
