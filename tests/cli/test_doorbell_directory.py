"""The webhook sender's doorbell fits a Unix socket's address whatever TMPDIR is."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from parley.cli.webhook_sender import UNIX_PATH_MAX, doorbell_directory


def test_doorbell_directory_in_tmpdir_when_its_path_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    directory = doorbell_directory()
    assert directory.parent == tmp_path
    assert directory.stat().st_mode & 0o777 == 0o700
    directory.rmdir()


def test_doorbell_directory_in_tmp_when_tmpdir_is_too_long_for_a_socket_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    directory = doorbell_directory()
    try:
        assert directory.parent == Path("/tmp")  # noqa: S108 - the fallback it must take
        assert len(os.fsencode(directory / "doorbell")) <= UNIX_PATH_MAX
        assert directory.stat().st_mode & 0o777 == 0o700
        assert list(deep.iterdir()) == []  # the directory that did not fit is gone
    finally:
        directory.rmdir()
