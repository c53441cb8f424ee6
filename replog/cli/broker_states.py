"""Whether the brokers of a local cluster run, as each node's own process says.

The controller's view alone cannot say it after a crash: until the killed process's session
expires (`broker.session.timeout.ms`), the controller still lists its registration as
active, and the restarted process is refused registration meanwhile, so its Kafka listener
does not serve yet. Each node reports its own broker's state in `replog_broker_state` (Kafka's
BrokerState metric), read here over its metrics endpoint. A node without one is left to the
controller's view: one that `cluster.json` lists none for, and one whose endpoint refuses
connections once the node answers (a `metrics.port=0` override: a node starts its metrics
endpoint before its gRPC listener, so a node that answers and refuses has none).
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.cli.cluster_status import (
    BROKER_STATE_GAUGE,
    BROKER_STATES,
    PROBE_TIMEOUT_S,
    NoAnswer,
    scrape_gauges,
)
from replog.cli.local_cluster import LocalNode

# What a broker in each state (by its `BROKER_STATES` name) waits for, as the wait for it says.
_WAITS_FOR = {
    "starting": (
        "is starting: not registered yet; one restarted after a crash registers once the "
        "killed process's session expires, broker.session.timeout.ms"
    ),
    "recovery": "is registered, waiting to be unfenced",
    "pending_controlled_shutdown": "is shutting down",
    "shutting_down": "is shutting down",
}


def brokers_not_running(nodes: Iterable[LocalNode]) -> str:
    """Which of the broker `nodes`, each of which answers, do not say they run
    (`replog_broker_state` 3: unfenced, its listeners serving), as a sentence; "" when all of
    them do (module docstring: a node without a metrics endpoint is not asked)."""
    waiting = []
    for node in nodes:
        if node.metrics_address is None:
            continue
        try:
            gauges = scrape_gauges(node.metrics_address, (BROKER_STATE_GAUGE,), PROBE_TIMEOUT_S)
        except NoAnswer as exc:
            if not exc.refused:
                waiting.append(f"broker {node.node_id} ({node.metrics_url}: {exc})")
            continue
        state = gauges[BROKER_STATE_GAUGE]
        named = BROKER_STATES.get(state)
        if named != "running":
            waits_for = _WAITS_FOR.get(named or "", f"reports broker state {state}")
            waiting.append(f"broker {node.node_id} {waits_for}")
    return "; ".join(waiting)
