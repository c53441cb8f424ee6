"""Replacing a private file whole (`whole_file`, used by `cluster_sasl.write_private` and the
local cluster's certificates): a `.tmp` left behind never lends its mode, and a symlink
planted there is never written through."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from replog.cli.cluster_sasl import write_private
from replog.cli.cluster_tls_files import ClusterTlsFiles
from replog.cli.local_certificates import ensure_certificates
from replog.cli.whole_file import replace_whole


def test_a_left_tmp_does_not_lend_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "admin.password"
    left = tmp_path / "admin.password.tmp"
    left.write_text("old")
    left.chmod(0o644)
    write_private(str(path), "secret\n")
    assert path.read_text() == "secret\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not left.exists()


def test_a_symlink_planted_at_the_tmp_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    path = tmp_path / "client.key"
    planted = tmp_path / "client.key.tmp"
    planted.symlink_to(victim)
    write_private(str(path), "key")
    assert victim.read_text() == "untouched"
    assert path.read_text() == "key" and not path.is_symlink()
    planted.symlink_to(victim)
    replace_whole(str(path), b"key again", private=True)
    assert victim.read_text() == "untouched"
    assert path.read_text() == "key again" and not path.is_symlink()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_the_cluster_certificates_keys_are_written_private_past_a_left_tmp(
    tmp_path: Path,
) -> None:
    files = ClusterTlsFiles(str(tmp_path))
    os.makedirs(files.directory, mode=0o700)
    left = Path(files.ca_key + ".tmp")
    left.write_text("old")
    left.chmod(0o644)
    written = ensure_certificates(files, [(1, ["127.0.0.1"])])
    assert files.ca_key in written and not left.exists()
    for key in (files.ca_key, files.client_key, files.node_keystore(1)):
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600, key
