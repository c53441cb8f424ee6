"""A node raises its soft open-file limit to the hard one (replog/server/runtime/open_files.py)."""

from __future__ import annotations

import resource

from replog.server.runtime.open_files import raise_open_file_limit


def test_the_soft_limit_is_raised_to_the_hard_one_and_never_lowered() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if hard != resource.RLIM_INFINITY and hard > 64:
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
            assert raise_open_file_limit() == hard
            assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        before = resource.getrlimit(resource.RLIMIT_NOFILE)
        raise_open_file_limit()  # already at the hard limit: nothing changes
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == before
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
