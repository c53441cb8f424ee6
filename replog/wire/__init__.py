"""What a node and its clients share on the wire: the Kafka-protocol clients of a broker
(`kafka_connection`, `kafka_broker_client`, `kafka_coordinator_client`); on the cluster's
internal gRPC, one address's channel (`redialing_channel`), the codecs between protobuf and
the cores' messages (`broker_codec` for the followers' ReplicaFetch stream, `record_wire`,
`controller_codec`), and how replog's own processes run gRPC (`grpc_engine`).

Rules:
- Translation only: no protocol decision is made here (the cores decide, the node and the
  client library act).
- Imports the pure cores and `replog.pb`, never the node (`replog.server`), the client library,
  the admin clients, Spark or the CLI (the import contract in pyproject.toml holds it).
- Importing this package imports nothing: `grpc_engine` must be importable before grpc is.
"""
