"""replog's client over TLS, against small in-process servers: the security settings by Kafka's
and librdkafka's names, the TLS context they make (a missing file or a key that does not match
names the key), and what a failed handshake is called: an untrusted, expired or misnamed broker
certificate and a refused client certificate are `SslAuthenticationError`s; a plaintext client
at a TLS port and a TLS client at a plaintext Kafka port are `SecurityProtocolMismatchError`s,
raised at once, not retried. Real clusters: tests/cluster/test_cluster_ssl.py."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from replog.cli.command_config import read_command_config
from replog.client.config import admin_config, check_client_properties, producer_config
from replog.client.tls_connection import client_ssl_context, pem_lines
from replog.client.tls_settings import client_tls
from replog.errors import (
    ConfigError,
    NotAKafkaListenerError,
    SecurityProtocolMismatchError,
    SslAuthenticationError,
)
from replog.spark.options import Mode, parse_options
from replog.wire.kafka_connection import KafkaConnection
from tests.tls_certificates import Pki


def error_of(build: object, config: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as raised:
        build(config)  # type: ignore[operator]
    return str(raised.value)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    pki = Pki.create(tmp_path / "pki")
    pki.keystore("broker")
    pki.keystore("app")
    return pki


def tls_config(pki: Pki, **more: object) -> dict[str, object]:
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.truststore),
        "ssl.certificate.location": str(pki.directory / "app.crt"),
        "ssl.key.location": str(pki.directory / "app.key"),
        **more,
    }


# --- settings ----------------------------------------------------------------------------------


def test_kafka_and_librdkafka_names_resolve_to_one_tls(pki: Pki) -> None:
    librdkafka = client_tls(admin_config(tls_config(pki)))
    assert librdkafka is not None and librdkafka.trust is not None
    assert librdkafka.trust.path == str(pki.truststore) and librdkafka.check_hostname
    kafka = client_tls(
        admin_config(
            {
                "security.protocol": "ssl",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(pki.truststore),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(pki.directory / "app.pem"),
                "ssl.endpoint.identification.algorithm": "",
            }
        )
    )
    assert kafka is not None and kafka.certificate is not None and kafka.key is None
    assert kafka.certificate.key == "ssl.keystore.location" and not kafka.check_hostname
    # PLAINTEXT ignores the ssl settings, as Kafka's and librdkafka's clients do.
    assert client_tls(admin_config({"ssl.ca.location": "/nowhere.pem"})) is None


def test_contradicting_or_unsupported_tls_settings_name_the_keys(pki: Pki) -> None:
    ssl_on = {"security.protocol": "SSL"}
    both = {**ssl_on, "ssl.ca.location": "a.pem", "ssl.truststore.location": "b.pem"}
    assert error_of(producer_config, both) == (
        "the trusted certificates set twice: ssl.truststore.location and ssl.ca.location; "
        "set one of them"
    )
    half = {**ssl_on, "ssl.key.location": "k.pem"}
    assert "ssl.key.location is set without the certificate" in error_of(admin_config, half)
    chain = {**ssl_on, "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----"}
    assert "needs ssl.keystore.key" in error_of(admin_config, chain)
    mixed = {**ssl_on, "ssl.keystore.location": "s.pem", "ssl.key.location": "k.pem"}
    assert "holds the key already" in error_of(admin_config, mixed)
    assert "convert the store to PEM" in error_of(admin_config, {"ssl.keystore.type": "JKS"})
    sasl_ssl = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert "sasl.username: required" in error_of(admin_config, sasl_ssl)
    assert "accepted values: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in error_of(
        admin_config, {"security.protocol": "x"}
    )
    https = {"ssl.endpoint.identification.algorithm": "http"}
    assert "https, or empty" in error_of(admin_config, https)


def test_a_command_config_file_is_checked_naming_the_file_and_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    with pytest.raises(ConfigError, match=f"{missing}: cannot read it: No such file"):
        read_command_config(str(missing))
    typo = tmp_path / "typo.properties"
    typo.write_text("security.protocol=SSL\nssl.ca.locaton=/ca.pem\n")
    with pytest.raises(ConfigError) as raised:
        read_command_config(str(typo))
    assert str(raised.value) == (
        f"{typo}: unknown client config 'ssl.ca.locaton'; did you mean 'ssl.ca.location'?"
    )
    bad = tmp_path / "bad.properties"
    bad.write_text("linger.ms=soon\n")
    with pytest.raises(ConfigError, match=f"{bad}: linger.ms='soon': must be an integer"):
        read_command_config(str(bad))
    broken = tmp_path / "broken.properties"
    broken.write_text("just words\n")
    with pytest.raises(ConfigError, match=f"{broken}:1: expected key=value"):
        read_command_config(str(broken))
    # One file for every client kind: each takes its own keys, an admin no producer's.
    shared = tmp_path / "client.properties"
    shared.write_text("security.protocol=SSL\nssl.ca.location=/ca.pem\nlinger.ms=5\ngroup.id=g\n")
    config = read_command_config(str(shared))
    assert config.for_kind("admin") == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}
    assert config.for_kind("producer")["linger.ms"] == "5"
    assert "linger.ms" not in config.for_kind("consumer")
    check_client_properties({"enable.ssl.certificate.verification": "false"}, "x")


def test_the_tls_context_names_the_key_and_file_it_cannot_load(pki: Pki) -> None:
    missing = tls_config(pki, **{"ssl.ca.location": str(pki.directory / "none.pem")})
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location=.*none\.pem: cannot load"):
        client_ssl_context(admin_config(missing))
    other = Pki.create(pki.directory / "other")
    other.keystore("stranger")
    mismatched = tls_config(pki, **{"ssl.key.location": str(other.directory / "stranger.key")})
    with pytest.raises(ConfigError) as raised:
        client_ssl_context(admin_config(mismatched))
    assert "ssl.certificate.location=" in str(raised.value)
    assert "ssl.key.location=" in str(raised.value) and "key values mismatch" in str(raised.value)
    pki.keystore("locked", password=b"secret")
    locked = tls_config(
        pki,
        **{
            "ssl.certificate.location": str(pki.directory / "locked.crt"),
            "ssl.key.location": str(pki.directory / "locked.key"),
            "ssl.key.password": "wrong",
        },
    )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        client_ssl_context(admin_config(locked))
    locked["ssl.key.password"] = "secret"
    assert isinstance(client_ssl_context(admin_config(locked)), ssl.SSLContext)


def test_inline_pem_loads_even_joined_on_one_line(pki: Pki) -> None:
    def joined(path: Path) -> str:
        return " ".join(path.read_text().split("\n"))  # a properties file's continued lines

    inline = {
        "security.protocol": "SSL",
        "ssl.truststore.certificates": joined(pki.truststore),
        "ssl.keystore.certificate.chain": joined(pki.directory / "app.crt"),
        "ssl.keystore.key": joined(pki.directory / "app.key"),
    }
    context = client_ssl_context(admin_config(inline))
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert len(context.get_ca_certs()) == 1
    text = (pki.directory / "app.crt").read_text()
    assert pem_lines(joined(pki.directory / "app.crt")) == text
    assert pem_lines("no pem here") == "no pem here"


# --- handshakes --------------------------------------------------------------------------------


def server_context(pki: Pki, keystore: str = "broker", require: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.directory / f"{keystore}.pem"))
    if require:
        context.load_verify_locations(cafile=str(pki.truststore))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def fake_kafka(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A Kafka listener as far as a first request goes: an oversized frame (a TLS hello read as
    a size) closes the connection, as a broker's `socket.request.max.bytes` check does; a
    request is answered with a frame of its correlation id and error code 0."""
    try:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        if 0 < size <= 1 << 20:
            request = await reader.readexactly(size)
            writer.write(struct.pack(">iih", 6, struct.unpack_from(">i", request, 4)[0], 0))
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def serving(context: ssl.SSLContext | None) -> AsyncIterator[str]:
    server = await asyncio.start_server(fake_kafka, "127.0.0.1", 0, ssl=context)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def dial(address: str, config: dict[str, object] | None) -> None:
    tls = None if config is None else client_ssl_context(admin_config(config))
    connection = await KafkaConnection.open(address, client_id="t", setup_timeout_ms=5_000, tls=tls)
    connection.close()


@pytest.mark.asyncio
async def test_an_untrusted_expired_or_misnamed_broker_certificate_is_named(pki: Pki) -> None:
    other = Pki.create(pki.directory / "other")
    other.keystore("impostor")
    async with serving(server_context(other, "impostor")) as address:
        with pytest.raises(SslAuthenticationError, match="certificate is not trusted"):
            await dial(address, tls_config(pki))
    pki.keystore("elsewhere", hosts=("broker.example",))
    async with serving(server_context(pki, "elsewhere")) as address:
        with pytest.raises(SslAuthenticationError, match="does not name the host dialled"):
            await dial(address, tls_config(pki))
    pki.keystore("stale", expired=True)
    async with serving(server_context(pki, "stale")) as address:
        with pytest.raises(SslAuthenticationError, match="not valid now"):
            await dial(address, tls_config(pki))


@pytest.mark.asyncio
async def test_a_broker_refusing_the_client_certificate_is_named(pki: Pki) -> None:
    other = Pki.create(pki.directory / "other")
    other.keystore("stranger")  # a client certificate a CA the broker does not trust signed
    stranger = {
        "ssl.certificate.location": str(other.directory / "stranger.crt"),
        "ssl.key.location": str(other.directory / "stranger.key"),
    }
    async with serving(server_context(pki, require=True)) as address:
        without = {"security.protocol": "SSL", "ssl.ca.location": str(pki.truststore)}
        for config in (without, {**without, **stranger}):
            with pytest.raises(SslAuthenticationError, match="refused this client's"):
                await dial(address, config)
        # The certificate it trusts is let in: the fake's answer arrives (no real ApiVersions).
        with pytest.raises(NotAKafkaListenerError, match="does not decode"):
            await dial(address, tls_config(pki))


@pytest.mark.asyncio
async def test_the_wrong_security_protocol_is_named_at_once(pki: Pki) -> None:
    loop = asyncio.get_running_loop()
    async with serving(server_context(pki, require=True)) as address:
        started = loop.time()
        with pytest.raises(SecurityProtocolMismatchError, match=r"set security\.protocol=SSL"):
            await dial(address, None)
        assert loop.time() - started < 3  # no retry until a timeout
    async with serving(None) as address:
        with pytest.raises(SecurityProtocolMismatchError, match="is a PLAINTEXT Kafka listener"):
            await dial(address, tls_config(pki))


def test_the_spark_source_passes_the_tls_settings_to_executors_and_driver(pki: Pki) -> None:
    options = {"bootstrap.servers": "127.0.0.1:9093", "subscribe": "t"}
    options |= {f"kafka.{key}": str(value) for key, value in tls_config(pki).items()}
    parsed = parse_options(options, Mode.BATCH)
    for settings in (parsed.consumer_settings(), parsed.admin_settings()):
        assert settings["security.protocol"] == "SSL"
        assert settings["ssl.key.location"] == str(pki.directory / "app.key")
    assert client_ssl_context(admin_config(parsed.admin_settings())) is not None
