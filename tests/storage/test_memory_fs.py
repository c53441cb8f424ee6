"""`MemoryFileSystem` scenarios the crash model does not cover: nested directories whose
parents were or were not synced, renames and removals of directories, the small-file writes'
promises (`atomic_write`, `write_new_file`, `deferred_sync`), handles after a crash, regions,
faults (a failed sync's lost bytes) and the operation hook, and the operating system's errors
(replog/storage/memory_fs.py, Rules)."""

from __future__ import annotations

import errno

import pytest

from replog.errors import KafkaStorageError
from replog.storage.fs import SegmentFile
from replog.storage.memory_fs import MemoryFileSystem


@pytest.fixture
def fs() -> MemoryFileSystem:
    made = MemoryFileSystem(clock=lambda: 7)
    made.make_dirs("/logs")
    made.fsync_dir("/")
    return made


def _synced_log(fs: MemoryFileSystem) -> SegmentFile:
    """`/logs/0.log` holding b"synced", synced with its directory entry."""
    file = fs.open_segment_file("/logs/0.log")
    file.append(b"synced")
    file.fsync()
    fs.fsync_dir("/logs")
    return file


def test_a_new_directory_survives_a_crash_only_once_its_parent_is_synced(
    fs: MemoryFileSystem,
) -> None:
    fs.make_dir("/logs/t-0")
    fs.write_bytes("/logs/t-0/a", b"data")  # the file and its directory's entry synced...
    fs.fsync_dir("/logs/t-0")
    fs = fs.crash()
    assert fs.list_dir("/logs") == []  # ...but not the directory's own entry in /logs
    fs.make_dir("/logs/t-0")
    fs.write_bytes("/logs/t-0/a", b"data")
    fs.fsync_dir("/logs/t-0")
    fs.fsync_dir("/logs")
    fs = fs.crash()
    assert fs.read_bytes("/logs/t-0/a") == b"data"


def test_an_unsynced_rename_of_a_directory_reverts_with_its_contents(fs: MemoryFileSystem) -> None:
    fs.make_dir("/logs/t-0")
    fs.write_new_file("/logs/t-0/a", b"kept")  # synced with its directory
    fs.fsync_dir("/logs")
    fs.rename("/logs/t-0", "/logs/t-0.abc-delete")
    fs = fs.crash()
    assert fs.list_dir("/logs") == ["t-0"]
    assert fs.read_bytes("/logs/t-0/a") == b"kept"
    fs.rename("/logs/t-0", "/logs/t-0.abc-delete")
    fs.fsync_dir("/logs")
    fs = fs.crash()
    assert fs.list_dir("/logs") == ["t-0.abc-delete"]


def test_an_unsynced_tree_removal_brings_back_what_was_synced(fs: MemoryFileSystem) -> None:
    fs.make_dir("/logs/t-0")
    fs.write_new_file("/logs/t-0/a", b"synced")
    fs.write_bytes("/logs/t-0/b", b"never synced", fsync=False)
    fs.fsync_dir("/logs")
    fs.remove_tree("/logs/t-0")
    assert not fs.exists("/logs/t-0")
    fs = fs.crash()
    assert fs.list_dir("/logs/t-0") == ["a"]  # b's entry was never synced
    fs.remove_tree("/logs/t-0")
    fs.fsync_dir("/logs")
    fs = fs.crash()
    assert fs.list_dir("/logs") == []


def test_a_file_renamed_over_another_before_its_data_was_synced_is_empty_after_a_crash(
    fs: MemoryFileSystem,
) -> None:
    """The producer snapshot's way (write without sync, rename, sync the directory): the
    entry survives, the data does not."""
    fs.write_bytes("/logs/s.tmp", b"unsynced", fsync=False)
    fs.rename("/logs/s.tmp", "/logs/s")
    fs.fsync_dir("/logs")
    fs = fs.crash()
    assert fs.read_bytes("/logs/s") == b""


def test_atomic_write_leaves_the_old_or_the_new_content(fs: MemoryFileSystem) -> None:
    fs.atomic_write("/logs/cp", b"old")
    fs = fs.crash()
    assert fs.read_bytes("/logs/cp") == b"old"
    fs.fail_next("sync", "/logs")  # the directory's sync after the rename fails
    with pytest.raises(OSError):
        fs.atomic_write("/logs/cp", b"new")
    assert fs.read_bytes("/logs/cp") == b"new"
    fs = fs.crash()
    assert fs.read_bytes("/logs/cp") == b"old"
    assert fs.list_dir("/logs") == ["cp"]


def test_a_deferred_block_makes_its_writes_durable_only_at_its_end(fs: MemoryFileSystem) -> None:
    with pytest.raises(OSError, match="crashed"), fs.deferred_sync():
        fs.atomic_write("/logs/cp", b"v1")
        fs.write_new_file("/logs/new", b"v2")
        restarted = fs.crash()  # inside the block: nothing was synced yet
    assert restarted.list_dir("/logs") == []
    with restarted.deferred_sync():
        restarted.atomic_write("/logs/cp", b"v1")
        restarted.write_new_file("/logs/new", b"v2")
    after = restarted.crash()
    assert after.read_bytes("/logs/cp") == b"v1"
    assert after.read_bytes("/logs/new") == b"v2"


def test_a_killed_process_leaves_its_unsynced_writes_to_its_successor_until_a_power_loss(
    fs: MemoryFileSystem,
) -> None:
    file = _synced_log(fs)
    file.append(b"+cached")
    fs.write_bytes("/logs/new", b"unsynced", fsync=False)
    restarted = fs.kill()
    with pytest.raises(OSError):
        file.append(b"late")  # the dead process's handle
    assert restarted.read_bytes("/logs/0.log") == b"synced+cached"
    assert restarted.read_bytes("/logs/new") == b"unsynced"
    after_power_loss = restarted.crash()
    assert after_power_loss.read_bytes("/logs/0.log") == b"synced"
    assert not after_power_loss.exists("/logs/new")


def test_a_crashed_file_system_is_gone_for_its_dead_process(fs: MemoryFileSystem) -> None:
    """What a killed process still holds cannot touch the disk its successor uses."""
    file = fs.open_segment_file("/logs/0.log")
    restarted = fs.crash()
    for touch in (
        lambda: fs.write_bytes("/logs/late", b"from the dead"),
        lambda: fs.list_dir("/logs"),
        lambda: file.append(b"late"),
        lambda: fs.crash(),
    ):
        with pytest.raises(OSError):
            touch()
    assert restarted.list_dir("/logs") == []


def test_each_memory_file_system_defers_its_own_syncs() -> None:
    """Two simulated disks in one thread: a block on one does not defer the other's syncs."""
    first, second = MemoryFileSystem(), MemoryFileSystem()
    with first.deferred_sync():
        second.write_new_file("/x", b"synced now")
        second = second.crash()
    assert second.read_bytes("/x") == b"synced now"


def test_a_new_file_whose_write_fails_is_removed(fs: MemoryFileSystem) -> None:
    fs.fill_after(3)
    with pytest.raises(OSError) as full:
        fs.write_new_file("/logs/p", b"too long")
    assert full.value.errno == errno.ENOSPC
    assert not fs.exists("/logs/p")
    assert fs.used_bytes == 0


def test_a_full_disk_keeps_no_part_of_an_append_and_gives_space_back(
    fs: MemoryFileSystem,
) -> None:
    file = fs.open_segment_file("/logs/0.log")
    fs.fill_after(10)
    assert file.append([b"12345", b"678"]) == 0
    with pytest.raises(OSError) as full:
        file.append(b"abc")
    assert full.value.errno == errno.ENOSPC
    assert file.size == 8 and file.read(0, 100) == b"12345678"
    fs.remove("/logs/0.log")  # removal gives the space back
    other = fs.open_segment_file("/logs/1.log")
    assert other.append(b"0123456789") == 0


def test_files_opened_before_a_crash_are_dead_after_it(fs: MemoryFileSystem) -> None:
    file = fs.open_segment_file("/logs/0.log")
    file.append(b"abc")
    file.fsync()
    fs.fsync_dir("/logs")
    fs = fs.crash()
    with pytest.raises(OSError) as dead:
        file.read(0, 3)
    assert dead.value.errno == errno.EBADF
    reopened = fs.open_segment_file("/logs/0.log", create=False)
    assert reopened.size == 3 and reopened.read_fully(0, 3) == b"abc"
    reopened.close()
    with pytest.raises(OSError):
        reopened.append(b"d")


def test_a_region_reads_the_file_when_sent(fs: MemoryFileSystem) -> None:
    file = fs.open_segment_file("/logs/0.log")
    file.append(b"0123456789")
    region = file.region(2, 5)
    assert len(region) == 5 and not hasattr(region, "fileno")
    assert region.read() == b"23456"
    file.truncate(4)
    with pytest.raises(KafkaStorageError, match="cut back"):
        region.read()


def test_faults_hit_only_matching_paths_and_only_as_often_as_asked(fs: MemoryFileSystem) -> None:
    fs.fail_next("write", "*.log", errno.EIO, times=2)
    index = fs.open_segment_file("/logs/0.index")
    data = fs.open_segment_file("/logs/0.log")
    index.append(b"fine")
    for _ in range(2):
        with pytest.raises(OSError) as failed:
            data.append(b"x")
        assert failed.value.errno == errno.EIO and failed.value.filename == "/logs/0.log"
    data.append(b"x")
    assert data.read(0, 10) == b"x"
    with pytest.raises(ValueError, match="unknown operation"):
        fs.fail_next("fsync", "*")


def test_a_failed_syncs_bytes_stay_readable_and_never_reach_the_disk(
    fs: MemoryFileSystem,
) -> None:
    file = _synced_log(fs)
    file.append(b"+lost")
    fs.fail_next("sync", "/logs/0.log")
    with pytest.raises(OSError):
        file.fsync()
    file.append(b"+later")
    file.fsync()  # writes what changed since the failed sync, not what that one lost
    assert file.read(0, 100) == b"synced+lost+later"
    restarted = fs.kill()  # the page cache survives: the lost bytes still read
    assert restarted.read_bytes("/logs/0.log") == b"synced+lost+later"
    assert restarted.crash().read_bytes("/logs/0.log") == b"synced" + bytes(5) + b"+later"


def test_a_rewrite_of_a_failed_syncs_bytes_syncs_again(fs: MemoryFileSystem) -> None:
    file = fs.open_segment_file("/logs/0.log")
    fs.fsync_dir("/logs")
    file.append(b"first")
    fs.fail_next("sync", "/logs/0.log")
    with pytest.raises(OSError):
        file.fdatasync()
    file.truncate(0)
    file.append(b"again")
    file.fdatasync()
    assert fs.crash().read_bytes("/logs/0.log") == b"again"


def test_a_failed_sync_of_the_file_system_loses_every_files_unsynced_bytes(
    fs: MemoryFileSystem,
) -> None:
    fs.write_bytes("/logs/cp", b"12345678", fsync=False)
    fs.fsync_dir("/logs")
    fs.fail_next("sync", "/logs")
    with pytest.raises(OSError), fs.deferred_sync():
        fs.fsync_dir("/logs")  # deferred: the block's end syncs the file system, and fails
    fs.sync_file_systems(["/logs"])
    assert fs.read_bytes("/logs/cp") == b"12345678"
    assert fs.crash().read_bytes("/logs/cp") == bytes(8)  # its size reached the disk, no data


def test_the_hook_sees_every_operation_and_may_refuse_it(fs: MemoryFileSystem) -> None:
    seen: list[tuple[str, str]] = []
    fs.on_operation = lambda op, path: seen.append((op, path))
    file = fs.open_segment_file("/logs/0.log")
    file.append(b"a")
    file.fdatasync()
    fs.rename("/logs/0.log", "/logs/1.log")
    assert seen == [
        ("open", "/logs/0.log"),
        ("write", "/logs/0.log"),
        ("sync", "/logs/0.log"),
        ("rename", "/logs/0.log"),
    ]

    def refuse(op: str, path: str) -> None:
        raise OSError(errno.EIO, "slow disk gave up", path)

    fs.on_operation = refuse
    with pytest.raises(OSError, match="slow disk"):
        fs.list_dir("/logs")


def test_errors_are_the_operating_systems(fs: MemoryFileSystem) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open_segment_file("/logs/missing", create=False)
    with pytest.raises(FileNotFoundError):
        fs.make_dir("/nowhere/t-0")
    fs.create_empty_file("/logs/a")
    with pytest.raises(FileExistsError):
        fs.create_empty_file("/logs/a")
    with pytest.raises(FileExistsError):
        fs.make_dir("/logs/a")
    with pytest.raises(NotADirectoryError):
        fs.list_dir("/logs/a")
    with pytest.raises(IsADirectoryError):
        fs.read_bytes("/logs")
    fs.make_dirs("/logs/d/e")
    with pytest.raises(OSError) as not_empty:
        fs.rename("/logs/a", "/logs/d")
    assert not_empty.value.errno == errno.EISDIR
    with pytest.raises(OSError) as into_itself:
        fs.rename("/logs/d", "/logs/d/e/f")
    assert into_itself.value.errno == errno.EINVAL
    assert fs.read_bytes("/logs/missing") is None
    fs.remove("/logs/missing")  # nothing to remove: nothing happens
    assert fs.list_subdirs("/logs") == ["d"]
    assert fs.mtime_ms("/logs/a") == 7


def test_durable_files_are_what_a_crash_now_would_keep(fs: MemoryFileSystem) -> None:
    fs.make_dirs("/logs/a")
    fs.write_bytes("/logs/a/synced", b"kept", fsync=True)
    fs.write_bytes("/logs/a/unsynced", b"lost", fsync=False)
    assert fs.durable_files("/logs/a") == {}  # the directory's entry in /logs is not synced
    fs.fsync_dir("/logs")
    fs.fsync_dir("/logs/a")
    segment = fs.open_segment_file("/logs/a/synced")
    segment.append(b" and more")  # not synced: a crash would not keep it
    durable = fs.durable_files("/logs/a")
    assert durable == {"synced": b"kept", "unsynced": b""}
    assert fs.durable_files("/logs/missing") == {}
    after = fs.crash()
    assert {name: after.read_bytes(f"/logs/a/{name}") for name in durable} == durable
