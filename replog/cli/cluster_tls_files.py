"""Where an ssl local cluster's certificates are: `<cluster dir>/tls/` (PEM files; private keys
readable by their owner only). `local_certificates` makes them, `local_cluster` names them in
the nodes' settings and in client.properties.

    ca.pem                 the CA's certificate: every node's and client's truststore
    ca.key                 the CA's key (signs the others; kept to sign a new node's)
    node-<id>.pem          a node's keystore: its key, its certificate, the CA's certificate
    client.crt client.key  the certificate clients present (mutual TLS) and its key
    client-keystore.pem    the same key and certificate with the CA's, one PEM keystore for
                           Kafka's Java clients (`java_client_properties`)

A node's certificate is its server certificate on every listener and its client certificate on
the links to the other nodes; its subject is `CN=replog-node-<id>,O=replog local cluster`, whose
principal (Kafka's DEFAULT mapping) is one of the cluster's `super.users`: that is how the
nodes recognise each other (`internal_tls_config`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

TLS_DIR = "tls"
ORGANIZATION = "replog local cluster"  # every certificate's O
CLIENT_NAME = "replog-client"  # the client certificate's CN


def node_common_name(node_id: int) -> str:
    """The CN of node `node_id`'s certificate."""
    return f"replog-node-{node_id}"


def node_principal(node_id: int) -> str:
    """Node `node_id`'s principal by its certificate under Kafka's DEFAULT mapping rule: its
    subject as Java prints it (RFC 2253: the last attribute first)."""
    return f"User:CN={node_common_name(node_id)},O={ORGANIZATION}"


@dataclass(frozen=True, slots=True)
class ClusterTlsFiles:
    """The certificate files of the cluster in `cluster_directory` (absolute paths)."""

    cluster_directory: str

    @property
    def directory(self) -> str:
        return os.path.join(self.cluster_directory, TLS_DIR)

    @property
    def ca_certificate(self) -> str:
        return os.path.join(self.directory, "ca.pem")

    @property
    def ca_key(self) -> str:
        return os.path.join(self.directory, "ca.key")

    def node_keystore(self, node_id: int) -> str:
        return os.path.join(self.directory, f"node-{node_id}.pem")

    @property
    def client_certificate(self) -> str:
        return os.path.join(self.directory, "client.crt")

    @property
    def client_key(self) -> str:
        return os.path.join(self.directory, "client.key")

    @property
    def client_keystore(self) -> str:
        return os.path.join(self.directory, "client-keystore.pem")
