"""``fileio.atomic_write`` and ``fileio.copy_atomically`` directly: the target keeps its old
content (the same file) until the write is whole, then has the new content at once; an
exception half-way keeps the old content and leaves no temporary file."""

import os
import shutil

import pytest

from bert_tf import fileio


def _temps(folder, target="out.txt"):
  return [n for n in os.listdir(folder)
          if (fileio.temp_target(n) or ("",))[0] == target]


def test_the_target_is_untouched_until_the_block_closes(tmp_path):
  target = tmp_path / "out.txt"
  target.write_text("old\n")
  inode = target.stat().st_ino
  with fileio.atomic_write(str(target)) as f:
    f.write("new\n")
    f.flush()
    assert target.read_text() == "old\n" and target.stat().st_ino == inode
    [temp] = _temps(tmp_path)  # the new content goes to a temporary name beside it
    assert (tmp_path / temp).read_text() == "new\n"
  assert target.read_text() == "new\n"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_a_new_target_appears_only_when_whole(tmp_path):
  target = tmp_path / "sub" / "out.bin"
  with fileio.atomic_write(str(target), "wb") as f:
    f.write(b"\x00\x01")
    assert not target.exists()
  assert target.read_bytes() == b"\x00\x01"
  assert os.listdir(tmp_path / "sub") == ["out.bin"]


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_an_exception_inside_keeps_the_old_content_and_leaves_no_temp(tmp_path, error):
  target = tmp_path / "out.txt"
  target.write_text("old\n")
  with pytest.raises(error):
    with fileio.atomic_write(str(target)) as f:
      f.write("half of the new")
      raise error()
  assert target.read_text() == "old\n"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_copy_atomically_replaces_the_target_only_when_the_copy_is_whole(tmp_path, monkeypatch):
  source, target = tmp_path / "source.txt", tmp_path / "out.txt"
  source.write_text("new\n" * 1000)
  target.write_text("old\n")
  seen = []
  copyfile = shutil.copyfile

  def watched(src, dst):  # the target while the copy is made
    seen.append(target.read_text())
    copyfile(src, dst)
    seen.append(target.read_text())

  monkeypatch.setattr(shutil, "copyfile", watched)
  fileio.copy_atomically(str(source), str(target))
  assert seen == ["old\n", "old\n"]
  assert target.read_text() == "new\n" * 1000
  assert sorted(os.listdir(tmp_path)) == ["out.txt", "source.txt"]


def test_copy_atomically_failing_half_way_keeps_the_old_content_and_leaves_no_temp(
    tmp_path, monkeypatch):
  source, target = tmp_path / "source.txt", tmp_path / "out.txt"
  source.write_text("new\n" * 1000)
  target.write_text("old\n")

  def half(src, dst):  # a disk that fills up half-way
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as g:
      g.write(f.read()[:100])
    raise OSError(28, "No space left on device", dst)

  monkeypatch.setattr(shutil, "copyfile", half)
  with pytest.raises(OSError, match="No space left"):
    fileio.copy_atomically(str(source), str(target))
  assert target.read_text() == "old\n"
  assert sorted(os.listdir(tmp_path)) == ["out.txt", "source.txt"]
