"""How the Controller service's answers say "failed" and "none", read the same way for every RPC.

- `error_from_status`: an item's or a whole answer's `ErrorStatus` -> None, or the
  `replog.errors` exception for its code, carrying the controller's message (a code this client
  does not know keeps the server's name for it).
- `raise_first_error`: a list of per-item results -> "all succeeded or raise", which is what a
  command-line tool wants.
- `NONE` and `known`: -1 on the wire means "none", "unknown" or "default"; here it is None.

Rules: this module needs only `common.proto`'s messages, so every result module can use it
without loading the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from replog.errors import KafkaError, UnknownServerError, error_for_code

if TYPE_CHECKING:
    # Only read, never built here: a command that reads Kafka's answers loads no protobuf.
    from replog.pb import common_pb2

NONE = -1  # "none", "unknown" or "default" on the wire


def error_from_status(status: common_pb2.ErrorStatus) -> KafkaError | None:
    """The exception an ErrorStatus stands for (None for code 0), with the server's message."""
    if status.code == 0:
        return None
    error = error_for_code(status.code, status.message)
    if type(error) is UnknownServerError and status.code != UnknownServerError.code:
        # A code this client does not know: keep the server's name for it, or at least the code.
        name = status.error_name or f"error code {status.code}"
        error = UnknownServerError(f"{name}: {status.message}" if status.message else name)
    return error


class HasError(Protocol):
    @property
    def error(self) -> KafkaError | None: ...


def raise_first_error(results: Iterable[HasError]) -> None:
    """Raise the first item's error, if any item failed."""
    for result in results:
        if result.error is not None:
            raise result.error


def known(value: int) -> int | None:
    return None if value == NONE else value
