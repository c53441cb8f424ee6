"""Clients for replog's admin calls, used by the `replog` command and the Python Admin client.

- `kafka_admin_client`: `KafkaAdminClient` (blocking, for the CLI) and `AsyncKafkaAdminClient`
  (for the Admin client): Kafka's admin APIs on the brokers' Kafka listeners, the way every
  client reaches a cluster.
- `kafka_cluster_answers`, `kafka_answers`: Kafka's requests and answers read into this
  package's dataclasses (what reads the cluster apart from what changes it).
- `bootstrap`: the `--bootstrap-server` list (`host:port,...`, entries may be `id@host:port`).
- `cluster_metadata`: what the Controller service says of the cluster (brokers, topics,
  partitions), apart, so that a command that only reads it loads no other result type.
- `controller_results`: the typed requests and results of the Controller's changes, configs,
  elections and reassignments (dataclasses, Kafka's wire enums).
- `controller_errors`: answers' error codes turned into `replog.errors` exceptions, -1 read as
  None.
- `controller_client`: `ControllerClient` and `AsyncControllerClient`, clients of the internal
  gRPC Controller service (local cluster management, `replog cluster`), which find the active
  controller and call it with timeouts and retries.
- `quorum`: the Raft quorum's DescribeQuorum over gRPC, for `replog cluster` and the
  brokers' Kafka DescribeQuorum handler; `quorum_description`, the leader's answer as Kafka's
  tools read it, apart and without grpc, for the Admin client.

Rules: nothing here imports the controller's core (`quorum/`) or the CLI; the wire contracts
(Kafka's messages, `proto/replog/pb/*.proto`) are the only things shared with the server.
"""
