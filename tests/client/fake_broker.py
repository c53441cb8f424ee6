"""The fake Broker service of `replog.testing` for the tests here.

Imported by module name (`import fake_broker`): pytest puts this folder on `sys.path` for the
tests in it.
"""

from __future__ import annotations

from replog.testing import GARBAGE, FakeBroker
from replog.testing import running_fake_broker as running

__all__ = ["GARBAGE", "FakeBroker", "running"]
