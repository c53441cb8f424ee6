"""`keep_freed_memory`: glibc's thresholds set once per process, nothing done elsewhere."""

from __future__ import annotations

import ctypes
import platform

import pytest

from replog.spark import worker_allocator


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_glibc_thresholds_are_set_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    real = ctypes.CDLL(None).mallopt

    class Libc:
        @property
        def mallopt(self):  # type: ignore[no-untyped-def]
            def recording(option: int, value: int) -> int:
                calls.append((option, value))
                return int(real(option, value))

            return recording

    monkeypatch.setattr(worker_allocator, "_applied", None)
    monkeypatch.setattr(worker_allocator.ctypes, "CDLL", lambda _: Libc())
    assert worker_allocator.keep_freed_memory() is True
    assert worker_allocator.keep_freed_memory() is True  # once per process
    assert calls == [
        (worker_allocator.M_MMAP_THRESHOLD, worker_allocator.MMAP_THRESHOLD),
        (worker_allocator.M_TRIM_THRESHOLD, worker_allocator.TRIM_THRESHOLD),
    ]


def test_nothing_is_done_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_allocator, "_applied", None)
    monkeypatch.setattr(worker_allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    monkeypatch.setattr(worker_allocator.ctypes, "CDLL", pytest.fail)
    assert worker_allocator.keep_freed_memory() is False
