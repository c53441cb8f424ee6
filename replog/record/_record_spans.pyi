# The compiled span scan (_record_spans.c, built by setup.py): its one function.
Span = tuple[int, int, bytes | None, bool, int, int, int]

def scan(
    data: bytes, position: int, end: int, records_count: int, last_offset_delta: int
) -> list[Span] | None: ...
