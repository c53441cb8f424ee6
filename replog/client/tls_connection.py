"""The TLS context of a client's connections, from its security settings (`tls_settings`).

`client_ssl_context(config)` is None under PLAINTEXT; under SSL it is the context every
connection of the client dials with (`wire.kafka_connection`, which names a failed handshake
through `wire.tls_handshake`).

Rules: TLS 1.2 at least (as the node's listener); the broker's certificate is checked against
the trusted certificates and, unless turned off, for the host dialled; the client's certificate
is presented when one is set. A file that is missing or unreadable, PEM that does not parse, a
key that does not match its certificate or does not decrypt: a `ConfigError` naming the key and
the file, raised when the client is built, not at its first connection. Inline key material is
loaded through a file of its own in a private temporary directory (OpenSSL reads keys from
files only), removed at once. Inline PEM may come joined on one line (a properties file's
continued lines lose their line breaks; Kafka reads such PEM): each block is laid out again in
lines of 64 characters before OpenSSL reads it.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping

from replog.client.tls_settings import SECURITY_KEYS, ClientTls, Material, TlsSettings, client_tls
from replog.errors import ConfigError


def client_ssl_context(config: TlsSettings) -> ssl.SSLContext | None:
    """The TLS context of a client built from `config` (module docstring); None: plaintext."""
    tls = client_tls(config)
    return None if tls is None else ssl_context(tls)


def security_ssl_context(properties: Mapping[str, object]) -> ssl.SSLContext | None:
    """`client_ssl_context` of the security settings among `properties` (a command's client
    config, any kind's keys; the others are left out)."""
    from replog.client.config import admin_config

    security = {k: v for k, v in properties.items() if k.strip() in SECURITY_KEYS}
    return client_ssl_context(admin_config(security))


def ssl_context(tls: ClientTls) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = tls.verify and tls.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
    _load_trust(context, tls.trust)
    if tls.certificate is not None:
        _load_certificate(context, tls.certificate, tls.key, tls.key_password)
    return context


def _load_trust(context: ssl.SSLContext, trust: Material | None) -> None:
    if trust is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    try:
        if trust.pem is not None:
            context.load_verify_locations(cadata=pem_lines(trust.pem))
        elif trust.path is not None and os.path.isdir(trust.path):
            context.load_verify_locations(capath=trust.path)
        else:
            context.load_verify_locations(cafile=trust.path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{_named(trust)}: cannot load the trusted certificates: {_cause(exc)}"
        ) from None


def _load_certificate(
    context: ssl.SSLContext, chain: Material, key: Material | None, password: str | None
) -> None:
    what = _named(chain) if key is None else f"{_named(chain)} with {_named(key)}"
    try:
        with tempfile.TemporaryDirectory(prefix="replog-tls-") as private:
            context.load_cert_chain(
                _as_file(chain, private, "chain.pem"),
                None if key is None else _as_file(key, private, "key.pem"),
                password=password,
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{what}: cannot load the client certificate and key: {_cause(exc)} (a key that "
            "does not match the certificate, or an encrypted key without the right "
            "ssl.key.password, fails so too)"
        ) from None


def _as_file(material: Material, directory: str, name: str) -> str:
    """The path of `material`'s PEM: its own file, or a file in `directory` (0600, in a
    directory only this user can enter) holding its inline PEM."""
    if material.path is not None:
        return material.path
    assert material.pem is not None
    path = os.path.join(directory, name)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as out:
        out.write(pem_lines(material.pem))
    return path


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def pem_lines(text: str) -> str:
    """`text`'s PEM blocks, each body in lines of 64 characters (module docstring); text with
    no block is returned as it is, for OpenSSL to refuse naming it."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        if ":" in match.group(2):  # RFC 1421 headers (an old encrypted key): lines matter
            return text
        label, body = match.group(1), "".join(match.group(2).split())
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(blocks) + "\n" if blocks else text


def _named(material: Material) -> str:
    return f"{material.key}={material.path}" if material.path is not None else material.key


def _cause(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return exc.reason.lower().replace("_", " ")
    return exc.strerror.lower() if exc.strerror else str(exc)
