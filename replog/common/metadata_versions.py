"""Kafka's `metadata.version` levels this code knows: their names, and which changed metadata.

Rules (Kafka's `MetadataVersion`):
- A level's name is Kafka's release and sub-version ("3.3-IV3"), one per level the metadata code
  reads and writes (`quorum/metadata/records.py`: 1 to 12). A release alone ("3.5") names its
  last level this code knows, as Kafka's `fromVersionString` takes a release for its last.
- A level "changed metadata" when Kafka marks it so (`didMetadataChange`): its records, or
  their fields, say something the level below cannot. Moving between two levels changes
  metadata when any level above the lower one, up to the higher, changed it
  (`metadata_changed`, Kafka's `checkIfMetadataChanged`): a downgrade across one might drop
  what the records say, so the controller refuses it.
- Kafka 4's lowest level is 7 (3.3-IV3, `MINIMUM_VERSION`): every other feature needs at least
  it to be finalized above 0.
"""

from __future__ import annotations

FEATURE = "metadata.version"
NAMES: dict[int, str] = {
    1: "3.0-IV1",
    2: "3.1-IV0",
    3: "3.2-IV0",
    4: "3.3-IV0",
    5: "3.3-IV1",
    6: "3.3-IV2",
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
}
# The levels Kafka's MetadataVersion marks with didMetadataChange=true.
CHANGED_METADATA = frozenset({1, 3, 5, 6, 7, 8, 11})
# Kafka 4's MetadataVersion.MINIMUM_VERSION (3.3-IV3).
KAFKA_MINIMUM = 7


def name_of(level: int) -> str | None:
    """The level's name ("3.6-IV0"), or None for a level this code does not know."""
    return NAMES.get(level)


def level_of(name: str) -> int | None:
    """The level a name stands for ("3.5-IV2", or "3.5": its last known level); None when this
    code knows none."""
    exact = [level for level, known in NAMES.items() if known == name]
    if exact:
        return exact[0]
    releases = [level for level, known in NAMES.items() if known.split("-")[0] == name]
    return max(releases, default=None)


def metadata_changed(source: int, target: int) -> bool:
    """Whether moving between the two levels changes metadata (module Rules)."""
    low, high = sorted((source, target))
    return any(level in CHANGED_METADATA for level in range(low + 1, high + 1))
