"""replog's metadata quorum (pure): the Raft core in `replog.quorum.raft`, the controller in
`replog.quorum.controller`, metadata records and images in `replog.quorum.metadata`.

Nothing is imported here: a command that needs one metadata module (a CLI reading a broker
state's number) does not pay for the Raft core's import. `RaftNode` is still reachable as
`replog.quorum.RaftNode`, imported on first use."""

from typing import Any

__all__ = ["RaftNode"]


def __getattr__(name: str) -> Any:
    if name == "RaftNode":
        from replog.quorum.raft import RaftNode

        return RaftNode
    raise AttributeError(f"module 'replog.quorum' has no attribute {name!r}")
