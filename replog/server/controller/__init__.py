"""The controller role's shells: the quorum controller run on the Raft driver's loop, its
`Controller` gRPC service, and how a broker's requests reach the active controller
(`controller_calls`, `controller_retry`).
"""
