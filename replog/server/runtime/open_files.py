"""The node process's open-file limit: raised to what the system allows before anything opens.

Rules:
- `raise_open_file_limit()` sets the soft RLIMIT_NOFILE to the hard one (never above it, never
  lower than it was) and returns the limit in force, which the node logs. Linux starts most
  processes at a soft 1,024 under a hard limit hundreds of times larger; a broker holds a
  descriptor per log segment written to (an empty one holds none: `replog/storage/fs.py`),
  per connection and per peer, so the soft default stopped a broker past about a thousand
  written partitions with EMFILE, reported as a storage error. Kafka asks its operators to
  raise the limit; a process may raise its own soft limit up to the hard one, as Go's runtime
  does for every program. The hard limit is the operator's to raise.
- Where the platform has no such limit (no `resource` module), nothing changes: None.
"""

from __future__ import annotations

try:
    import resource
except ImportError:  # not a POSIX system
    resource = None  # type: ignore[assignment]


def raise_open_file_limit() -> int | None:
    """Raise the soft open-file limit to the hard one; the soft limit now (None: no limit
    known). A refusal (a sandbox) leaves the limit as it was."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):
            return soft
        return hard
    if soft == resource.RLIM_INFINITY:
        return None
    return soft
