"""replog's metadata quorum (pure): the Raft core in `quorum.raft`, the controller in
`quorum.controller`, metadata records and images in `quorum.metadata`."""

from quorum.raft import RaftNode

__all__ = ["RaftNode"]
