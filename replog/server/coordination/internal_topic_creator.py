"""Creating an internal topic (`__consumer_offsets`, `__transaction_state`) when a coordinator
of it is first looked for (Kafka's automatic creation of the internal topics on
FindCoordinator).

Theory of operation: FindCoordinator on a broker whose metadata lacks the topic calls
`request()` and answers COORDINATOR_NOT_AVAILABLE at once; `request()` starts one
CreateTopics to the active controller unless one is in flight or the last one failed less
than `retry_backoff_ms` ago, so a crowd of clients asking again and again makes one request
at a time. The topic then reaches every broker through the metadata log like any other.

Rules:
- What the topic is created with is the caller's (`offsets_topic_creator`, the transaction
  coordinator's config); the replication factor is asked for at each attempt, so it can
  follow the brokers registered then.
- TOPIC_ALREADY_EXISTS is success (another broker created it first). Any other failure (no
  controller answered, INVALID_REPLICATION_FACTOR with fewer live brokers than replicas) is
  logged and kept in `last_failure`, which FindCoordinator names in its
  COORDINATOR_NOT_AVAILABLE message so the user sees why.
- The request itself is injected (`create_via_controller` is the gRPC one, through the
  broker's `ControllerCalls`, which follows NOT_CONTROLLER redirects); everything else runs
  on the event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from replog.clock import Clock, monotonic_ms
from replog.errors import KafkaError, TopicAlreadyExistsError, UnknownServerError
from replog.pb import controller_pb2 as controller_pb
from replog.server.controller.controller_calls import ControllerCalls, Stub
from replog.server.runtime.node_tasks import Spawner
from replog.wire.broker_codec import error_from_proto

log = logging.getLogger("replog.server.internal_topics")

RETRY_BACKOFF_MS_DEFAULT = 500


# Creates the topic; raises a KafkaError naming why it could not.
CreateTopic = Callable[[], Awaitable[None]]
Created = controller_pb.CreateTopicsResponse


def create_via_controller(
    calls: ControllerCalls,
    broker_id: int,
    *,
    topic: str,
    num_partitions: int,
    replication_factor: Callable[[], int],
    configs: Callable[[int], dict[str, str]],
    timeout_ms: int,
) -> CreateTopic:
    """CreateTopics of `topic` to the active controller: `replication_factor()` replicas
    (asked at each attempt), `configs(replication factor)`."""

    async def create() -> None:
        replicas = replication_factor()
        request = controller_pb.CreateTopicsRequest(
            topics=[
                controller_pb.CreatableTopic(
                    name=topic,
                    num_partitions=num_partitions,
                    replication_factor=replicas,
                    configs=configs(replicas),
                )
            ],
            timeout_ms=timeout_ms,
        )

        def send(stub: Stub, timeout_s: float) -> Awaitable[Created]:
            answer: Awaitable[Created] = stub.CreateTopics(request, timeout=timeout_s)
            return answer

        answer = await calls.call(f"CreateTopics {topic} for broker {broker_id}", send)
        for holder in (answer, *answer.topics):
            error = error_from_proto(holder)
            if error is not None:
                raise error

    return create


class InternalTopicCreator:
    """At most one creation of an internal topic at a time (module docstring)."""

    def __init__(
        self,
        broker_id: int,
        topic: str,
        create: CreateTopic,
        *,
        tasks: Spawner,
        clock: Clock = monotonic_ms,
        retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT,
    ) -> None:
        self._spawner = tasks  # its background tasks' owner (node_tasks)
        self.broker_id = broker_id
        self.topic = topic
        self._create = create
        self._clock = clock
        self._retry_backoff_ms = retry_backoff_ms
        self._task: asyncio.Task[None] | None = None
        self._not_before_ms = 0
        self.last_failure: KafkaError | None = None
        self.attempts = 0  # for tests and logs

    @property
    def in_flight(self) -> bool:
        return self._task is not None and not self._task.done()

    def request(self) -> None:
        """Create the topic now, unless a creation is under way or backing off."""
        if self.in_flight or self._clock() < self._not_before_ms:
            return
        self.attempts += 1
        self._task = self._spawner.spawn(self._run(), name=f"creating {self.topic}")

    async def _run(self) -> None:
        log.info(
            "broker %d: %s does not exist; asking the controller to create it",
            self.broker_id,
            self.topic,
        )
        try:
            await self._create()
        except TopicAlreadyExistsError:
            self.last_failure = None
            return
        except KafkaError as error:
            self.last_failure = error
            self._not_before_ms = self._clock() + self._retry_backoff_ms
            log.warning(
                "broker %d: creating %s failed: %s: %s",
                self.broker_id,
                self.topic,
                error.error_name,
                error,
            )
            return
        except Exception as error:  # a bug must not leave the topic uncreatable for good
            log.exception("broker %d: creating %s failed", self.broker_id, self.topic)
            self.last_failure = UnknownServerError(f"{type(error).__name__}: {error}")
            self._not_before_ms = self._clock() + self._retry_backoff_ms
            return
        self.last_failure = None
        log.info("broker %d: created %s", self.broker_id, self.topic)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
