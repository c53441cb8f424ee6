"""replog: an embeddable replicated log with Kafka's on-disk format and replication semantics."""

__version__ = "0.1.0"
