"""replog's metadata quorum (pure): the Raft core in `quorum.raft`; controller and metadata image
arrive with later issues."""

from quorum.raft import RaftNode

__all__ = ["RaftNode"]
