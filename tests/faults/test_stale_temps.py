"""Temporary files a stopped process left (``<target>.tmp-<pid>-<8 hex>``, Ctrl-C or a kill in
the middle of a write) are removed by the next write of the same target, and only those: not
a running process's, not another target's, not a user's file of a similar name."""

import os
import subprocess

import pytest

from bert_tf import fileio
from bert_tf.data import pipeline
from bert_tf.errors import BertTfError


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


def test_input_globs_leave_out_a_stopped_data_preps_temporary_file(tmp_path):
  """``--input_file=data-*`` beside a killed data prep's ``data-2.tfrecord.tmp-<pid>-<hex>``
  reads the whole files only (the temp one is half written: a DataLossError mid-training)."""
  names = ["data-0.tfrecord", "data-1.tfrecord", f"data-2.tfrecord.tmp-{_dead_pid()}-0123abcd",
           "data-3.tfrecord.tmp-old"]  # the last is not a temp_name: a user's file
  for name in names:
    (tmp_path / name).write_bytes(b"")
  assert pipeline.expand_file_patterns(f"{tmp_path}/data-*") == [
      str(tmp_path / n) for n in ("data-0.tfrecord", "data-1.tfrecord", "data-3.tfrecord.tmp-old")]
  # Named, not globbed: the user's choice.
  assert pipeline.expand_file_patterns(str(tmp_path / names[2])) == [str(tmp_path / names[2])]
  with pytest.raises(BertTfError) as error:
    pipeline.expand_file_patterns(f"{tmp_path}/data-2*")
  assert str(error.value) == (
      f"no input files match '{tmp_path}/data-2*' (--input_file) (only "
      f"'{tmp_path / names[2]}', the temporary file of a write that is running or was stopped)")


def test_only_whole_temp_names_of_stopped_processes_are_removed(tmp_path):
  """A name is a temporary one only when it is all of ``<target>.tmp-<pid>-<8 hex>``: a user's
  file that starts like one (a copy kept with a suffix) or whose last part is not 8 hex digits
  stays. A temporary folder (a checkpoint written under one) goes when its process has
  stopped, not while it runs (mutation audit: a prefix match, a looser last part and removing
  a running process's folder all went unnoticed)."""
  dead = _dead_pid()
  target = tmp_path / "eval_results.txt"
  users = [f"eval_results.txt.tmp-{dead}-0123abcd.keep", f"eval_results.txt.tmp-{dead}-backup",
           f"eval_results.txt.tmp-{dead}-0123abcde", f"eval_results.txt.tmp-{dead}-0123abc"]
  for name in users:
    (tmp_path / name).write_text("mine")
  running = tmp_path / f"eval_results.txt.tmp-{os.getpid()}-89abcdef"
  stopped = tmp_path / f"eval_results.txt.tmp-{dead}-fedcba98"
  for folder in (running, stopped):
    folder.mkdir()
    (folder / "ckpt.index").write_text("x")
  assert fileio.temp_target(stopped.name) == ("eval_results.txt", dead)
  for name in users:
    assert fileio.temp_target(name) is None, name
  with fileio.atomic_write(str(target)) as f:
    f.write("loss = 1.0\n")
  assert sorted(os.listdir(tmp_path)) == sorted(users + ["eval_results.txt", running.name])
  assert (running / "ckpt.index").read_text() == "x"
