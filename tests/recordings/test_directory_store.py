"""The directory recording store: whole files or none, keys that stay inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from parley.recordings.directory import DirectoryStore

pytestmark = pytest.mark.anyio


async def test_directory_store_put_find_delete(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "recordings")
    assert await store.find("org_1/c1.wav") is None
    await store.put("org_1/c1.wav", b"RIFF1")
    await store.put("org_1/c1.wav", b"RIFF22")  # replaced whole
    found = await store.find("org_1/c1.wav")
    assert found is not None
    assert found.path.read_bytes() == b"RIFF22"
    assert found.size == 6
    assert [p.name for p in (tmp_path / "recordings" / "org_1").iterdir()] == ["c1.wav"]
    await store.delete("org_1/c1.wav")
    await store.delete("org_1/c1.wav")  # nothing there: nothing to do
    assert await store.find("org_1/c1.wav") is None


@pytest.mark.parametrize("key", ["../escape.wav", "/etc/passwd", "org/../../x.wav", "", "."])
async def test_directory_store_refuses_keys_leaving_the_directory(tmp_path: Path, key: str) -> None:
    store = DirectoryStore(tmp_path / "recordings")
    with pytest.raises(ValueError, match="not a recording key"):
        await store.put(key, b"x")


async def test_directory_store_failed_write_leaves_no_partial_file(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    (root / "org_1").mkdir(parents=True)
    (root / "org_1" / "c1.wav").mkdir()  # a directory where the file would go: rename fails
    with pytest.raises(IsADirectoryError):
        await DirectoryStore(root).put("org_1/c1.wav", b"RIFF")
    assert [p.name for p in (root / "org_1").iterdir()] == ["c1.wav"]  # no .part left
