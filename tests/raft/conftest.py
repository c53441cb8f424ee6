"""The Raft unit and scenario tests drive nodes through the simulator's in-memory shell.

tests/ holds no packages (a `tests/checkpoints` directory on sys.path would shadow the real
`checkpoints` package), so this makes tests/sim importable by module name, as pytest makes the
directory of each test module importable.
"""

from __future__ import annotations

import sys
from pathlib import Path

SIM = str(Path(__file__).resolve().parent.parent / "sim")
if SIM not in sys.path:
    sys.path.insert(0, SIM)
