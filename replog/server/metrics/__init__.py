"""Prometheus metrics of one replog node (issue #9; names from docs/design/clients.md#metric-names).

One concept per module:

- `instruments`: the node's own `CollectorRegistry` (never the process-global one: tests run
  several nodes in one process) and the instruments the hot paths increment (counters and
  histograms: requests, bytes and messages in/out, ISR shrinks and expands, Raft commit
  latency). Increments happen per request or per batch, never per record.
- `node_state`: gauges read from live state at scrape time (a custom Collector over a snapshot
  function: under-replicated / min-ISR / offline partitions, active controller, log sizes,
  purgatory sizes, the Raft status, the metadata lag): no bookkeeping on any hot path.
- `replica_counts`: the replica, leader and ISR-health counts of the summary, kept by the
  replica manager as metadata and ISR changes come, so that a scrape reads them in O(1).
- `request_interceptor`: the grpc.aio server interceptor behind `replog_requests_total` and
  `replog_request_duration_seconds`.
- `http_endpoint`: serves a registry over HTTP (`metrics.port`, `metrics.host`).
"""
