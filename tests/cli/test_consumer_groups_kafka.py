"""`replog consumer-groups` on Kafka listeners: scripted in-process Kafka listeners
(`tests/wire/kafka_group_fake.py`) answer the group APIs the command sends.

- `--describe` finds the coordinator through the bootstrap server (FindCoordinator; one that
  refuses the connection is skipped for the next) and asks it DescribeGroups and OffsetFetch,
  printing Kafka's table and JSON as before;
- `--delete` sends DeleteGroups to the coordinator, a group's error ending with exit code 1;
- `--reset-offsets` is refused while the coordinator describes the group with members (a
  consumer-protocol group's through ConsumerGroupDescribe);
- a gRPC listener or a metrics endpoint given as `--bootstrap-server` stops the command with
  NotAKafkaListenerError naming what answered;
- a coordinator not ready yet (a fresh cluster: COORDINATOR_NOT_AVAILABLE, then
  COORDINATOR_LOAD_IN_PROGRESS; NOT_COORDINATOR) is asked again until `--timeout`, saying on
  stderr what it waits for; past it the last error names the timeout.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from replog.cli import consumer_groups, coordinator_wait
from replog.cli.main import main
from replog.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from replog.kafka.messages import consumer_group_describe_response as cgd
from replog.kafka.messages.consumer_group_describe_response import ConsumerGroupDescribeResponse
from replog.kafka.messages.delete_groups_request import DeleteGroupsRequest
from replog.kafka.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from replog.kafka.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from replog.kafka.messages.find_coordinator_request import FindCoordinatorRequest
from replog.kafka.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from replog.kafka.messages.list_groups_request import ListGroupsRequest
from replog.kafka.messages.list_groups_response import ListedGroup, ListGroupsResponse
from replog.kafka.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
)
from tests.local_ports import free_port
from tests.wire.kafka_group_fake import Script, ScriptedKafka

FIND_COORDINATOR, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS, LIST_GROUPS = 10, 9, 15, 42, 16
CONSUMER_GROUP_DESCRIBE = 69
NON_EMPTY_GROUP = 68


@contextmanager
def scripted(answers: Mapping[int, Script]) -> Iterator[ScriptedKafka]:
    """A `ScriptedKafka` served by an event loop of its own (the CLI runs its own loop), which
    names itself as every group's coordinator unless the script says otherwise."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    fake = ScriptedKafka({FIND_COORDINATOR: lambda r, v: coordinator_is(fake), **answers})
    asyncio.run_coroutine_threadsafe(fake.__aenter__(), loop).result(10)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(fake.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def coordinator_is(fake: ScriptedKafka, node_id: int = 7) -> FindCoordinatorResponse:
    host, port = fake.address.rsplit(":", 1)
    return FindCoordinatorResponse(
        coordinators=[Coordinator(key="g", node_id=node_id, host=host, port=int(port))]
    )


def described(state: str, *members: DescribedGroupMember) -> Script:
    def answer(request: Any, version: int) -> DescribeGroupsResponse:
        assert request.groups == ["g"]
        return DescribeGroupsResponse(
            groups=[
                DescribedGroup(
                    group_id="g",
                    group_state=state,
                    protocol_type="consumer",
                    protocol_data="range" if members else "",
                    members=list(members),
                )
            ]
        )

    return answer


def nothing_committed(request: Any, version: int) -> OffsetFetchResponse:
    return OffsetFetchResponse(groups=[OffsetFetchResponseGroup(group_id="g", topics=[])])


MEMBER = DescribedGroupMember(
    member_id="c1-1", client_id="c1", client_host="/10.0.0.5", member_assignment=b""
)


def groups_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["consumer-groups", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_asks_the_coordinator_found_through_the_kafka_listener(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = {DESCRIBE_GROUPS: described("Stable", MEMBER), OFFSET_FETCH: nothing_committed}
    with scripted(answers) as kafka:
        base = ["--bootstrap-server", kafka.address, "--describe", "--group", "g"]
        code, out, _ = groups_cli(capsys, *base)
        assert code == 0
        assert out.split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
            "g", "-", "-", "-", "-", "-", "c1-1", "/10.0.0.5", "c1",
        ]  # fmt: skip
        code, out, _ = groups_cli(capsys, *base, "--json")
        assert code == 0
        assert json.loads(out) == [
            {"group": "g", "topic": None, "partition": None, "currentOffset": None,
             "logEndOffset": None, "lag": None, "consumerId": "c1-1", "host": "/10.0.0.5",
             "clientId": "c1"}
        ]  # fmt: skip
        code, out, _ = groups_cli(capsys, *base, "--state", "--json")
        assert code == 0
        assert json.loads(out) == {
            "group": "g", "coordinator": kafka.address, "coordinatorId": 7,
            "assignmentStrategy": "range", "state": "Stable", "members": 1,
        }  # fmt: skip
        asked = [api for api, _, _ in kafka.seen]
    assert asked == [FIND_COORDINATOR, DESCRIBE_GROUPS, OFFSET_FETCH] * 3


def test_a_bootstrap_server_that_does_not_answer_is_skipped_for_the_next(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = {DESCRIBE_GROUPS: described("Empty"), OFFSET_FETCH: nothing_committed}
    with scripted(answers) as kafka:
        bootstrap = f"127.0.0.1:{free_port()},{kafka.address}"
        code, out, err = groups_cli(
            capsys, "--bootstrap-server", bootstrap, "--describe", "--group", "g", "--json"
        )
        asked = [api for api, _, _ in kafka.seen]
    assert (code, json.loads(out), err) == (0, [], "")
    assert asked == [FIND_COORDINATOR, DESCRIBE_GROUPS, OFFSET_FETCH]


def test_describe_of_a_group_without_members_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answers = {DESCRIBE_GROUPS: described("Empty"), OFFSET_FETCH: nothing_committed}
    with scripted(answers) as kafka:
        code, out, _ = groups_cli(
            capsys, "--bootstrap-server", kafka.address, "--describe", "--group", "g"
        )
    assert code == 0
    assert "Consumer group 'g' has no active members." in out


def test_delete_asks_the_coordinator_and_reports_each_groups_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    errors = iter([0, NON_EMPTY_GROUP])

    def deleted(request: Any, version: int) -> DeleteGroupsResponse:
        assert request.groups_names == ["g"]
        return DeleteGroupsResponse(
            results=[DeletableGroupResult(group_id="g", error_code=next(errors))]
        )

    with scripted({DELETE_GROUPS: deleted}) as kafka:
        base = ["--bootstrap-server", kafka.address, "--delete", "--group", "g"]
        code, out, _ = groups_cli(capsys, *base)
        assert (code, out) == (0, "Deletion of requested consumer groups ('g') was successful.\n")
        code, out, _ = groups_cli(capsys, *base, "--json")
        assert code == 1
        assert json.loads(out) == [{"group": "g", "error": "NON_EMPTY_GROUP"}]
        asked = [api for api, _, _ in kafka.seen]
    assert asked == [FIND_COORDINATOR, DELETE_GROUPS] * 2


def described_modern(request: Any, version: int) -> ConsumerGroupDescribeResponse:
    assert request.group_ids == ["g"]
    member = cgd.Member(member_id="m1", member_epoch=3, client_id="c1", client_host="/h")
    return ConsumerGroupDescribeResponse(
        groups=[
            cgd.DescribedGroup(
                group_id="g", group_state="Stable", group_epoch=3, assignment_epoch=3,
                assignor_name="uniform", members=[member],
            )
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answers", "asked"),
    [
        ({DESCRIBE_GROUPS: described("Stable", MEMBER)}, [DESCRIBE_GROUPS]),
        # DescribeGroups describes a group of KIP-848's consumer protocol as Dead.
        (
            {DESCRIBE_GROUPS: described("Dead"), CONSUMER_GROUP_DESCRIBE: described_modern},
            [DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE],
        ),
    ],
    ids=["classic", "consumer-protocol"],
)
def test_reset_offsets_is_refused_while_the_group_has_members(
    capsys: pytest.CaptureFixture[str], answers: Mapping[int, Script], asked: list[int]
) -> None:
    with scripted(answers) as kafka:
        code, _, err = groups_cli(
            capsys, "--bootstrap-server", kafka.address, "--reset-offsets", "--group", "g",
            "--all-topics", "--to-earliest", "--execute",
        )  # fmt: skip
        sent = [api for api, _, _ in kafka.seen]
    assert code == 1
    assert "Assignments can only be reset if the group 'g' is inactive" in err
    assert "current state is Stable" in err
    assert sent == [FIND_COORDINATOR, *asked]  # neither OffsetFetch nor OffsetCommit


@contextmanager
def grpc_listener() -> Iterator[str]:
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(None)


class Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def metrics_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize(
    ("listener", "answered", "said"),
    [
        (grpc_listener, "answered HTTP/2", "not a Kafka listener"),
        (metrics_endpoint, "answered HTTP/1", "HTTP server"),
    ],
)
@pytest.mark.parametrize(
    "action",
    [
        ["--describe", "--group", "g"],
        ["--delete", "--group", "g"],
        ["--reset-offsets", "--group", "g", "--all-topics", "--to-latest"],
    ],
)
def test_a_port_that_is_no_kafka_listener_is_named_at_once(
    capsys: pytest.CaptureFixture[str], listener: Any, answered: str, said: str, action: list[str]
) -> None:
    with listener() as address:
        code, _, err = groups_cli(capsys, "--bootstrap-server", address, *action)
    assert code == 1
    assert f"{address} {answered}" in err
    assert said in err


def not_ready_first(errors: list[int], then: Script) -> Script:
    """Answers each of `errors` in turn (as the API's error code), then as `then` does."""
    left = list(errors)

    def answer(request: Any, version: int) -> Any:
        if not left:
            return then(request, version)
        code = left.pop(0)
        if isinstance(request, FindCoordinatorRequest):
            return FindCoordinatorResponse(
                coordinators=[Coordinator(key="g", error_code=code, error_message="not yet")]
            )
        if isinstance(request, DeleteGroupsRequest):
            return DeleteGroupsResponse(
                results=[DeletableGroupResult(group_id="g", error_code=code)]
            )
        if isinstance(request, ListGroupsRequest):
            return ListGroupsResponse(error_code=code)
        return DescribeGroupsResponse(groups=[DescribedGroup(group_id="g", error_code=code)])

    return answer


NOT_AVAILABLE = CoordinatorNotAvailableError.code
LOADING = CoordinatorLoadInProgressError.code
MOVED = NotCoordinatorError.code


def test_a_fresh_clusters_coordinator_is_waited_for_and_the_wait_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """__consumer_offsets being created (COORDINATOR_NOT_AVAILABLE), then loaded
    (COORDINATOR_LOAD_IN_PROGRESS), then moved (NOT_COORDINATOR): the describe succeeds."""
    monkeypatch.setattr(coordinator_wait, "NOTE_AFTER_MS", 0)  # say it at once
    with scripted({}) as kafka:
        kafka.answers[FIND_COORDINATOR] = not_ready_first(
            [NOT_AVAILABLE, NOT_AVAILABLE], lambda r, v: coordinator_is(kafka)
        )
        kafka.answers[DESCRIBE_GROUPS] = not_ready_first([LOADING, MOVED], described("Empty"))
        kafka.answers[OFFSET_FETCH] = nothing_committed
        code, out, err = groups_cli(
            capsys, "--bootstrap-server", kafka.address, "--describe", "--group", "g", "--json"
        )
        asked = [api for api, _, _ in kafka.seen]
    assert (code, json.loads(out)) == (0, [])
    assert asked == [
        FIND_COORDINATOR, FIND_COORDINATOR, FIND_COORDINATOR, DESCRIBE_GROUPS,
        FIND_COORDINATOR, DESCRIBE_GROUPS, FIND_COORDINATOR, DESCRIBE_GROUPS, OFFSET_FETCH,
    ]  # fmt: skip
    (note,) = err.splitlines()  # one note: the next is due only 10 s later
    assert note.startswith(
        "replog consumer-groups: describing group 'g': waiting for the group coordinator ("
    )
    assert "left of --timeout 30000 ms): " in note and "COORDINATOR_NOT_AVAILABLE" in note


def test_delete_and_list_wait_for_their_coordinator_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def listed(request: Any, version: int) -> ListGroupsResponse:
        return ListGroupsResponse(
            groups=[ListedGroup(group_id="g", protocol_type="consumer", group_state="Empty")]
        )

    def deleted(request: Any, version: int) -> DeleteGroupsResponse:
        return DeleteGroupsResponse(results=[DeletableGroupResult(group_id="g", error_code=0)])

    with scripted({}) as kafka:
        kafka.answers[DELETE_GROUPS] = not_ready_first([LOADING], deleted)
        kafka.answers[LIST_GROUPS] = not_ready_first([LOADING, LOADING], listed)

        async def brokers(config: object) -> list[tuple[int, str]]:
            return [(7, kafka.address)]

        monkeypatch.setattr(consumer_groups, "_brokers", brokers)
        base = ["--bootstrap-server", kafka.address]
        code, out, err = groups_cli(capsys, *base, "--delete", "--group", "g")
        assert (code, out, err) == (
            0,
            "Deletion of requested consumer groups ('g') was successful.\n",
            "",
        )
        code, out, err = groups_cli(capsys, *base, "--list")
        assert (code, out, err) == (0, "g\n", "")
        asked = [api for api, _, _ in kafka.seen]
    assert asked == [
        FIND_COORDINATOR, DELETE_GROUPS, FIND_COORDINATOR, DELETE_GROUPS,
        LIST_GROUPS, LIST_GROUPS, LIST_GROUPS,
    ]  # fmt: skip


def test_a_coordinator_not_ready_within_the_timeout_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with scripted({}) as kafka:
        kafka.answers[FIND_COORDINATOR] = not_ready_first([NOT_AVAILABLE] * 1000, described("x"))
        code, out, err = groups_cli(
            capsys,
            "--bootstrap-server", kafka.address, "--describe", "--group", "g", "--timeout", "400",
        )  # fmt: skip
        tries = len(kafka.seen)
    assert (code, out) == (1, "")
    assert err.startswith(
        "replog consumer-groups: describing group 'g': the group coordinator was not ready "
        "within 400 ms (--timeout): "
    )
    assert "COORDINATOR_NOT_AVAILABLE" in err
    assert 2 <= tries <= 6  # backing off: 100, 200, then what is left


@pytest.mark.parametrize("timeout", ["0", "soon"])
def test_the_timeout_is_a_positive_number_of_milliseconds(
    capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["consumer-groups", "--list", "--timeout", timeout])
    assert exited.value.code == 2
    assert "--timeout" in capsys.readouterr().err
