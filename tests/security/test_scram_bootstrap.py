"""`bootstrap.scram.credentials`: the SCRAM credentials a new metadata log begins with (Kafka's
`kafka-storage format --add-scram`). The value round-trips; every bad entry is refused naming
the key and the entry, never a key's bytes; the first active controller writes the credentials
with its feature levels, once; the user signs in with the password that made them; the local
cluster's administrator setting holds no password."""

from __future__ import annotations

import pytest

from replog.cli.cluster_sasl import ADMIN_USER, bootstrap_credential_properties
from replog.common.scram_mechanism import SCRAM_SHA_256, SCRAM_SHA_512
from replog.errors import ConfigError, SaslAuthenticationFailedError
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.metadata.records import (
    METADATA_VERSION_SCRAM,
    FeatureLevelRecord,
    UserScramCredentialRecord,
)
from replog.security.scram_client import ScramClient
from replog.security.scram_credential import derive_credential
from replog.security.scram_server import ScramServer
from replog.security.scram_store import ScramStore, record_of
from replog.server.config.node_config import NodeConfig
from replog.server.config.scram_bootstrap_config import (
    BOOTSTRAP_SCRAM_CREDENTIALS,
    format_bootstrap_credentials,
    parse_bootstrap_credentials,
)
from tests.controller.controller_harness import Cluster

KEY = BOOTSTRAP_SCRAM_CREDENTIALS


def record(name: str, password: str, mechanism=SCRAM_SHA_512) -> UserScramCredentialRecord:  # type: ignore[no-untyped-def]
    return record_of(name, mechanism, derive_credential(mechanism, password, b"salt!", 4096))


def signs_in(store: ScramStore, user: str, password: str) -> bool:
    client = ScramClient(SCRAM_SHA_512, user, password, "c")
    server = ScramServer(SCRAM_SHA_512, store.lookup(SCRAM_SHA_512), "s")
    final = client.respond(server.respond(client.respond(b"") or b""))
    assert final is not None
    try:
        client.respond(server.respond(final))
    except SaslAuthenticationFailedError:
        return False
    return client.complete


def test_the_value_round_trips_and_holds_no_password() -> None:
    records = [record("admin", "pw-a"), record("alice", "pw-b", SCRAM_SHA_256)]
    text = format_bootstrap_credentials(records)
    assert text.startswith("SCRAM-SHA-512=[name=admin,iterations=4096,salt=")
    assert "pw-a" not in text and "pw-b" not in text
    assert parse_bootstrap_credentials(KEY, text) == tuple(records)
    assert parse_bootstrap_credentials(KEY, "") == ()


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("SCRAM-SHA-1=[name=a]", "'SCRAM-SHA-1' is not a SCRAM mechanism"),
        ("SCRAM-SHA-512=name=a", "expected SCRAM-SHA-512=[field=value,...]"),
        ("SCRAM-SHA-512=[name=a,colour=red]", "field 'colour' unknown"),
        ("SCRAM-SHA-512=[name=a,name=b]", "field 'name' unknown, repeated"),
        ("SCRAM-SHA-512=[name=a,iterations=4096]", "missing salt, storedkey, serverkey"),
        ("SCRAM-SHA-512=[name=a,iterations=9,salt=AA==,storedkey=AA==,serverkey=AA==]", "9 not in"),
        ("SCRAM-SHA-512=[name=a,iterations=x,salt=AA==,storedkey=AA==,serverkey=AA==]", "'x'"),
        ("SCRAM-SHA-512=[name=a,iterations=4096,salt=!!,storedkey=AA==,serverkey=AA==]", "salt"),
        ("SCRAM-SHA-512=[name=a,iterations=4096,salt=AA==,storedkey=AA==,serverkey=AA==]", "64"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_key_and_the_entry(entry: str, said: str) -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.scram\.credentials: entry 1") as refused:
        parse_bootstrap_credentials(KEY, entry)
    assert said in str(refused.value)


def test_a_user_named_twice_for_one_mechanism_is_refused() -> None:
    text = format_bootstrap_credentials([record("a", "x"), record("a", "y")])
    with pytest.raises(ConfigError, match="entry 2 names user 'a' again"):
        parse_bootstrap_credentials(KEY, text)


def test_the_node_config_gives_them_to_its_controller() -> None:
    text = format_bootstrap_credentials([record("admin", "pw")])
    config = NodeConfig.from_properties(
        {
            "process.roles": "controller",
            "node.id": "1",
            "cluster.id": "c",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "CONTROLLER://127.0.0.1:9093",
            "log.dirs": "/tmp/unused",
            KEY: text,
        }
    )
    assert config.controller is not None
    assert config.controller.bootstrap_scram_credentials == (record("admin", "pw"),)


def test_the_first_active_controller_writes_them_once_and_the_user_signs_in() -> None:
    credentials = (record("admin", "secret"),)
    cluster = Cluster.create((1, 2), bootstrap_scram_credentials=credentials)
    cluster.elect(1)
    cluster.log.commit()
    records = [r for _, r in cluster.log.committed_records()]
    assert isinstance(records[0], FeatureLevelRecord)
    assert [r for r in records if isinstance(r, UserScramCredentialRecord)] == list(credentials)
    for controller in cluster.controllers.values():
        assert controller.scram.mechanisms_of("admin") == [SCRAM_SHA_512.code]
    cluster.elect(2)  # a log with metadata: the next active controller writes none again
    cluster.log.commit()
    again = [
        r for _, r in cluster.log.committed_records() if isinstance(r, UserScramCredentialRecord)
    ]
    assert again == list(credentials)
    store = ScramStore()
    for written in again:
        store.replay(written)
    assert signs_in(store, "admin", "secret")
    assert not signs_in(store, "admin", "wrong")


def test_bootstrap_credentials_need_the_scram_metadata_version() -> None:
    """As Kafka's `kafka-storage format --add-scram` refuses a release version below 3.5-IV2."""
    with pytest.raises(ValueError, match=r"SCRAM is only supported in metadata.version 3.5-IV2"):
        ControllerConfig(
            node_id=1,
            cluster_id="c",
            bootstrap_metadata_version=METADATA_VERSION_SCRAM - 1,
            bootstrap_scram_credentials=(record("admin", "pw"),),
        )
    ControllerConfig(
        node_id=1, cluster_id="c", bootstrap_metadata_version=METADATA_VERSION_SCRAM - 1
    )


def test_the_local_administrator_setting_signs_in_with_its_password_only() -> None:
    (text,) = bootstrap_credential_properties("the-password").values()
    assert "the-password" not in text
    (written,) = parse_bootstrap_credentials(KEY, text)
    assert written.name == ADMIN_USER and written.mechanism == SCRAM_SHA_512.code
    store = ScramStore()
    store.replay(written)
    assert signs_in(store, ADMIN_USER, "the-password")
    assert not signs_in(store, ADMIN_USER, "another")
