"""Client configs: Kafka's names and defaults, both spellings, typed errors naming the key."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.client import config as config_module
from replog.client.config import (
    AdminConfig,
    ConsumerConfig,
    ProducerConfig,
    admin_config,
    consumer_config,
    producer_config,
)
from replog.client.tls_settings import SSL_FAMILY_REASON, client_tls
from replog.errors import ConfigError
from replog.record.compression import COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE

# The defaults the contract (and Kafka / kafka-python) fix.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "bootstrap_servers": ("localhost:9092",),
    "acks": -1,
    "linger_ms": 5,
    "batch_size": 1_000_000,
    "compression_type": 0,
    "max_request_size": 1048576,
    "buffer_memory": 33554432,
    "max_block_ms": 60000,
    "retries": 2147483647,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 1000,
    "delivery_timeout_ms": 120000,
    "request_timeout_ms": 30000,
    "max_in_flight_requests_per_connection": 5,
    "enable_idempotence": True,
    "metadata_max_age_ms": 300000,
    "partitioner_ignore_keys": False,
    "key_serializer": None,
    "value_serializer": None,
}
CONSUMER_DEFAULTS: dict[str, Any] = {
    "group_id": None,
    "auto_offset_reset": "latest",
    "enable_auto_commit": False,  # True, but off without a group.id (Kafka's rule)
    "auto_commit_interval_ms": 5000,
    "max_poll_records": 500,
    "fetch_min_bytes": 1,
    "fetch_max_bytes": 52428800,
    "fetch_max_wait_ms": 500,
    "max_partition_fetch_bytes": 1048576,
    "isolation_level": "read_uncommitted",
    "check_crcs": True,
    "default_api_timeout_ms": 60000,
    "consumer_timeout_ms": math.inf,
    "key_deserializer": None,
    "value_deserializer": None,
    "request_timeout_ms": 30000,
    "retry_backoff_ms": 100,
    "metadata_max_age_ms": 300000,
}
ADMIN_DEFAULTS: dict[str, Any] = {
    "request_timeout_ms": 30000,
    "default_api_timeout_ms": 60000,
    "bootstrap_controllers": (),
}


def error_of(build: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        build(*args, **kwargs)
    return str(info.value)


# --- defaults and spellings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "defaults"),
    [
        (producer_config, PRODUCER_DEFAULTS),
        (consumer_config, CONSUMER_DEFAULTS),
        (admin_config, ADMIN_DEFAULTS),
    ],
)
def test_defaults(build: Any, defaults: dict[str, Any]) -> None:
    built = build()
    for attribute, value in defaults.items():
        assert getattr(built, attribute) == value, attribute
    assert built.user_keys == frozenset()


def test_consumer_with_a_group_auto_commits_by_default() -> None:
    built = consumer_config(group_id="g")
    assert built.enable_auto_commit is True
    assert built.group_id == "g"


def test_dotted_and_snake_case_names_are_the_same_key() -> None:
    dotted = producer_config({"linger.ms": 7, "max.in.flight.requests.per.connection": 2})
    snake = producer_config(linger_ms=7, max_in_flight_requests_per_connection=2)
    assert dotted == snake
    assert dotted.linger_ms == 7
    assert dotted.user_keys == {"linger.ms", "max.in.flight.requests.per.connection"}


def test_dict_and_keywords_combine() -> None:
    built = producer_config({"bootstrap.servers": "h:1"}, batch_size=100)
    assert built.bootstrap_servers == ("h:1",)
    assert built.batch_size == 100


@pytest.mark.parametrize(
    ("mapping", "kwargs"),
    [({"linger.ms": 1}, {"linger_ms": 2}), ({"linger.ms": 1, "linger_ms": 2}, {})],
)
def test_a_key_set_twice_is_an_error(mapping: dict[str, Any], kwargs: dict[str, Any]) -> None:
    message = error_of(producer_config, mapping, **kwargs)
    assert "set twice" in message and "linger.ms" in message


def test_configs_are_frozen() -> None:
    built = producer_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.linger_ms = 1  # type: ignore[misc]


def test_a_built_config_passes_through_and_keywords_override_it() -> None:
    base = producer_config({"linger.ms": 20, "acks": "1"})
    assert producer_config(base) == base
    more = producer_config(base, linger_ms=30)
    assert (more.linger_ms, more.acks) == (30, 1)
    assert more.user_keys == {"linger.ms", "acks"}
    assert "ConsumerConfig" in error_of(producer_config, consumer_config())


def test_config_must_be_a_mapping() -> None:
    assert "mapping" in error_of(producer_config, ["linger.ms"])
    assert "strings" in error_of(producer_config, {1: 2})


# --- value parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("all", -1), ("ALL", -1), (-1, -1), ("-1", -1), (0, 0), ("0", 0), (1, 1), ("1", 1)],
)
def test_acks_spellings(raw: object, expected: int) -> None:
    assert producer_config(acks=raw, enable_idempotence=False).acks == expected


@pytest.mark.parametrize("raw", [2, "2", "none", True, None, 1.5])
def test_bad_acks_names_the_accepted_values(raw: object) -> None:
    assert "accepted values: all, -1, 0, 1" in error_of(producer_config, acks=raw)


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_integers_from_config_files_equal_typed_ones(value: int) -> None:
    assert producer_config({"batch.size": str(value)}) == producer_config(batch_size=value)


@pytest.mark.parametrize("raw", ["abc", "1.5", -1, 2**31, True, None, [1]])
def test_bad_integers_name_key_value_and_range(raw: object) -> None:
    message = error_of(producer_config, {"batch.size": raw})
    assert message.startswith(f"batch.size={raw!r}")
    assert "[0, 2147483647]" in message


def test_integral_floats_are_integers() -> None:
    assert producer_config(linger_ms=10.0).linger_ms == 10


def test_max_in_flight_must_be_at_least_one() -> None:
    message = error_of(producer_config, max_in_flight_requests_per_connection=0)
    assert "[1, 2147483647]" in message


@pytest.mark.parametrize(("raw", "expected"), [(True, True), ("false", False), (" TRUE ", True)])
def test_booleans(raw: object, expected: bool) -> None:
    assert consumer_config(check_crcs=raw).check_crcs is expected


@pytest.mark.parametrize("raw", ["yes", 1, 0, None])
def test_bad_booleans(raw: object) -> None:
    assert "accepted values: true, false" in error_of(consumer_config, check_crcs=raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("h", ("h:9092",)),
        ("a:1,b:2", ("a:1", "b:2")),
        (" a:1 , b:2 ,", ("a:1", "b:2")),
        (["a:1", "b"], ("a:1", "b:9092")),
        (("a:1", "a:1"), ("a:1",)),
        ("[::1]:9093", ("[::1]:9093",)),
        ("[::1]", ("[::1]:9092",)),
        ("PLAINTEXT://a:1,SASL_SSL://b", ("a:1", "b:9092")),
    ],
)
def test_bootstrap_servers(raw: object, expected: tuple[str, ...]) -> None:
    assert admin_config(bootstrap_servers=raw).bootstrap_servers == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "no address given"),
        ([], "no address given"),
        ("a:b", "expected 'host[:port]"),
        ("a:0", "port must be in [1, 65535]"),
        ("a:70000", "port must be in [1, 65535]"),
        ("::1", "IPv6"),
        ("[::1", "expected"),
        (":9092", "expected"),
        (9092, "expected"),
        (["a", 1], "expected"),
    ],
)
def test_bad_bootstrap_servers(raw: object, why: str) -> None:
    message = error_of(producer_config, {"bootstrap.servers": raw})
    assert message.startswith("bootstrap.servers=")
    assert why in message


def test_bootstrap_controllers_keep_node_ids() -> None:
    built = admin_config(bootstrap_controllers="1@h:1,h:2")
    assert built.bootstrap_controllers == ("1@h:1", "h:2")
    assert admin_config(bootstrap_controllers=["h:3"]).bootstrap_controllers == ("h:3",)
    assert "bootstrap_controllers" in error_of(admin_config, bootstrap_controllers="x@h:1")


@pytest.mark.parametrize(
    ("raw", "codec"),
    [
        ("none", COMPRESSION_NONE),
        (None, COMPRESSION_NONE),
        ("gzip", COMPRESSION_GZIP),
        ("LZ4", COMPRESSION_LZ4),
        (COMPRESSION_GZIP, COMPRESSION_GZIP),
    ],
)
def test_compression_type(raw: object, codec: int) -> None:
    assert producer_config(compression_type=raw).compression_type == codec


def test_bad_compression_type_lists_the_codecs() -> None:
    message = error_of(producer_config, {"compression.type": "brotli"})
    assert message == ("compression.type='brotli': accepted values: none, gzip, snappy, lz4, zstd")
    assert "accepted values" in error_of(producer_config, compression_type=9)


def test_a_codec_without_its_package_fails_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(config_module, "is_codec_available", lambda codec: codec < 2)
    message = error_of(producer_config, compression_type="zstd")
    assert "the zstd package is not installed" in message


def test_serializers_must_be_callable() -> None:
    built = producer_config(value_serializer=str.encode)
    assert built.value_serializer is str.encode
    assert "must be a callable" in error_of(producer_config, key_serializer="utf-8")
    assert "must be a callable" in error_of(consumer_config, value_deserializer=1)


def test_text_settings() -> None:
    assert producer_config(client_id="me").client_id == "me"
    assert "must be a string" in error_of(producer_config, client_id=5)
    assert "must be a string" in error_of(consumer_config, group_id=5)


# --- unknown and unsupported keys ------------------------------------------------------------


def test_unknown_key_names_the_closest_known_one_in_the_same_spelling() -> None:
    assert error_of(producer_config, lingr_ms=1) == (
        "unknown producer config 'lingr_ms'; did you mean 'linger_ms'?"
    )
    assert error_of(producer_config, {"batch.sise": 1}) == (
        "unknown producer config 'batch.sise'; did you mean 'batch.size'?"
    )


def test_unknown_key_without_a_close_one_lists_the_known_ones() -> None:
    message = error_of(admin_config, {"zzzz": 1})
    assert message.startswith("unknown admin config 'zzzz'; known: ")
    assert "bootstrap.servers" in message


def test_a_key_of_another_client_kind_says_so() -> None:
    assert error_of(producer_config, group_id="g") == (
        "group_id: a consumer config, not a producer config"
    )
    assert "a producer config, not a consumer config" in error_of(consumer_config, acks=1)


def test_unsupported_kafka_keys_say_why() -> None:
    # Every other SASL key, and every TLS key replog's client does not read, says why (not
    # "did you mean"); a TLS key it reads is a setting.
    for key in ("sasl.kerberos.service.name", "sasl.jaas.config", "ssl.cipher.suites"):
        assert error_of(producer_config, {key: "x"}) == (
            f"{key}: not supported by replog: replog clients take sasl.mechanism, "
            "sasl.username and sasl.password only"
            if key.startswith("sasl.")
            else f"{key}: not supported by replog: {SSL_FAMILY_REASON}"
        )
    assert "ssl.key.password decrypts" in error_of(consumer_config, ssl_keystore_password="x")
    assert consumer_config(ssl_ca_location="/ca.pem").ssl_ca_location == "/ca.pem"
    # A near miss of a SASL setting is a typo of it, not the unsupported family.
    assert "did you mean 'sasl.mechanism'?" in error_of(producer_config, {"sasl.mechanisms": "x"})


def test_sasl_settings_are_checked_and_the_password_kept_out_of_the_repr() -> None:
    settings = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "scram-sha-512",
        "sasl.username": "alice",
        "sasl.password": "hunter2",
    }
    built = producer_config(settings)
    assert built.sasl is not None and built.sasl.mechanism == "SCRAM-SHA-512"
    assert "hunter2" not in repr(built) and "hunter2" not in repr(built.sasl)
    assert producer_config().sasl is None  # PLAINTEXT
    assert "sasl.username: required" in error_of(consumer_config, {**settings, "sasl.username": ""})
    assert "sasl.password: required" in error_of(
        admin_config, {k: v for k, v in settings.items() if k != "sasl.password"}
    )
    assert "sasl.mechanism='GSSAPI': accepted values: PLAIN" in error_of(
        producer_config, {**settings, "sasl.mechanism": "GSSAPI"}
    )
    assert "security.protocol='TLS'" in error_of(producer_config, {"security.protocol": "TLS"})


def test_one_security_protocol_setting_gives_tls_sasl_or_both() -> None:
    login = {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "pw"}
    both = consumer_config({**login, "security.protocol": "sasl_ssl"})
    assert both.security_protocol == "SASL_SSL"
    assert client_tls(both) is not None and both.sasl is not None
    only_tls = consumer_config({**login, "security.protocol": "SSL"})
    assert client_tls(only_tls) is not None and only_tls.sasl is None
    only_sasl = consumer_config({**login, "security.protocol": "SASL_PLAINTEXT"})
    assert client_tls(only_sasl) is None and only_sasl.sasl is not None
    assert "accepted values: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in error_of(
        admin_config, security_protocol="SASL"
    )


# --- Kafka's cross-checks --------------------------------------------------------------------


def test_explicit_delivery_timeout_below_linger_plus_request_timeout_fails() -> None:
    message = error_of(producer_config, delivery_timeout_ms=904, request_timeout_ms=900)
    assert message == (
        "delivery.timeout.ms=904: must be >= linger.ms + request.timeout.ms = 5 + 900 = 905"
    )
    assert (
        producer_config(delivery_timeout_ms=905, request_timeout_ms=900).delivery_timeout_ms == 905
    )


def test_default_delivery_timeout_is_raised_to_linger_plus_request_timeout() -> None:
    built = producer_config(linger_ms=1000, request_timeout_ms=200_000)
    assert built.delivery_timeout_ms == 201_000


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"acks": 1}, "acks=1 (needs all)"),
        ({"acks": "0"}, "acks=0 (needs all)"),
        ({"retries": 0}, "retries=0 (needs > 0)"),
        (
            {"max.in.flight.requests.per.connection": 6},
            "max.in.flight.requests.per.connection=6 (needs <= 5)",
        ),
    ],
)
def test_idempotence_conflicts(
    settings: dict[str, Any], named: str, caplog: pytest.LogCaptureFixture
) -> None:
    message = error_of(producer_config, {**settings, "enable.idempotence": "true"})
    assert message.startswith("enable.idempotence=true conflicts with ")
    assert named in message
    with caplog.at_level(logging.INFO, logger="replog.client.config"):
        quiet = producer_config(settings)
    assert quiet.enable_idempotence is False
    assert named in caplog.text


def test_idempotence_stays_on_with_compatible_settings() -> None:
    built = producer_config(enable_idempotence=True, acks="all", retries=3)
    assert built.enable_idempotence is True
    assert producer_config(max_in_flight_requests_per_connection=5).enable_idempotence is True
    assert producer_config(enable_idempotence=False).enable_idempotence is False


def test_every_conflict_is_named_at_once() -> None:
    message = error_of(producer_config, enable_idempotence=True, acks=0, retries=0)
    assert "acks=0" in message and "retries=0" in message


def test_auto_commit_needs_a_group() -> None:
    assert error_of(consumer_config, enable_auto_commit=True) == (
        "enable.auto.commit=true needs a group.id (none is set)"
    )
    assert consumer_config(group_id="g", enable_auto_commit=False).enable_auto_commit is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("earliest", "earliest"),
        ("LATEST", "latest"),
        ("none", "none"),
        ("smallest", "earliest"),
        ("largest", "latest"),
    ],
)
def test_auto_offset_reset(raw: str, expected: str) -> None:
    assert consumer_config(auto_offset_reset=raw).auto_offset_reset == expected


def test_bad_auto_offset_reset_lists_the_values() -> None:
    assert error_of(consumer_config, {"auto.offset.reset": "beginning"}) == (
        "auto.offset.reset='beginning': accepted values: earliest, latest, none"
    )


def test_read_committed_is_accepted() -> None:
    assert consumer_config(isolation_level="read_committed").isolation_level == "read_committed"
    assert "read_uncommitted, read_committed" in error_of(consumer_config, isolation_level="x")


def test_request_timeout_must_exceed_fetch_max_wait() -> None:
    message = error_of(consumer_config, request_timeout_ms=500, fetch_max_wait_ms=500)
    assert "request.timeout.ms=500" in message and "fetch.max.wait.ms=500" in message


def test_heartbeat_must_be_below_session_timeout() -> None:
    message = error_of(consumer_config, heartbeat_interval_ms=10_000, session_timeout_ms=10_000)
    assert message == "heartbeat.interval.ms=10000: must be lower than session.timeout.ms=10000"


@pytest.mark.parametrize(("raw", "expected"), [(1000, 1000.0), ("250", 250.0), ("inf", math.inf)])
def test_consumer_timeout(raw: object, expected: float) -> None:
    assert consumer_config(consumer_timeout_ms=raw).consumer_timeout_ms == expected


@pytest.mark.parametrize("raw", [-1, "soon", "nan", None, True])
def test_bad_consumer_timeout(raw: object) -> None:
    assert "milliseconds >= 0" in error_of(consumer_config, consumer_timeout_ms=raw)


def test_retry_backoff_above_its_max_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="replog.client.config"):
        built = admin_config(retry_backoff_ms=5000)
    assert (built.retry_backoff_ms, built.retry_backoff_max_ms) == (5000, 1000)
    assert "constant backoff of 1000 ms" in caplog.text


def test_every_setting_has_a_parser_and_a_dotted_name() -> None:
    for cls in (ProducerConfig, ConsumerConfig, AdminConfig):
        for f in dataclasses.fields(cls):
            if f.name != "user_keys":
                assert "parse" in f.metadata, (cls.__name__, f.name)


def test_assignment_strategies_take_kafkas_names_and_java_class_names() -> None:
    assert consumer_config().partition_assignment_strategy == ("range", "cooperative-sticky")
    given = "org.apache.kafka.clients.consumer.RoundRobinAssignor, cooperative-sticky"
    chosen = consumer_config({"partition.assignment.strategy": given})
    assert chosen.partition_assignment_strategy == ("roundrobin", "cooperative-sticky")
    java = consumer_config(
        {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"}
    )
    assert java.partition_assignment_strategy == ("sticky",)
    listed = consumer_config(partition_assignment_strategy=["range"])
    assert listed.partition_assignment_strategy == ("range",)
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy=.*not known: stuck"):
        consumer_config({"partition.assignment.strategy": "stuck"})
    with pytest.raises(ConfigError, match="not known: \\(empty\\)"):
        consumer_config({"partition.assignment.strategy": ""})
    assert consumer_config(group_instance_id="host-1").group_instance_id == "host-1"


def test_a_transactional_id_needs_idempotence_and_is_not_empty() -> None:
    built = producer_config({"transactional.id": "t", "transaction.timeout.ms": "900"})
    assert (built.transactional_id, built.transaction_timeout_ms) == ("t", 900)
    assert producer_config().transactional_id is None
    assert producer_config().transaction_timeout_ms == 60_000  # Kafka's default
    assert "needs idempotence, which enable.idempotence=false turns off" in error_of(
        producer_config, transactional_id="t", enable_idempotence=False
    )
    assert "needs idempotence, which acks=1 (needs all) turns off" in error_of(
        producer_config, transactional_id="t", acks=1
    )
    assert "non-empty" in error_of(producer_config, transactional_id="")
