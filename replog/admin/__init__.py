"""Clients for replog's admin RPCs, used by the `replog` command and the Python Admin client.

- `bootstrap`: the `--bootstrap-server` list (`host:port,...`, entries may be `id@host:port`).
- `cluster_metadata`: what the Controller service says of the cluster (brokers, topics,
  partitions), apart, so that a command that only reads it loads no other result type.
- `controller_results`: the typed requests and results of the Controller's changes, configs,
  elections and reassignments (dataclasses, Kafka's wire enums).
- `controller_errors`: answers' error codes turned into `replog.errors` exceptions, -1 read as
  None.
- `controller_client`: `ControllerClient` (blocking, for the CLI) and `AsyncControllerClient`
  (`grpc.aio`, for the Admin client), which find the active controller and call it with
  timeouts and retries, one routing core for both.

Rules: nothing here imports the controller's core (`quorum/`) or the CLI; the wire contract
(`proto/replog/pb/controller.proto`) is the only thing shared with the server.
"""
