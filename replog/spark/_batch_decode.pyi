# The compiled record decoder (_batch_decode.c, built by setup.py): its one function.
from collections.abc import Sequence

Headers = list[tuple[tuple[str, bytes | None], ...]]

def decode(
    buffer: bytes | memoryview,
    spans: Sequence[tuple[int, int]],
    batches: Sequence[tuple[int, int, int, bool]],
) -> (
    tuple[
        bytearray, bytearray, bytes, bytes, bytes | None, bytes, bytes, bytes | None, Headers | None
    ]
    | None
): ...
