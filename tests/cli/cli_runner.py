"""Running the `replog` command from a CLI test, under the names these tests use.

The runners themselves live in `tests/cluster/cluster_helpers.py` (on sys.path through
`tests/cli/conftest.py`): `replog` here runs in this process (fast: a subprocess costs seconds
of imports on a busy machine), `replog_process` as a user does, for tests that need a real
process (signals, exit codes as the shell sees them).
"""

from __future__ import annotations

from cluster_helpers import Outcome
from cluster_helpers import replog as replog_process
from cluster_helpers import replog_in_process as replog

__all__ = ["Outcome", "replog", "replog_process"]
