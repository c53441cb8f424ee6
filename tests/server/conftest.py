"""Fixtures shared by the node tests of this directory."""

from __future__ import annotations

from typing import Any

import pytest

from replog.server.process import node as node_module
from replog.server.raft.raft_storage import RaftStorage


@pytest.fixture
def storage_events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ "opened" and "closed" as a `Node` opens and closes its metadata log."""
    events: list[str] = []

    class Recorded(RaftStorage):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            events.append("opened")

        def close(self) -> None:
            super().close()
            events.append("closed")

    monkeypatch.setattr(node_module, "RaftStorage", Recorded)
    return events
