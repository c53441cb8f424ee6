"""What a local cluster started with `--security sasl_ssl` adds to an ssl one: its Kafka
listeners, the brokers' and the controllers', are SASL_SSL (TLS with the cluster's
certificates, then SCRAM-SHA-512), the authorizer is on, and an administrator signs in as a
super user.

Rules:
- The administrator is `User:admin` with SCRAM-SHA-512. Its password is made by the start of a
  new cluster (`secrets`), kept in `DIR/admin.password` (readable by its owner only) and
  written in clear nowhere else but `DIR/client.properties` (its owner's only too); no command
  prints it.
- The credential reaches the metadata log as a bootstrap record (`bootstrap.scram.credentials`
  in every node's server.properties: salt, stored key and server key, never the password), so
  it exists before any client could create one; a restart keeps the log's.
- The nodes run Kafka's StandardAuthorizer with `allow.everyone.if.no.acl.found=false`; the
  super users are the administrator and every node by its certificate's principal
  (`node_principal`), so the nodes' own traffic is never refused by an ACL.
- A missing or unreadable password file is a `ReplogError` naming it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable

from replog.cli.cluster_tls_files import ClusterTlsFiles, node_principal
from replog.cli.whole_file import replace_whole
from replog.errors import ReplogError

ADMIN_USER = "admin"
ADMIN_MECHANISM = "SCRAM-SHA-512"
ADMIN_ITERATIONS = 8192
PASSWORD_FILE = "admin.password"
PASSWORD_BYTES = 24  # 32 url-safe characters
SALT_BYTES = 24
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def admin_password_path(directory: str) -> str:
    return os.path.join(directory, PASSWORD_FILE)


def new_admin_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


def write_admin_password(directory: str, password: str) -> None:
    """Keep `password` in the cluster's password file, its owner's only from its creation."""
    write_private(admin_password_path(directory), password + "\n")


def read_admin_password(directory: str) -> str:
    path = admin_password_path(directory)
    try:
        with open(path, encoding="utf-8") as f:
            password = f.read().strip()
    except OSError as exc:
        raise ReplogError(
            f"cannot read the administrator's password in {path}: {exc.strerror or exc} (start "
            "the cluster with --fresh to make a new one)"
        ) from None
    if not password:
        raise ReplogError(f"{path} is empty: start the cluster with --fresh to make a new one")
    return password


def bootstrap_credential_properties(password: str) -> dict[str, str]:
    """The server.properties key that gives a new cluster the administrator's credential."""
    from replog.common.scram_mechanism import MECHANISM_BY_NAME
    from replog.security.scram_credential import derive_credential
    from replog.security.scram_store import record_of
    from replog.server.config.scram_bootstrap_config import (
        BOOTSTRAP_SCRAM_CREDENTIALS,
        format_bootstrap_credentials,
    )

    mechanism = MECHANISM_BY_NAME[ADMIN_MECHANISM]
    salt = secrets.token_bytes(SALT_BYTES)
    credential = derive_credential(mechanism, password, salt, ADMIN_ITERATIONS)
    record = record_of(ADMIN_USER, mechanism, credential)
    return {BOOTSTRAP_SCRAM_CREDENTIALS: format_bootstrap_credentials([record])}


def sasl_ssl_node_properties(
    files: ClusterTlsFiles, node_id: int, node_ids: Iterable[int]
) -> dict[str, str]:
    """Node `node_id`'s settings in a sasl_ssl cluster of `node_ids`: its keystore (no client
    certificate asked: SASL says who the client is), SCRAM-SHA-512, the authorizer."""
    super_users = [f"User:{ADMIN_USER}", *(node_principal(i) for i in node_ids)]
    return {
        "ssl.keystore.location": files.node_keystore(node_id),
        "ssl.truststore.location": files.ca_certificate,
        "ssl.client.auth": "none",
        "sasl.enabled.mechanisms": ADMIN_MECHANISM,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(super_users),
    }


def sasl_ssl_client_properties(files: ClusterTlsFiles, directory: str) -> dict[str, str]:
    """The security keys of a sasl_ssl cluster's client.properties (librdkafka's names)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": ADMIN_MECHANISM,
        "sasl.username": ADMIN_USER,
        "sasl.password": read_admin_password(directory),
        "ssl.ca.location": files.ca_certificate,
    }


def write_private(path: str, text: str) -> None:
    """Replace `path` by `text` whole, readable by its owner only from its creation; an
    `OSError` is a `ReplogError` naming `path`."""
    try:
        replace_whole(path, text.encode(), private=True)
    except OSError as exc:
        raise ReplogError(f"cannot write {path}: {exc.strerror or exc}") from None
