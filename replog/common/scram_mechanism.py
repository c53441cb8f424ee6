"""The SCRAM mechanisms Kafka supports (KIP-84): their SASL names, hashes, record codes and
iteration bounds.

Rules:
- `code` is the mechanism's byte in `UserScramCredentialRecord` and the SCRAM admin APIs
  (Kafka's `org.apache.kafka.clients.admin.ScramMechanism`: 1 = SHA-256, 2 = SHA-512).
- Iterations of a stored credential lie in `MIN_ITERATIONS..MAX_ITERATIONS` (Kafka's
  `ScramMechanism.minIterations` 4096, and 16384, the most AlterUserScramCredentials accepts).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    mechanism_name: str  # the SASL mechanism name, e.g. "SCRAM-SHA-256"
    hash_name: str  # hashlib's name of its hash
    code: int
    digest_size: int  # bytes of a stored key, server key and proof


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1, 32)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2, 64)
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MECHANISM_BY_CODE = {m.code: m for m in SCRAM_MECHANISMS}
MECHANISM_BY_NAME = {m.mechanism_name: m for m in SCRAM_MECHANISMS}
