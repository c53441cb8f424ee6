"""Shells: asyncio + gRPC processes that drive the pure cores and own the I/O.

One sub-package per role, top first; each imports only those below it (pyproject.toml's
`server-roles` contract; docs/architecture.md, Folders):

- `process`: one node process: the composition root that wires the roles together (`node`),
  which `server.properties` keys it reads, and its state as Prometheus gauges.
- `broker`: the broker role of a node (`broker_runtime`): metadata replay and publishing, its
  lifecycle against the controller (registration, heartbeats), producer id blocks, and the
  wiring of the data plane, the group coordinator and the Kafka listener.
- `kafka`: the Kafka listener, every client's way in: connections (`kafka_listener`) and each
  request's handler, translated to the broker's cores, the group coordinator or the active
  controller; a controller's own Kafka listener (`kafka_controller_apis`).
- `groups`: the group coordinator's shell on a broker: groups and committed offsets over the
  pure `replog.coordinator`, stored in `__consumer_offsets` replicas, and that topic's creation
  when a coordinator is first looked for.
- `data_plane`: a broker's data plane: every partition replica (`replica_manager`, `partition`),
  its purgatories, the followers' fetches (`replica_fetcher`, the ReplicaFetch stream and
  service), leader offsets, ISR changes sent to the controller, and the request cores the Kafka
  listener calls (`broker_cores`); `data_plane_host` says what it runs on.
- `controller`: the controller role's shells: the quorum controller run on the Raft driver's
  loop, its `Controller` gRPC service, and how a broker's requests reach the active controller
  (`controller_calls`, `controller_retry`).
- `raft`: the metadata quorum's shells around the pure Raft core (`replog.quorum.raft`): the
  driver that carries out each Ready, Raft storage on disk, the transport (gRPC, and Raft Fetch
  over framed TCP), the RaftQuorum and MetadataLog services, raw metadata appends, metadata
  snapshots and how stale the committed metadata may be.
- `config`: the node's settings, read from Kafka's property names and checked once at start-up:
  the node as a whole (`node_config`), the data plane's and the group coordinator's.
- `metrics`: each node's Prometheus registry and its HTTP endpoint.
- `runtime`: what every role of a node process runs on: the node's one TaskGroup and the event
  loop's turns, the bulk worker threads, the garbage collector and allocator settings, the
  open-file limit, the loop stall sampler, and serving and dialling gRPC calls.
"""
