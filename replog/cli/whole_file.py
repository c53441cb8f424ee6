"""Replacing a file whole: the new content written to `<path>.tmp`, then renamed over the
file, so a reader sees the old file or the new one, never half of one.

Rules:
- A `.tmp` left behind (a crash, another user's file, a symlink planted there) is unlinked
  first and the new one created with O_EXCL and O_NOFOLLOW: it never keeps an old mode or
  owner and never writes through a link. A private file is its owner's only from its
  creation (0600).
- An `OSError` is the caller's.
"""

from __future__ import annotations

import contextlib
import os


def replace_whole(path: str, data: bytes, *, private: bool = False) -> None:
    """Replace `path` by `data` (module rules); `private`: 0600, else 0644 (less the umask)."""
    temporary = path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
