"""A broker's data plane: every partition replica (`replica_manager`, `partition`), its
purgatories, the followers' fetches (`replica_fetcher`, the ReplicaFetch stream and
service), leader offsets, ISR changes sent to the controller, and the request cores the
Kafka listener calls (`broker_cores`); `data_plane_host` says what it runs on.
"""
