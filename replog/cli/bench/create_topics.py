"""Fresh topics created through replog's Controller service in CreateTopics requests of a given
size, sent one after another: how `replog bench`'s controller run, bench/controller.py and
bench/partition_creation.py create their partitions.

Rules: the topic names must be new. An answer "topic already exists" then answers a retry of
this very request whose first attempt committed (the client retries a timed-out CreateTopics)
and counts as created; any other error is a `BenchSystemError` naming the topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from replog.errors import BenchSystemError, TopicAlreadyExistsError

if TYPE_CHECKING:
    from replog.admin.controller_client import ControllerClient
    from replog.admin.controller_results import NewTopic


def create_in_requests(
    client: ControllerClient, topics: Sequence[NewTopic], per_request: int, timeout_s: float
) -> None:
    """Create `topics`, `per_request` of them a request."""
    for first in range(0, len(topics), per_request):
        results = client.create_topics(topics[first : first + per_request], timeout_s=timeout_s)
        failed = [
            r
            for r in results
            if r.error is not None and not isinstance(r.error, TopicAlreadyExistsError)
        ]
        if failed:
            raise BenchSystemError(f"CreateTopics: {failed[0].name}: {failed[0].error!r}")
