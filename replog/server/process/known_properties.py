"""Which `server.properties` keys a replog node reads, so that one it does not is reported.

Kafka logs "supplied but isn't a known config" for a key nothing reads; without that, a typo
(`min.insync.replica=2`) leaves the node silently on the default, which an operator finds out
only when the guarantee they asked for is missing. The node warns at start-up for each unknown
key and names the closest known one.

Rules:
- The known set is the union of the keys each reader owns (node, Raft, controller, broker
  runtime, broker-level topic defaults, replica manager, group and transaction coordinators,
  log manager, log configs), never a second hand-written list; `tests/test_docs.py` holds it
  equal to the keys the code reads.
- Unknown keys are warned about, not refused, as Kafka does: a file shared with Kafka's own
  tools may carry settings replog has no use for.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from replog.coordinator.group_migration import MIGRATION_POLICY_PROPERTY
from replog.quorum.controller.config_definitions import BROKER_CONFIGS
from replog.quorum.raft.config import PROPERTY_FIELDS, VOTERS_PROPERTY
from replog.server.config import (
    group_coordinator_config,
    replica_manager_config,
    transaction_coordinator_config,
)
from replog.server.config.authorizer_config import AUTHORIZER_PROPERTIES
from replog.server.config.data_plane_config import BROKER_PROPERTIES
from replog.server.config.node_config import CONTROLLER_PROPERTIES, NODE_PROPERTIES
from replog.server.config.sasl_config import SASL_PROPERTIES, is_listener_sasl_key
from replog.server.config.tls_config import TLS_PROPERTIES, is_listener_tls_key
from replog.server.kafka.kafka_listener import KAFKA_LISTENER_PROPERTIES
from replog.storage import log_config, log_manager
from replog.storage.cleaner import cleaner_config

KNOWN_NODE_PROPERTIES = frozenset(
    NODE_PROPERTIES
    | {VOTERS_PROPERTY}
    | PROPERTY_FIELDS.keys()
    | CONTROLLER_PROPERTIES.keys()
    | BROKER_PROPERTIES
    | KAFKA_LISTENER_PROPERTIES
    | TLS_PROPERTIES
    | SASL_PROPERTIES
    | AUTHORIZER_PROPERTIES
    | BROKER_CONFIGS.keys()
    | replica_manager_config.PROPERTY_NAMES.keys()
    | group_coordinator_config.PROPERTY_NAMES.keys()
    | transaction_coordinator_config.PROPERTY_NAMES.keys()
    | {
        group_coordinator_config.ASSIGNORS_PROPERTY,
        MIGRATION_POLICY_PROPERTY,
    }
    | log_manager.PROPERTY_NAMES.keys()
    | cleaner_config.PROPERTY_NAMES.keys()
    | log_config.BY_DOTTED_NAME.keys()
)


def unknown_properties(properties: Mapping[str, str]) -> list[str]:
    """One message per key no part of the node reads, naming the closest known key."""
    messages = []
    for key in sorted(properties.keys() - KNOWN_NODE_PROPERTIES):
        if is_listener_sasl_key(key) or is_listener_tls_key(key):
            continue  # a listener's own SASL or TLS settings (`sasl_config`, `tls_config`)
        close = difflib.get_close_matches(key, KNOWN_NODE_PROPERTIES, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        messages.append(f"{key} is not a setting replog knows; it is ignored{hint}")
    return messages
