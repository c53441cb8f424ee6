"""`PlanAsBuilt`: a plan as a request was built from it, while the live plan changes."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from replog.replication.messages import FetchPartition
from replog.server.data_plane.follower_fetch import PlanAsBuilt

KEYS = [("t", p) for p in range(4)]

# One change of the live plan: set a key's entry (at a fetch offset) or drop it (None).
changes = st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.integers(0, 3)), max_size=12)


def _entry(key: tuple[str, int], offset: int) -> FetchPartition:
    return FetchPartition(key[0], key[1], fetch_offset=offset)


@given(
    st.dictionaries(st.sampled_from(KEYS), st.integers(0, 3)),
    changes,
    st.sampled_from(KEYS),
)
def test_get_is_the_plan_as_built(
    initial: dict[tuple[str, int], int],
    applied: list[tuple[tuple[str, int], int | None]],
    asked: tuple[str, int],
) -> None:
    plan = {key: _entry(key, offset) for key, offset in initial.items()}
    as_built = dict(plan)
    view = PlanAsBuilt(plan)
    for key, offset in applied:
        view.keep(key)  # as the fetcher does before each change
        if offset is None:
            plan.pop(key, None)
        else:
            plan[key] = _entry(key, offset)
    default = _entry(("default", 0), 0)
    assert view.get(asked) == as_built.get(asked)
    assert view.get(asked, default) == as_built.get(asked, default)
    # The same answers as the Mapping protocol's own get (through __getitem__).
    assert view.get(asked) == Mapping.get(view, asked)
    assert dict(view) == as_built
