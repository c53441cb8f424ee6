"""The fake Broker service of `replog.testing` for the tests here, and `record_redials`.

Imported by module name (`import fake_broker`): pytest puts this folder on `sys.path` for the
tests in it.
"""

from __future__ import annotations

import pytest

from replog.testing import GARBAGE, FakeBroker
from replog.testing import running_fake_broker as running
from replog.wire.broker_client import BrokerClient

__all__ = ["GARBAGE", "FakeBroker", "record_redials", "running"]


def record_redials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses whose BrokerClient channel is dropped from now on, in order."""
    redialled: list[str] = []
    reconnect = BrokerClient.reconnect

    def recording(client: BrokerClient) -> None:
        redialled.append(client.address)
        reconnect(client)

    monkeypatch.setattr(BrokerClient, "reconnect", recording)
    return redialled
