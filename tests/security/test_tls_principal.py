"""The principal of a TLS client: the certificate's subject as Java prints it (RFC 2253) and
`ssl.principal.mapping.rules`, both against Kafka 4.4.0's answers
(`gold/kafka_security_gold.jsonl`, from `gold/subjects.pem`), and every bad rule refused."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from replog.errors import ConfigError, InvalidCertificateError, NoMatchingPrincipalRuleError
from replog.security.distinguished_name import subject_name
from replog.security.principal import ANONYMOUS, KafkaPrincipal
from replog.security.principal_mapping import PrincipalMapper, tls_principal

GOLD_DIR = Path(__file__).parent / "gold"
GOLD = [
    json.loads(line) for line in (GOLD_DIR / "kafka_security_gold.jsonl").read_text().splitlines()
]
(SUBJECTS,) = [entry["names"] for entry in GOLD if entry["kind"] == "subjects"]
MAPPINGS = [entry for entry in GOLD if entry["kind"] == "mapping"]
PEM_END = "-----END CERTIFICATE-----\n"
CERTIFICATES = [
    ssl.PEM_cert_to_DER_cert(block + PEM_END)
    for block in (GOLD_DIR / "subjects.pem").read_text().split(PEM_END)
    if block.strip()
]


def test_subjects_are_printed_as_java_prints_them() -> None:
    assert [subject_name(der) for der in CERTIFICATES] == SUBJECTS


@pytest.mark.parametrize("entry", MAPPINGS, ids=lambda e: e["rules"])
def test_rules_map_as_kafkas_ssl_principal_mapper(entry: dict[str, Any]) -> None:
    mapper = PrincipalMapper.from_rules(entry["rules"])
    for subject, kafka in entry["mapped"]:
        if kafka is None:
            with pytest.raises(NoMatchingPrincipalRuleError, match=r"no rule of ssl\.principal"):
                mapper.name(subject)
        else:
            assert mapper.name(subject) == kafka, subject


def test_a_client_is_anonymous_without_a_certificate_and_its_mapped_subject_with_one() -> None:
    assert tls_principal(None, PrincipalMapper.from_rules()) == ANONYMOUS
    mapper = PrincipalMapper.from_rules("RULE:^CN=([^,]*).*$/$1/L")
    assert tls_principal(CERTIFICATES[0], mapper) == KafkaPrincipal("User", "app")
    assert tls_principal(CERTIFICATES[0], PrincipalMapper.from_rules()) == KafkaPrincipal(
        "User", "CN=app,O=replog tests"
    )


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("RULE:^CN=(.*)$", "invalid rule `RULE:\\^CN=\\(\\.\\*\\)\\$`"),
        ("DEFAULT,RULE:a/b/Lx", "unmatched substring `x`"),
        ("KERBEROS", "invalid rule `KERBEROS`"),
        ("RULE:^(.*$/x/", "rule `RULE:\\^\\(\\.\\*\\$/x/`: missing \\)"),
        ("RULE:^(.*)$/$x/", "`\\$` names no group"),
        ("RULE:^(?P<a>.*)$/${b}/", "no group named"),
    ],
)
def test_bad_rules_are_refused_naming_them(rules: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        PrincipalMapper.from_rules(rules)


def test_empty_entries_are_skipped_and_references_beyond_the_groups_stay_text() -> None:
    mapper = PrincipalMapper.from_rules(" , RULE:^CN=(\\w+).*$/$12 \\$1/, ")
    assert mapper.name("CN=app,O=x") == "app2 $1"


@pytest.mark.parametrize(
    ("der", "expected"),
    [
        (b"", "cut short"),
        (b"\x04\x00", "the certificate: expected DER tag 0x30, got 0x4"),
        (b"\x30\x05\x30\x03\x02\x01\x01", "has no subject"),
        (b"\x30\x84\xff\xff\xff\xff", "runs past the end"),
    ],
)
def test_bytes_that_are_not_a_certificate_are_refused(der: bytes, expected: str) -> None:
    with pytest.raises(InvalidCertificateError, match=expected):
        subject_name(der)
