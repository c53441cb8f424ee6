"""The previous run's broker epoch, read from the clean-shutdown markers before any log loads."""

from __future__ import annotations

from pathlib import Path

from replog.checkpoints import CLEAN_SHUTDOWN_MARKER, render_clean_shutdown_marker
from replog.storage.log_manager import clean_shutdown_broker_epoch


def dirs(tmp_path: Path, *epochs: int | bytes | None) -> list[str]:
    made = []
    for index, epoch in enumerate(epochs):
        log_dir = tmp_path / f"d{index}"
        log_dir.mkdir(parents=True)
        if isinstance(epoch, int):
            (log_dir / CLEAN_SHUTDOWN_MARKER).write_bytes(render_clean_shutdown_marker(epoch))
        elif isinstance(epoch, bytes):
            (log_dir / CLEAN_SHUTDOWN_MARKER).write_bytes(epoch)
        made.append(str(log_dir))
    return made


def test_every_dir_holding_the_same_epoch_gives_it_and_keeps_the_markers(tmp_path: Path) -> None:
    log_dirs = dirs(tmp_path, 42, 42)
    assert clean_shutdown_broker_epoch(log_dirs) == 42
    assert all((Path(d) / CLEAN_SHUTDOWN_MARKER).exists() for d in log_dirs)


def test_a_missing_corrupt_or_different_marker_gives_none(tmp_path: Path) -> None:
    assert clean_shutdown_broker_epoch(dirs(tmp_path / "a", 42, None)) == -1
    assert clean_shutdown_broker_epoch(dirs(tmp_path / "b", 42, b"{garbage")) == -1
    assert clean_shutdown_broker_epoch(dirs(tmp_path / "c", 42, 43)) == -1
    assert clean_shutdown_broker_epoch([str(tmp_path / "never-made")]) == -1
