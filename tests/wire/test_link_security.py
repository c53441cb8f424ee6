"""Mutual TLS on the internal links (`link_security`, `link_peer_check`, `watched_files`), in
one process: a gRPC server and a framed listener serving with a node's material, dialled by a
node, a trusted client that is no node, a stranger and a plaintext peer; material rotated in
place and a bad replacement kept out."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from replog.errors import ConfigError
from replog.security.principal_mapping import PrincipalMapper
from replog.wire import framed_wire, link_security, watched_files
from replog.wire.link_peer_check import PeerCheck, PeerCheckInterceptor
from replog.wire.link_security import LinkSecurity, LinkSettings, installed_while
from tests.tls_certificates import Pki, presented_certificate_to

NODE = "User:CN=node-1,O=replog tests"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    pki = Pki.create(tmp_path / "pki")
    pki.keystore("node-1")
    pki.keystore("client")
    return pki


def settings(pki: Pki, name: str = "node-1") -> LinkSettings:
    return LinkSettings(
        keystore_location=str(pki.directory / f"{name}.pem"),
        truststore_location=str(pki.truststore),
        node_principals=frozenset({NODE}),
        principal_mapper=PrincipalMapper.from_rules(),
    )


def _echo_service() -> grpc.GenericRpcHandler:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def echoes(
        requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    return grpc.method_handlers_generic_handler(
        "test.pkg.Probe",
        {
            "Echo": grpc.unary_unary_rpc_method_handler(echo),
            "Echoes": grpc.stream_stream_rpc_method_handler(echoes),
        },
    )


@contextlib.asynccontextmanager
async def node_server(security: LinkSecurity) -> AsyncIterator[str]:
    """A gRPC server as a node's: the security's credentials, nodes only."""
    server = grpc.aio.server(interceptors=[PeerCheckInterceptor(PeerCheck(security.settings))])
    server.add_generic_rpc_handlers((_echo_service(),))
    port = server.add_secure_port("127.0.0.1:0", security.server_credentials())
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def echo(address: str, security: LinkSecurity | None, stream: bool = False) -> bytes:
    with installed_while(security):
        channel = link_security.grpc_channel(address)
    async with channel:
        if stream:
            call = channel.stream_stream("/test.pkg.Probe/Echoes")()
            await call.write(b"hi")
            answer: bytes = await call.read()
            await call.done_writing()
            return answer
        answered: bytes = await channel.unary_unary("/test.pkg.Probe/Echo")(b"hi", timeout=10)
        return answered


async def presented_certificate(address: str, pki: Pki) -> bytes:
    """The certificate the server at `address` presents to a TLS client with `client`'s (a
    blocking handshake, on a thread: the server shares this event loop)."""
    return await asyncio.to_thread(_presented_certificate, address, pki)


def _presented_certificate(address: str, pki: Pki) -> bytes:
    client = pki.directory / "client"
    return presented_certificate_to(address, pki.truststore, client.with_suffix(".pem"), "h2")


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` whole, its modification time moved on (as a rotation writes it)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


@pytest.mark.asyncio
async def test_only_nodes_get_in_and_each_refusal_is_said_once(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = LinkSecurity(settings(pki))
    stranger_pki = Pki.create(tmp_path / "stranger")
    stranger_pki.keystore("node-1")  # the same subject, another CA; it trusts the server's
    stranger = LinkSecurity(
        dataclasses.replace(settings(stranger_pki), truststore_location=str(pki.truststore))
    )
    caplog.set_level(logging.WARNING, "replog.server.tls")
    async with node_server(node) as address:
        assert await echo(address, node) == b"hi"
        assert await echo(address, node, stream=True) == b"hi"
        client = LinkSecurity(settings(pki, "client"))
        for stream in (False, True, False):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await echo(address, client, stream=stream)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "User:CN=client,O=replog tests is not a node" in (refused.value.details() or "")
        said = [r.getMessage() for r in caplog.records if "is not a node" in r.getMessage()]
        assert len(said) == 1 and "internal link from 127.0.0.1:" in said[0], said
        for peer in (stranger, None):  # an untrusted certificate, then plaintext
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await echo(address, peer)
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert await echo(address, node) == b"hi"  # the server goes on


@pytest.mark.asyncio
async def test_a_rotated_keystore_serves_new_connections_and_a_bad_one_is_kept_out(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keystore = pki.directory / "node-1.pem"
    rotated = Pki(tmp_path / "rotated", pki.ca)  # node-1 again: a new key, the same CA
    rotated.directory.mkdir()
    node = LinkSecurity(settings(pki))
    async with node_server(node) as address:
        first = await presented_certificate(address, pki)
        assert first == der(pki.directory / "node-1.crt")
        with installed_while(node):
            channel = link_security.grpc_channel(address)
        async with channel:
            call = channel.unary_unary("/test.pkg.Probe/Echo")
            assert await call(b"before", timeout=10) == b"before"
            replace_file(keystore, rotated.keystore("node-1").read_bytes())
            # A new connection gets the new certificate; the open channel goes on.
            assert await presented_certificate(address, pki) == der(
                rotated.directory / "node-1.crt"
            )
            assert await call(b"after", timeout=10) == b"after"
        assert await echo(address, node) == b"hi"  # dialled with the new client certificate
        assert node.loads == 2
        # A half-written file: refused once, logged, the rotated material stays in use.
        caplog.set_level(logging.WARNING, "replog.server.tls")
        replace_file(keystore, (rotated.directory / "node-1.key").read_bytes())
        assert await presented_certificate(address, pki) == der(rotated.directory / "node-1.crt")
        assert await echo(address, node) == b"hi"
        warned = [r.getMessage() for r in caplog.records if "keeping" in r.getMessage()]
        assert len(warned) == 1 and "node-1.pem" in warned[0], warned
        assert node.loads == 2


def test_material_that_does_not_load_is_refused_at_install(pki: Pki) -> None:
    pki.keystore("locked", password=b"secret")
    with pytest.raises(ConfigError, match=r"locked\.pem: the key is encrypted; set ssl\.key\."):
        LinkSecurity(settings(pki, "locked"))
    wrong = dataclasses.replace(settings(pki, "locked"), key_password="guess")
    with pytest.raises(ConfigError, match=r"locked\.pem: cannot decrypt the key with ssl\.key"):
        LinkSecurity(wrong)
    with pytest.raises(ConfigError, match=r"client\.key: expected one private key and its"):
        LinkSecurity(
            LinkSettings(
                keystore_location=str(pki.directory / "client.key"),
                truststore_location=str(pki.truststore),
                node_principals=frozenset({NODE}),
                principal_mapper=PrincipalMapper.from_rules(),
            )
        )


class _Closed(asyncio.Protocol):
    def __init__(self) -> None:
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(None)


class _Listener(framed_wire.FramedListener):
    """Says, for each connection, whether it was let in."""

    def __init__(self) -> None:
        super().__init__()
        self.decisions: list[str] = []

    def _connection(self) -> asyncio.Protocol:
        listener = self

        class Inbound(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                refused = listener.refuses(transport, "127.0.0.1:1")
                listener.decisions.append("refused" if refused else "admitted")
                transport.close()

        return Inbound()


@pytest.mark.asyncio
async def test_framed_connections_are_tls_and_let_in_nodes_only(pki: Pki) -> None:
    node = LinkSecurity(settings(pki))
    client = LinkSecurity(settings(pki, "client"))
    listener = _Listener()
    listener.peer_check = PeerCheck(node.settings)
    with installed_while(node):
        port = await listener.start("127.0.0.1", 0)
    try:
        for count, security in enumerate((node, client), start=1):
            with installed_while(security):
                transport, _ = await framed_wire.connect(asyncio.Protocol, "127.0.0.1", port)
            async with asyncio.timeout(10):
                while len(listener.decisions) < count:
                    await asyncio.sleep(0.01)
            transport.close()
        assert listener.decisions == ["admitted", "refused"]  # the node's, then the client's
        # Plaintext bytes to the TLS listener: the listener closes the connection unserved.
        closed = _Closed()
        with installed_while(None):
            transport, _ = await framed_wire.connect(lambda: closed, "127.0.0.1", port)
        transport.write(b"RFCH" + bytes(64))
        async with asyncio.timeout(10):
            await closed.lost
        assert listener.decisions == ["admitted", "refused"]
    finally:
        await listener.close()


@pytest.mark.asyncio
async def test_an_encrypted_key_serves_with_its_password_and_is_never_shown(pki: Pki) -> None:
    """gRPC takes no password: the key is decrypted in the process and handed over as bytes,
    and neither the password nor the decrypted key appear in what may be logged."""
    pki.keystore("node-1", password=b"secret")
    locked = dataclasses.replace(settings(pki), key_password="secret")
    node = LinkSecurity(locked)
    assert b"ENCRYPTED" not in node.material().key
    assert "secret" not in repr(locked) and "PRIVATE" not in repr(node.material())
    async with node_server(node) as address:
        assert await echo(address, node) == b"hi"
    assert node.context("server") is not None  # the framed listeners load it too


def test_a_same_size_replacement_with_the_old_mtime_is_seen(tmp_path: Path) -> None:
    """A file replaced by a rename, same size, its modification time set back: another inode
    (and change time), so another stamp."""
    path = tmp_path / "store.pem"
    path.write_bytes(b"A" * 64)
    before = os.stat(path)
    seen = watched_files.stamp([str(path)])
    replacement = tmp_path / "store.pem.new"
    replacement.write_bytes(b"B" * 64)
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert watched_files.stamp([str(path)]) != seen


def test_the_check_and_the_contexts_load_the_bytes_read_not_the_file_again(pki: Pki) -> None:
    """The material read is what is checked and served: the keystore file replaced after the
    read (here by garbage) changes nothing until it is read again."""
    security = LinkSecurity(settings(pki))
    material = security.material()
    keystore = Path(security.settings.keystore_location)
    keystore.write_bytes(b"not a keystore")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    link_security._load_into(context, security.settings, material)
    assert context.cert_store_stats()["x509"] >= 1


def test_without_memfd_the_bytes_go_through_a_private_file_removed_at_once(
    pki: Pki, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    security = LinkSecurity(settings(pki))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    link_security._load_into(context, security.settings, security.material())
    assert context.cert_store_stats()["x509"] >= 1
    assert list(scratch.iterdir()) == []


def test_a_node_and_cluster_start_load_cryptography_only_for_an_encrypted_key() -> None:
    """The key decryption's library (tens of ms of every node's and `cluster start`'s start-up,
    three nodes sharing two cores at a restart) loads only when a key is encrypted: importing
    the node's runtime and the controller client leaves it out."""
    probe = (
        "import sys\n"
        "import replog.server.process.node, replog.admin.controller_client\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
