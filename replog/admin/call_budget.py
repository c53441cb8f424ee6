"""How long an admin call may take and how it backs off: the defaults both admin clients
(`kafka_admin_client`, `controller_client`) start from, Kafka's where it has one.

Rules: a whole call is bounded by its deadline, each attempt by the request timeout and what
is left of the deadline; addresses that only refuse the connection end the call after the
refused timeout, before its deadline.
"""

from __future__ import annotations

DEFAULT_TIMEOUT_S = 30.0  # a whole call, retries included (Kafka: default.api.timeout.ms 60 s)
REQUEST_TIMEOUT_S = 10.0  # one attempt
RETRY_BACKOFF_S = 0.1  # Kafka: retry.backoff.ms
MAX_RETRY_BACKOFF_S = 1.0  # Kafka: retry.backoff.max.ms
REFUSED_TIMEOUT_S = 30.0  # Kafka: socket.connection.setup.timeout.max.ms


def server_wait_ms(attempt_ms: int) -> int:
    """How long the controller may wait within an attempt: room is left for its answer."""
    return max(1, attempt_ms - min(500, attempt_ms // 10))
