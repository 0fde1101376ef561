"""``fileio.atomic_write`` and ``fileio.copy_atomically`` directly: the target keeps its old
content (the same file) until the write is whole, then has the new content at once; an
exception half-way keeps the old content and leaves no temporary file."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from bert_tf import fileio
from tests.faults import hook


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


def test_write_together_renames_only_once_every_file_is_whole(tmp_path, monkeypatch):
  """Several files as one output: an error writing the second, or Ctrl-C once both are whole
  but none renamed, leaves both earlier files as they were and no temporary file; success
  replaces both."""
  from bert_tf import faults  # pylint: disable=import-outside-toplevel
  a, b = tmp_path / "a.png", tmp_path / "b.html"
  a.write_bytes(b"old png")
  b.write_text("old html")
  with pytest.raises(TypeError):
    fileio.write_together({str(a): b"new png", str(b): 42})  # not text: fails mid-way
  assert (a.read_bytes(), b.read_text()) == (b"old png", "old html")
  assert sorted(os.listdir(tmp_path)) == ["a.png", "b.html"]

  def interrupted(name, number=None):
    if name == "write_together":
      raise KeyboardInterrupt()
  monkeypatch.setattr(faults, "point", interrupted)
  with pytest.raises(KeyboardInterrupt):
    fileio.write_together({str(a): b"new png", str(b): "new html"})
  assert (a.read_bytes(), b.read_text()) == (b"old png", "old html")
  assert sorted(os.listdir(tmp_path)) == ["a.png", "b.html"]
  monkeypatch.undo()
  assert fileio.write_together({str(a): b"new png", str(b): "new html"}) == [str(a), str(b)]
  assert (a.read_bytes(), b.read_text()) == (b"new png", "new html")
  assert sorted(os.listdir(tmp_path)) == ["a.png", "b.html"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_attention_pictures_stopped_before_they_are_whole_leave_the_earlier_pair(
    tmp_path, minilm_path, signum):
  """`bert_tf attention --output_png --output_html` over an earlier pair, stopped (Ctrl-C,
  SIGTERM: the CLI stops at once) when the new PNG and HTML are whole but not yet renamed:
  both earlier pictures stay as they were (the PNG used to be replaced first, so the pair
  was of two texts, or the PNG lost on a failure); the next run removes the temporary files
  and writes the new pair."""
  png, html = tmp_path / "heads.png", tmp_path / "heads.html"
  png.write_bytes(b"earlier png")
  html.write_text("earlier html")
  ready = tmp_path / "ready"
  command = [sys.executable, "-m", "bert_tf", "attention", f"--model={minilm_path}",
             "--layers=0", "--heads=0", f"--output_png={png}", f"--output_html={html}",
             "A different text."]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  process = subprocess.Popen(command, env=hook.env(env, "write_together", ready=ready),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  hook.wait_at_point(process, ready)
  process.send_signal(signum)
  _, err = process.communicate(timeout=120)
  assert process.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], err
  assert (png.read_bytes(), html.read_text()) == (b"earlier png", "earlier html")
  again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert png.read_bytes().startswith(b"\x89PNG") and "A different text." in html.read_text()
  assert sorted(os.listdir(tmp_path)) == ["heads.html", "heads.png", "ready"]


def test_write_together_leaves_no_temporary_file_when_a_rename_fails(tmp_path):
  """A folder where the second file goes (made meanwhile): the rename fails; the first file is
  replaced (renames are the one window), no temporary file is left."""
  a = tmp_path / "a.txt"
  (tmp_path / "b.txt").mkdir()
  with pytest.raises(OSError):
    fileio.write_together({str(a): "new", str(tmp_path / "b.txt"): "new"})
  assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]


def test_the_temporary_file_is_whole_and_closed_when_renamed(tmp_path, monkeypatch):
  """What is renamed onto the target holds everything written: the file is closed (its
  buffer written out) before the rename, so a kill just after the rename cannot leave a short
  target (mutation audit: renaming inside the ``with``, before the close, went unnoticed: the
  target was whole once the block ended, as the other tests look)."""
  target = tmp_path / "out.txt"
  target.write_text("old\n")
  at_rename = []
  commit = fileio.commit

  def watched(tmp, path):  # the temporary file as another process would read it then
    with open(tmp, encoding="utf-8") as f:
      at_rename.append((f.read(), target.read_text()))
    commit(tmp, path)

  monkeypatch.setattr(fileio, "commit", watched)
  with fileio.atomic_write(str(target)) as f:
    f.write("new\n")  # (far below a buffer's size: still in it until the close)
  assert at_rename == [("new\n", "old\n")]
  assert target.read_text() == "new\n"
