"""`bootstrap.scram.credentials` (replog's own; Kafka's `kafka-storage format --add-scram`): the
SCRAM credentials a new metadata log begins with, so a cluster whose every Kafka listener needs
SASL has a user before any client could create one.

    bootstrap.scram.credentials=SCRAM-SHA-512=[name=admin,iterations=8192,salt=<base64>,storedkey=<base64>,serverkey=<base64>]

Rules:
- Entries are separated by `;`; each is `MECHANISM=[field=value,...]` with every one of the
  five fields once. The stored and server keys are what the metadata log keeps anyway: never
  the password nor the salted password, so the file holding them gives nobody a login.
- Read by the active controller only when it writes a new log's bootstrap records; a log that
  holds metadata already keeps its own credentials (a restart changes none).
- A malformed entry, an unknown mechanism or field, bad base64, iterations outside 4096..16384,
  keys of the wrong size: a `ConfigError` naming the key and the entry, never a key's bytes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from replog.common.scram_mechanism import (
    MAX_ITERATIONS,
    MECHANISM_BY_CODE,
    MECHANISM_BY_NAME,
    MIN_ITERATIONS,
)
from replog.errors import ConfigError
from replog.quorum.metadata.records import UserScramCredentialRecord

BOOTSTRAP_SCRAM_CREDENTIALS = "bootstrap.scram.credentials"
_FIELDS = ("name", "iterations", "salt", "storedkey", "serverkey")


def format_bootstrap_credentials(records: Iterable[UserScramCredentialRecord]) -> str:
    """The property's value for `records` (module format)."""

    def encode(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return ";".join(
        f"{MECHANISM_BY_CODE[r.mechanism].mechanism_name}=[name={r.name},"
        f"iterations={r.iterations},salt={encode(r.salt)},storedkey={encode(r.stored_key)},"
        f"serverkey={encode(r.server_key)}]"
        for r in records
    )


def parse_bootstrap_credentials(key: str, text: str) -> tuple[UserScramCredentialRecord, ...]:
    """The records `text` (the value of `key`) names (module rules)."""
    records = []
    seen: set[tuple[str, int]] = set()
    for position, entry in enumerate(text.split(";"), 1):
        entry = entry.strip()
        if not entry:
            continue
        record = _parse_entry(key, position, entry)
        if (record.name, record.mechanism) in seen:
            raise ConfigError(f"{key}: entry {position} names user {record.name!r} again")
        seen.add((record.name, record.mechanism))
        records.append(record)
    return tuple(records)


def _parse_entry(key: str, position: int, entry: str) -> UserScramCredentialRecord:
    where = f"{key}: entry {position}"
    mechanism_name, equals, rest = entry.partition("=")
    mechanism = MECHANISM_BY_NAME.get(mechanism_name.strip().upper())
    if mechanism is None:
        raise ConfigError(
            f"{where}: {mechanism_name.strip()!r} is not a SCRAM mechanism "
            f"({', '.join(MECHANISM_BY_NAME)})"
        )
    rest = rest.strip()
    if not equals or not (rest.startswith("[") and rest.endswith("]")):
        raise ConfigError(f"{where}: expected {mechanism.mechanism_name}=[field=value,...]")
    fields: dict[str, str] = {}
    for item in rest[1:-1].split(","):
        name, has_value, value = item.partition("=")
        name = name.strip()
        if not has_value or name not in _FIELDS or name in fields:
            raise ConfigError(
                f"{where}: field {name!r} unknown, repeated or without a value (fields: "
                f"{', '.join(_FIELDS)}, each once)"
            )
        fields[name] = value.strip()
    missing = [name for name in _FIELDS if not fields.get(name)]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    try:
        iterations = int(fields["iterations"])
    except ValueError:
        raise ConfigError(f"{where}: iterations {fields['iterations']!r} is not a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ConfigError(
            f"{where}: iterations {iterations} not in {MIN_ITERATIONS}..{MAX_ITERATIONS}"
        )
    decoded = {name: _base64(where, name, fields[name]) for name in _FIELDS[2:]}
    for name in ("storedkey", "serverkey"):
        if len(decoded[name]) != mechanism.digest_size:
            raise ConfigError(
                f"{where}: {name} of {len(decoded[name])} bytes; {mechanism.mechanism_name}'s "
                f"are {mechanism.digest_size}"
            )
    return UserScramCredentialRecord(
        name=fields["name"],
        mechanism=mechanism.code,
        salt=decoded["salt"],
        stored_key=decoded["storedkey"],
        server_key=decoded["serverkey"],
        iterations=iterations,
    )


def _base64(where: str, name: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: {name} is not base64") from None
