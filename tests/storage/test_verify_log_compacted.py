"""`replog verify-log` over a compacted partition the log cleaner rewrote (`tests/compacted_log.py`:
sparse batches, an empty producer batch, gaps inside and between segments): clean when the log
dir's cleaner-offset-checkpoint lists the partition or with `--compacted`, damage when neither
says it may be compacted; a damaged batch is still found, and a checkpoint file that does not
read is a problem naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replog.cli.main import main
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint
from tests.compacted_log import cleaned_log


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    cleaned_log(tmp_path / "logs" / "t-0")
    return tmp_path / "logs"


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["verify-log", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_the_cleaners_gaps_are_damage_unless_the_partition_may_be_compacted(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = verify(capsys, str(log_dir))
    problems = [p["problem"] for p in found["problems"]]  # type: ignore[attr-defined,index]
    assert code == 1
    assert problems and all("records_count" in p for p in problems), problems

    assert verify(capsys, "--compacted", str(log_dir))[0] == 0
    CleanerCheckpoint(str(log_dir)).update(("t", 0), 30)
    for target in (log_dir, log_dir / "t-0"):
        code, found = verify(capsys, str(target))
        assert (code, found["clean"], found["partitions"]) == (0, True, 1)


def test_damage_is_still_found_in_a_compacted_partition(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = sorted((log_dir / "t-0").glob("*.log"))[-1]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    code, found = verify(capsys, "--compacted", str(log_dir))
    assert code == 1
    assert ["CRC-32C" in p["problem"] for p in found["problems"]] == [True]  # type: ignore[attr-defined,index]


def test_a_checkpoint_that_does_not_read_is_a_problem(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(CleanerCheckpoint(str(log_dir)).path)
    path.write_text("0\n1\nt zero 5\n")
    code, found = verify(capsys, "--compacted", str(log_dir))
    assert code == 1
    assert [p["file"] for p in found["problems"]] == [str(path)]  # type: ignore[attr-defined,index]
