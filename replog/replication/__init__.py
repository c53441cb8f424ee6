"""Per-partition replication decisions: pure cores with no I/O, clock or concurrency."""
