"""The metadata quorum's shells around the pure Raft core (`replog.quorum.raft`): the
driver that carries out each Ready, Raft storage on disk, the transport (gRPC, and Raft
Fetch over framed TCP), the RaftQuorum and MetadataLog services, raw metadata appends,
metadata snapshots and how stale the committed metadata may be.
"""
