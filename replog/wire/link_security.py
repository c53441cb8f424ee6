"""Mutual TLS on the links inside a cluster: the node's gRPC listener and every channel to it,
the Raft Fetch and metadata append connections.

Theory of operation: a node whose internal listener is SSL (`listener.security.protocol.map`;
`server/config/internal_tls_config`) installs one `LinkSecurity` for its process (`install`).
Every outbound internal link dials with it (`grpc_channel`, `blocking_grpc_channel`,
`framed_client_context`) and every internal listener serves with it
(`LinkSecurity.server_credentials`, `framed_server_context`, `link_peer_check`). With none
installed every link is plaintext. One per process: a process runs one node, and the CLI
commands that speak a local cluster's internal gRPC install the cluster's while they run.

Rules:
- Material: a PEM keystore (private key and certificate chain) and a PEM truststore, read at
  install and again when either file changes (`watched_files`), looked at when a connection is
  made: new connections use the new material, open ones keep theirs (Kafka reloads its
  keystore on a config alter; a file replaced in place is replog's alter).
- An encrypted key (`ssl.key.password`, Kafka's) is decrypted in the process, since gRPC takes
  no password: gRPC is handed the decrypted key's bytes, which are never logged or written
  to a disk on Linux. The TLS contexts of the framed links load the same bytes read (OpenSSL
  loads a chain from a file only: an in-memory file; without memfd a temporary file of the
  owner's only, removed once loaded), so what is checked is what is served.
- New material that does not load (a key that does not match its certificate, a file half
  written, an encrypted key without its password or with a wrong one) is refused with one
  WARNING naming the file and the cause; the previous material stays until the files change
  again. At install it is a `ConfigError`.
- Both ends present their certificate and check the other's against the truststore; the
  dialling end checks that the certificate names the host it dialled (the nodes' certificates
  name their hosts, as Kafka's `ssl.endpoint.identification.algorithm=https` asks).
- Who is let in once the handshake passed is `link_peer_check`'s: the nodes' principals only.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from replog.errors import ConfigError
from replog.security.principal_mapping import PrincipalMapper
from replog.wire.watched_files import WatchedFiles

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----\s*", re.DOTALL)


@dataclass(frozen=True, slots=True)
class LinkMaterial:
    """One reading of the files: the key and chain (PEM) and the trusted certificates (PEM)."""

    key: bytes = field(repr=False)  # unencrypted PEM: never logged
    chain: bytes
    trust: bytes


@dataclass(frozen=True, slots=True)
class LinkSettings:
    """What a node's internal links run with (pure values; `internal_tls_config` checks them):
    the files, the keys that named them (for messages), and who is a node."""

    keystore_location: str
    truststore_location: str
    node_principals: frozenset[str]
    principal_mapper: PrincipalMapper
    keystore_key: str = "ssl.keystore.location"
    truststore_key: str = "ssl.truststore.location"
    key_password: str | None = field(default=None, repr=False)
    key_password_key: str = "ssl.key.password"
    listener_name: str = "INTERNAL"  # the internal listener's, for metrics


class LinkSecurity:
    """The material of one process's internal links, read again when its files change."""

    def __init__(self, settings: LinkSettings) -> None:
        self.settings = settings
        try:
            self._material = WatchedFiles(
                (settings.keystore_location, settings.truststore_location),
                self._read,
                "internal links' TLS",
            )
        except OSError as exc:
            raise ConfigError(
                f"{settings.keystore_key}={settings.keystore_location}, "
                f"{settings.truststore_key}={settings.truststore_location}: cannot read: {exc}"
            ) from None
        except ValueError as exc:  # names its key already
            raise ConfigError(str(exc)) from None
        self._contexts: dict[str, tuple[LinkMaterial, ssl.SSLContext]] = {}

    def material(self) -> LinkMaterial:
        """The current material (module rules)."""
        return self._material.current()

    @property
    def loads(self) -> int:
        """How many times the material was read (the first included)."""
        return self._material.loads

    def _read(self) -> LinkMaterial:
        """The files' material, checked as OpenSSL loads it; ValueError naming the file
        otherwise."""
        settings = self.settings
        where = f"{settings.keystore_key}={settings.keystore_location}"
        with open(settings.keystore_location, "rb") as f:
            keystore = f.read()
        with open(settings.truststore_location, "rb") as f:
            trust = f.read()
        keys, certificates = [], []
        for block in _PEM_BLOCK.finditer(keystore):
            kind = block.group(1)
            if kind == b"CERTIFICATE":
                certificates.append(block.group(0))
            elif kind.endswith(b"PRIVATE KEY"):
                keys.append(block.group(0))
        if len(keys) != 1 or not certificates:
            raise ValueError(
                f"{where}: expected one private key and its certificate chain (PEM), found "
                f"{len(keys)} key(s) and {len(certificates)} certificate(s)"
            )
        if _PEM_BLOCK.search(trust) is None:
            raise ValueError(
                f"{settings.truststore_key}={settings.truststore_location}: no PEM certificate"
            )
        key = _decrypted(keys[0], settings, where)
        material = LinkMaterial(key, b"".join(certificates), trust)
        _load_into(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings, material)  # the check
        return material

    # --- gRPC ---------------------------------------------------------------------------------

    def channel_credentials(self) -> grpc.ChannelCredentials:
        material = self.material()
        return grpc.ssl_channel_credentials(
            root_certificates=material.trust,
            private_key=material.key,
            certificate_chain=material.chain,
        )

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials that hand gRPC new material at a handshake after the files changed."""
        served = [self.material()]

        def configuration(material: LinkMaterial) -> Any:
            return grpc.ssl_server_certificate_configuration(
                [(material.key, material.chain)], root_certificates=material.trust
            )

        def fetch() -> Any:
            material = self.material()
            if material is served[0]:
                return None  # unchanged: gRPC keeps what it has
            served[0] = material
            return configuration(material)

        return grpc.dynamic_ssl_server_credentials(
            configuration(served[0]), fetch, require_client_authentication=True
        )

    # --- framed TCP ---------------------------------------------------------------------------

    def context(self, side: str) -> ssl.SSLContext:
        """An SSL context of the current material for `side` "server" or "client"."""
        material = self.material()
        cached = self._contexts.get(side)
        if cached is not None and cached[0] is material:
            return cached[1]
        if side == "server":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.verify_mode = ssl.CERT_REQUIRED
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # checks the host name too
        _load_into(context, self.settings, material)
        self._contexts[side] = (material, context)
        return context

    def listening_context(self) -> ssl.SSLContext:
        """The context a framed listener serves with: each new connection is switched to the
        newest server context at its hello (`sni_callback`), so a rotation needs no restart."""
        listening = self.context("server")

        def newest(ssl_object: ssl.SSLObject, _name: str | None, _context: Any) -> None:
            # A keystore replaced again since its material was read fails here: the
            # connection keeps the context it has, and the next look loads the new file.
            with contextlib.suppress(ValueError):
                ssl_object.context = self.context("server")

        listening.sni_callback = newest
        return listening


def _load_into(context: ssl.SSLContext, settings: LinkSettings, material: LinkMaterial) -> None:
    """Load `material` into `context` (TLS 1.2 at least); ValueError naming the file."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        with _in_memory_file(material.chain + material.key) as path:
            context.load_cert_chain(path)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"{settings.keystore_key}={settings.keystore_location}: cannot load the key and "
            f"certificate chain: {exc}"
        ) from None
    try:
        context.load_verify_locations(cadata=material.trust.decode("ascii", "replace"))
    except ssl.SSLError as exc:
        raise ValueError(
            f"{settings.truststore_key}={settings.truststore_location}: cannot load the "
            f"trusted certificates: {exc}"
        ) from None


@contextlib.contextmanager
def _in_memory_file(data: bytes) -> Iterator[str]:
    """A path to `data` for OpenSSL, which loads a chain from a file only, so the bytes checked
    and served are those read: an anonymous in-memory file (memfd, Linux), so the decrypted
    key is never written to a disk; elsewhere a temporary file of the owner's only, removed
    once loaded."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("replog-link-keystore", os.MFD_CLOEXEC)
        path = f"/proc/self/fd/{fd}"
    else:
        fd, path = tempfile.mkstemp(prefix="replog-link-keystore-")
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        yield path
    finally:
        os.close(fd)
        if not path.startswith("/proc/"):
            os.unlink(path)


def _decrypted(key: bytes, settings: LinkSettings, where: str) -> bytes:
    """`key` (PEM) unencrypted, with the password when it is encrypted; ValueError naming the
    file and the password's key otherwise."""
    if b"ENCRYPTED" not in key:
        return key
    if settings.key_password is None:
        raise ValueError(
            f"{where}: the key is encrypted; set {settings.key_password_key} to its password"
        )
    # Imported here: the library costs every node's and `cluster start`'s start-up tens of ms,
    # and only an encrypted key needs it.
    from cryptography.hazmat.primitives import serialization

    try:
        loaded = serialization.load_pem_private_key(key, settings.key_password.encode())
    except (ValueError, TypeError) as exc:  # a wrong password, or a key it cannot read
        raise ValueError(
            f"{where}: cannot decrypt the key with {settings.key_password_key}: {exc}"
        ) from None
    return loaded.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


_installed: LinkSecurity | None = None


def install(security: LinkSecurity | None) -> None:
    """Make `security` what this process's internal links use (None: plaintext)."""
    global _installed
    _installed = security


def installed() -> LinkSecurity | None:
    return _installed


@contextlib.contextmanager
def installed_while(security: LinkSecurity | None) -> Iterator[None]:
    """`security` installed within, what was installed before put back after."""
    before = _installed
    install(security)
    try:
        yield
    finally:
        install(before)


def grpc_channel(address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """An asyncio channel to a node's internal listener, TLS when installed."""
    security = _installed
    if security is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, security.channel_credentials(), options=list(options))


def blocking_grpc_channel(address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """`grpc_channel`'s blocking kind (the CLI's)."""
    security = _installed
    if security is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, security.channel_credentials(), options=list(options))


def framed_client_context() -> ssl.SSLContext | None:
    """What a framed connection dials with (None: plaintext)."""
    return None if _installed is None else _installed.context("client")


def framed_server_context() -> ssl.SSLContext | None:
    """What a framed listener serves with (None: plaintext)."""
    return None if _installed is None else _installed.listening_context()
