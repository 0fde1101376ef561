"""Temporary files a stopped process left (``<target>.tmp-<pid>-<8 hex>``, Ctrl-C or a kill in
the middle of a write) are removed by the next write of the same target, and only those: not
a running process's, not another target's, not a user's file of a similar name."""

import os
import subprocess

from bert_tf import fileio


def _dead_pid():
  gone = subprocess.Popen(["true"])
  gone.wait()
  return gone.pid


def test_the_next_write_of_a_target_removes_its_stale_temps(tmp_path):
  dead = _dead_pid()
  target = tmp_path / "eval_results.txt"
  stale = tmp_path / f"eval_results.txt.tmp-{dead}-0123abcd"
  running = tmp_path / f"eval_results.txt.tmp-{os.getpid()}-0123abcd"
  other = tmp_path / f"predictions.json.tmp-{dead}-0123abcd"
  user = tmp_path / "eval_results.txt.tmp-old"
  for path in (stale, running, other, user):
    path.write_text("x")
  with fileio.atomic_write(str(target)) as f:
    f.write("loss = 1.0\n")
  assert target.read_text() == "loss = 1.0\n"
  assert sorted(os.listdir(tmp_path)) == sorted(
      p.name for p in (target, running, other, user))
  # copy_atomically too.
  stale = tmp_path / f"vocab.txt.tmp-{dead}-89abcdef"
  stale.write_text("x")
  fileio.copy_atomically(str(target), str(tmp_path / "vocab.txt"))
  assert not stale.exists() and (tmp_path / "vocab.txt").read_text() == "loss = 1.0\n"
