"""replog's metadata quorum (pure): the Raft core in `replog.quorum.raft`, the controller in
`replog.quorum.controller`, metadata records and images in `replog.quorum.metadata`."""

from replog.quorum.raft import RaftNode

__all__ = ["RaftNode"]
