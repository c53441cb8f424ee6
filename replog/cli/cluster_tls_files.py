"""Where an ssl local cluster's certificates are: `<cluster dir>/tls/` (PEM files; private keys
readable by their owner only). `local_certificates` makes them, `local_cluster` names them in
the nodes' settings and in client.properties.

    ca.pem                 the CA's certificate: every node's and client's truststore
    ca.key                 the CA's key (signs the others; kept to sign a new node's)
    node-<id>.pem          a node's keystore: its key, its certificate, the CA's certificate
    client.crt client.key  the certificate clients present (mutual TLS) and its key
"""

from __future__ import annotations

import os
from dataclasses import dataclass

TLS_DIR = "tls"


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
