"""The configuration of one replog node process, from Kafka's property names.

Required: `process.roles` (`controller`, `broker` or both), `node.id`,
`controller.quorum.voters` (`id@host:port,...`), `listeners` (`NAME://host:port,...`; the node
serves gRPC on the first), `log.dirs` (comma list). Optional: `metadata.log.dir` (default: the
first log dir) and every `controller.quorum.*` timer (`quorum.raft.config`).

Rules: a controller must be one of the voters and listen where the voter list says it does;
every problem is a `ConfigError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.config import RaftConfig
from replog.errors import ConfigError

ROLES = frozenset({"controller", "broker"})


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    roles: frozenset[str]
    listener_host: str
    listener_port: int
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    raft: RaftConfig
    properties: dict[str, str]

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def listener(self) -> str:
        return f"{self.listener_host}:{self.listener_port}"

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> NodeConfig:
        def required(key: str) -> str:
            value = properties.get(key, "").strip()
            if not value:
                raise ConfigError(f"{key}: required")
            return value

        roles = frozenset(r.strip() for r in required("process.roles").split(",") if r.strip())
        if not roles or not roles <= ROLES:
            raise ConfigError(
                f"process.roles={properties['process.roles']!r}: accepted values are "
                "controller, broker, or both"
            )
        try:
            node_id = int(required("node.id"))
        except ValueError:
            raise ConfigError(f"node.id={properties['node.id']!r}: must be an integer") from None
        if node_id < 0:
            raise ConfigError(f"node.id={node_id}: must be >= 0")
        host, port = _first_listener(required("listeners"))
        log_dirs = tuple(d.strip() for d in required("log.dirs").split(",") if d.strip())
        raft_properties = {
            k: v for k, v in properties.items() if k.startswith("controller.quorum.")
        }
        raft = RaftConfig.from_properties(raft_properties)
        if "controller" in roles:
            mine = [v for v in raft.voters if v.node_id == node_id]
            if not mine:
                raise ConfigError(
                    f"controller.quorum.voters: node.id {node_id} has the controller role but is "
                    "not a voter"
                )
            if mine[0].port != port:
                raise ConfigError(
                    f"listeners: node {node_id} listens on port {port} but "
                    f"controller.quorum.voters gives port {mine[0].port}"
                )
        return cls(
            node_id=node_id,
            roles=roles,
            listener_host=host,
            listener_port=port,
            log_dirs=log_dirs,
            metadata_log_dir=properties.get("metadata.log.dir", log_dirs[0]),
            raft=raft,
            properties=dict(properties),
        )


def _first_listener(text: str) -> tuple[str, int]:
    first = text.split(",")[0].strip()
    address = first.split("://", 1)[1] if "://" in first else first
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"listeners={text!r}: expected NAME://host:port")
    return host or "0.0.0.0", int(port)
