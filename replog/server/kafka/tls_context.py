"""The TLS context of an SSL Kafka listener, from its settings (`config/tls_config.py`).

Rules: TLS 1.2 at least; the key and chain from the keystore file; with a truststore, client
certificates checked against it, asked for or required by `ssl.client.auth`. A file that is
missing or unreadable, or a key that does not match its certificate or does not decrypt,
raises `ConfigError` naming the setting and the file.

Rotation (`RotatingServerContext`): the keystore and truststore files are looked at when a
client's hello arrives, and a new context is built from them once they changed
(`wire.watched_files`): new connections get the new certificate, open ones keep theirs; files
that do not load leave the previous context in use, with one WARNING naming the cause.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import Any

from replog.errors import ConfigError
from replog.server.config.tls_config import KEYSTORE_LOCATION, TRUSTSTORE_LOCATION, TlsConfig
from replog.wire.watched_files import WatchedFiles

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


class RotatingServerContext:
    """A listener's SSL context whose material follows its files (module docstring)."""

    def __init__(self, config: TlsConfig, listener: str) -> None:
        paths = [config.keystore_location]
        if config.truststore_location is not None:
            paths.append(config.truststore_location)
        try:
            self._contexts = WatchedFiles(
                paths, lambda: server_ssl_context(config), f"Kafka listener {listener}'s TLS"
            )
        except OSError as exc:  # a file missing: named by its setting
            key = KEYSTORE_LOCATION if exc.filename == config.keystore_location else None
            key = key or TRUSTSTORE_LOCATION
            raise ConfigError(f"{key}={exc.filename}: cannot read it: {exc.strerror}") from None
        self.listening = self._contexts.current()
        self.listening.sni_callback = self._newest

    @property
    def loads(self) -> int:
        return self._contexts.loads

    def _newest(self, ssl_object: ssl.SSLObject, _name: str | None, _context: Any) -> None:
        newest = self._contexts.current()
        if newest is not self.listening:
            with contextlib.suppress(ssl.SSLError, ValueError):
                ssl_object.context = newest
