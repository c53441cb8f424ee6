"""The TLS and SASL of Apache Kafka's bench cluster (`bench/kafka/kafka.sh` under
`KAFKA_SECURITY` ssl or sasl_ssl), made as `replog cluster start --security` makes a replog
cluster's: both systems are secured alike and their clients take the same files.

Rules:
- The certificates (ECDSA P-256, one a node, a CA of their own: `local_certificates`), the
  administrator's password and the client files (client.properties for replog's and
  librdkafka's clients, client-java.properties for Kafka's Java tools) are written by
  `write_security_files` for a cluster whose brokers listen where Kafka's do, so the
  certificates name 127.0.0.1 and localhost and the client files Kafka's bootstrap servers.
  They live in a directory of their own: kafka.sh wipes its cluster directory as it starts.
- kafka.sh takes the certificates (`KAFKA_TLS_DIR`) and, under sasl_ssl, the administrator's
  password (`KAFKA_SASL_PASSWORD_FILE`): the brokers sign in to each other as the
  administrator, whose SCRAM-SHA-512 credential is formatted into the metadata log.
- Under sasl_ssl every node also runs Kafka's StandardAuthorizer with the settings of replog's
  sasl_ssl nodes (`cluster_sasl`: nothing allowed without an ACL, the super users the
  administrator and every node by its certificate), so both pay the same authorization.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from replog.cli.local_cluster import SECURITY_PLAINTEXT, SECURITY_SASL_SSL, LocalCluster

# The keys of replog's sasl_ssl node settings that Kafka's nodes take as they are (the others
# are TLS files, which kafka.sh names per node, and settings kafka.sh writes itself).
AUTHORIZER_KEYS = ("authorizer.class.name", "allow.everyone.if.no.acl.found", "super.users")
# The planned cluster's own gRPC ports: never opened, only kept apart from the Kafka ports it
# names (`LocalCluster.plan` refuses an overlap).
UNUSED_PORT_OFFSET = 200


@dataclass(frozen=True)
class KafkaSecurity:
    """The written files of a secured Kafka cluster and what kafka.sh and clients take."""

    files: LocalCluster  # the planned cluster the files were written for

    @property
    def security(self) -> str:
        return self.files.security

    def environment(self) -> dict[str, str]:
        """kafka.sh's settings (its header names them)."""
        found = {"KAFKA_SECURITY": self.security, "KAFKA_TLS_DIR": self.files.tls_files.directory}
        if self.security == SECURITY_SASL_SSL:
            from replog.cli.cluster_sasl import ADMIN_USER, admin_password_path

            found["KAFKA_SASL_USER"] = ADMIN_USER
            found["KAFKA_SASL_PASSWORD_FILE"] = admin_password_path(self.files.directory)
        return found

    def node_properties(self) -> tuple[str, ...]:
        """Every node's server.properties lines beyond kafka.sh's (`KEY=VALUE`)."""
        if self.security != SECURITY_SASL_SSL:
            return ()
        from replog.cli.cluster_sasl import sasl_ssl_node_properties

        node_ids = [node.node_id for node in self.files.nodes]
        replog_nodes = sasl_ssl_node_properties(self.files.tls_files, node_ids[0], node_ids)
        return tuple(f"{key}={replog_nodes[key]}" for key in AUTHORIZER_KEYS)

    def client_properties(self) -> dict[str, str]:
        """librdkafka's keys (replog's client reads them too), bootstrap servers included."""
        return self.files.client_properties()

    @property
    def client_config_path(self) -> str:
        path = self.files.client_config_path
        assert path is not None  # a secured cluster's
        return path

    @property
    def java_client_config_path(self) -> str:
        path = self.files.java_client_config_path
        assert path is not None
        return path


def write_kafka_security(
    directory: str, kafka_base_port: int, nodes: int, security: str
) -> KafkaSecurity | None:
    """Write into `directory` (made anew) the files of a Kafka cluster of `nodes` brokers from
    `kafka_base_port` secured by `security` (module rules); None for plaintext."""
    if security == SECURITY_PLAINTEXT:
        return None
    from replog.cli.cluster import write_security_files
    from replog.cli.cluster_sasl import new_admin_password

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory, mode=0o700)
    planned = LocalCluster.plan(
        directory,
        nodes,
        kafka_base_port + UNUSED_PORT_OFFSET,
        kafka_base_port=kafka_base_port,
        security=security,
    )
    write_security_files(planned, new_admin_password() if security == SECURITY_SASL_SSL else None)
    return KafkaSecurity(planned)
