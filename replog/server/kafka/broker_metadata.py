"""A broker's view of the cluster for the Kafka listener's Metadata, computed from its metadata
image.

A broker answers Metadata the way the controller answers its read (`replog.quorum.controller.reads`
views), from its own replayed image: only unfenced brokers, UNKNOWN_TOPIC_OR_PARTITION for a
name asked for and absent, the image's offset; and where each broker's listener of a name is.

A broker's Kafka answers (Metadata, DescribeCluster of brokers) name as `controller_id` a live
broker, never the Raft leader (`controller_for_clients`): Kafka's KRaft rule (KIP-590), since a
broker forwards every controller-bound request to the active controller itself.

A SASL listener checks SCRAM users against the credentials of the broker's latest image
(`image_credentials`), as Kafka's brokers check them against their CredentialCache; a
controller's Kafka listener against the controller's committed ones (`committed_credentials`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from replog.common.scram_mechanism import ScramMechanism
from replog.errors import UnknownTopicOrPartitionError
from replog.kafka.sasl_authenticator import CredentialLookup
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.reads import BrokerView, MetadataView, PartitionView, TopicView
from replog.quorum.controller.replication_control import ApiError
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint, UserScramCredentialRecord
from replog.security.scram_credential import ScramCredential


def metadata_view_from_image(
    image: MetadataImage, topic_names: Sequence[str] | None, cluster_id: str
) -> MetadataView:
    """What the controller's Metadata read answers, computed from a broker's image."""
    registrations = image.cluster.brokers
    live = {broker_id for broker_id, r in registrations.items() if not r.fenced}
    by_name = image.topics.by_name
    wanted = sorted(by_name) if topic_names is None else list(topic_names)
    topics: list[TopicView] = []
    for name in wanted:
        topic = by_name.get(name)
        if topic is None:
            error = ApiError(UnknownTopicOrPartitionError, f"no topic named {name!r}")
            topics.append(TopicView(name, None, error=error))
            continue
        topics.append(
            TopicView(
                name,
                topic.topic_id,
                tuple(
                    PartitionView.of(name, partition_id, topic.partitions[partition_id], live)
                    for partition_id in sorted(topic.partitions)
                ),
            )
        )
    brokers = tuple(BrokerView.of(registrations[b]) for b in sorted(live))
    return MetadataView(cluster_id, brokers, tuple(topics), image.provenance.last_offset)


def controller_for_clients(
    broker_id: int,
    listed: Sequence[int],
    choose: Callable[[Sequence[int]], int] = random.choice,
) -> int:
    """The `controller_id` of this broker's Kafka answers, given the unfenced brokers `listed`
    in them: this broker when listed, else one of them `choose`s (Kafka's random live broker),
    -1 with none. Clients send controller-bound requests (CreateTopics, ...) to it and it
    forwards them; the Raft leader is not named because it may be dead with no election able
    to finish, and a client would wait on it until its timeout. This broker rather than
    Kafka's random pick: it is certainly alive (it is answering) and the client is connected
    to it, whereas an unfenced broker of the image may have died with no controller left to
    fence it."""
    if broker_id in listed:
        return broker_id
    return choose(listed) if listed else -1


def listener_endpoint(image: MetadataImage, broker_id: int, listener_name: str) -> Endpoint | None:
    """The endpoint `broker_id` registered under `listener_name` (None: none, or no such
    broker): what Kafka's answers name a broker by for a client of that listener."""
    registration = image.cluster.brokers.get(broker_id)
    if registration is None:
        return None
    return next((e for e in registration.endpoints if e.name == listener_name), None)


# A user's stored credential record for a mechanism code, None when it has none.
RecordLookup = Callable[[str, int], UserScramCredentialRecord | None]


def image_credentials(image_of: Callable[[], MetadataImage]) -> CredentialLookup:
    """A SCRAM server's lookup over the latest image `image_of` gives, read at each lookup."""
    return _lookup(lambda name, code: image_of().scram.credentials.get((name, code)))


def committed_credentials(controller: QuorumController) -> CredentialLookup:
    """A SCRAM server's lookup over `controller`'s committed credentials (its last stable
    offset at each lookup), for its Kafka listener."""
    return _lookup(
        lambda name, code: controller.scram.credential(name, code, controller.last_stable_offset)
    )


def _lookup(record_of: RecordLookup) -> CredentialLookup:
    def for_mechanism(mechanism: ScramMechanism) -> Callable[[str], ScramCredential | None]:
        def credential(name: str) -> ScramCredential | None:
            record = record_of(name, mechanism.code)
            if record is None:
                return None
            return ScramCredential(
                record.salt, record.stored_key, record.server_key, record.iterations
            )

        return credential

    return for_mechanism
