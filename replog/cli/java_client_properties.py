"""`DIR/client-java.properties`: a local ssl or sasl_ssl cluster's client settings in the names
Kafka's Java clients and tools read (every tool's `--command-config`), made from the
librdkafka-style client.properties of the same cluster.

Rules:
- `ssl.ca.location` becomes a PEM truststore (`ssl.truststore.type=PEM`,
  `ssl.truststore.location`); a client certificate (`ssl.certificate.location` with
  `ssl.key.location`) becomes a PEM keystore (`ssl.keystore.type=PEM`, `ssl.keystore.location`)
  of one file holding the key, the certificate and the CA's (`client-keystore.pem`, which Java
  needs whole; its owner's only).
- `sasl.username` and `sasl.password` become Kafka's `sasl.jaas.config` for the mechanism
  (ScramLoginModule for SCRAM, PlainLoginModule for PLAIN); `sasl.mechanism` is the same key.
- Any other key is copied as it is (`bootstrap.servers`, `security.protocol`).
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.cli.cluster_tls_files import ClusterTlsFiles
from replog.errors import ReplogError

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_CONVERTED = frozenset(
    {
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "sasl.username",
        "sasl.password",
    }
)


def java_client_properties(properties: Mapping[str, str], files: ClusterTlsFiles) -> dict[str, str]:
    """The Java form of the client `properties` (module rules); a client certificate is named
    as `files.client_keystore` (`write_client_keystore` writes it)."""
    java = {key: value for key, value in properties.items() if key not in _CONVERTED}
    if "ssl.ca.location" in properties:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = properties["ssl.ca.location"]
    if "ssl.certificate.location" in properties:
        java["ssl.keystore.type"] = "PEM"
        java["ssl.keystore.location"] = files.client_keystore
    if "sasl.username" in properties:
        mechanism = properties.get("sasl.mechanism", "")
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        java["sasl.jaas.config"] = (
            f'{module} required username="{_jaas_text(properties["sasl.username"])}" '
            f'password="{_jaas_text(properties.get("sasl.password", ""))}";'
        )
    return java


def client_keystore_pem(files: ClusterTlsFiles) -> str:
    """The client's key, its certificate and the CA's certificate, as one PEM keystore."""
    parts = []
    for path in (files.client_key, files.client_certificate, files.ca_certificate):
        try:
            with open(path, encoding="ascii") as f:
                parts.append(f.read().strip() + "\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReplogError(f"cannot read {path}: {exc}") from None
    return "".join(parts)


def _jaas_text(text: str) -> str:
    """`text` inside a JAAS option's double quotes (Kafka's JaasConfig unescapes backslashes)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
