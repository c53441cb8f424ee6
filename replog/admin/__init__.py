"""Clients for replog's admin RPCs, used by the `replog` command and the Python Admin client.

- `bootstrap`: the `--bootstrap-server` list (`host:port,...`, entries may be `id@host:port`).
- `controller_results`: the typed requests and results of the Controller service (dataclasses,
  Kafka's wire enums, errors turned into `replog.errors` exceptions).
- `controller_client`: `ControllerClient` (blocking, for the CLI) and `AsyncControllerClient`
  (`grpc.aio`, for the Admin client), which find the active controller and call it with
  timeouts and retries, one routing core for both.

Rules: nothing here imports the controller's core (`quorum/`) or the CLI; the wire contract
(`proto/replog/pb/controller.proto`) is the only thing shared with the server.
"""
