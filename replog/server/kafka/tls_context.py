"""The TLS context of an SSL Kafka listener, from its settings (`config/tls_config.py`).

Rules: TLS 1.2 at least; the key and chain from the keystore file; with a truststore, client
certificates checked against it, asked for or required by `ssl.client.auth`. A file that is
missing or unreadable, or a key that does not match its certificate or does not decrypt,
raises `ConfigError` naming the setting and the file.
"""

from __future__ import annotations

import ssl

from replog.errors import ConfigError
from replog.server.config.tls_config import KEYSTORE_LOCATION, TRUSTSTORE_LOCATION, TlsConfig

VERIFY_MODES = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_ssl_context(config: TlsConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.keystore_location, password=config.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{KEYSTORE_LOCATION}={config.keystore_location}: cannot load the key and "
            f"certificate chain: {exc}"
        ) from None
    if config.truststore_location is not None:
        try:
            context.load_verify_locations(cafile=config.truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{TRUSTSTORE_LOCATION}={config.truststore_location}: cannot load the trusted "
                f"certificates: {exc}"
            ) from None
    context.verify_mode = VERIFY_MODES[config.client_auth]
    return context
