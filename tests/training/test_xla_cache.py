"""The persistent XLA cache (``bert_tf.training.xla_cache``, ``--xla_cache_dir``): a resumed
run loads the programs its killed run compiled, trains the same numbers, and a damaged entry is
removed and compiled again rather than failing the run."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.training import xla_cache
from tests import warm
from tests.training import test_run_pretraining as pretraining

ROOT = pretraining.ROOT


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
  """A real entry: the file TensorFlow writes for a small XLA program."""
  directory = tmp_path_factory.mktemp("xla_cache")
  program = textwrap.dedent("""
      import tensorflow as tf
      f = tf.function(lambda x: tf.tanh(x @ x) + 1.0, jit_compile=True)
      print(float(tf.reduce_sum(f(tf.ones([8, 8])))))
      """)
  env = {**os.environ, "TF_XLA_FLAGS": f"{xla_cache.FLAG}={directory}",
         "TF_CPP_MIN_LOG_LEVEL": "3"}
  subprocess.run([sys.executable, "-c", program], check=True, env=env, timeout=300,
                 capture_output=True)
  (path,) = [os.path.join(directory, name) for name in os.listdir(directory)]
  return path


def _cut(path, size, tmp_path):
  cut = os.path.join(tmp_path, os.path.basename(path))
  with open(path, "rb") as f, open(cut, "wb") as out:
    out.write(f.read(size))
  return cut


def _field_ends(data):
  """The offsets where the entry's top-level fields end (read with the wire format's own
  rules, byte by byte, independently of the module's reader)."""
  ends, offset = [], 0
  while offset < len(data):
    offset += 1  # the tag: fields 1-3, one byte each
    length, shift = 0, 0
    while True:
      byte = data[offset]
      offset += 1
      length |= (byte & 0x7F) << shift
      shift += 7
      if not byte & 0x80:
        break
    offset += length
    ends.append(offset)
  return ends


def test_a_whole_entry_passes_and_every_cut_one_fails(entry, tmp_path):
  data = open(entry, "rb").read()
  assert xla_cache.entry_is_whole(entry)
  ends = _field_ends(data)
  assert len(ends) == 3 and ends[-1] == len(data)  # key, HLO, executable
  cuts = sorted({0, 1, 2, 3, len(data) - 1, len(data) // 2, *ends[:-1],
                 *(e - 1 for e in ends), *(e + 1 for e in ends[:-1]), *range(4, 60, 3)})
  for size in cuts:
    cut = _cut(entry, size, str(tmp_path))
    assert not xla_cache.entry_is_whole(cut), size
    assert xla_cache.damaged_entries(str(tmp_path)) == [cut], size


def test_an_entry_under_another_programs_name_fails(entry, tmp_path):
  name = os.path.basename(entry).split("__")
  name[2] = str(int(name[2]) + 1)  # another program's fingerprint
  other = tmp_path / "__".join(name)
  other.write_bytes(open(entry, "rb").read())
  assert not xla_cache.entry_is_whole(str(other))
  (tmp_path / "unrelated.txt").write_text("not an entry")
  assert xla_cache.damaged_entries(str(tmp_path)) == [str(other)]


def test_enable_names_its_folder_and_refuses_conflicts(tmp_path):
  tf.config.list_logical_devices()  # TensorFlow has started in this process
  with pytest.raises(BertTfError, match="TensorFlow has started already"):
    xla_cache.enable(str(tmp_path), environ={})
  # Already configured (as the scripts do before TensorFlow starts): accepted as is.
  environ = {"TF_XLA_FLAGS": f"--tf_xla_cpu_global_jit {xla_cache.FLAG}={tmp_path}"}
  assert xla_cache.enable(str(tmp_path), environ=environ) == str(tmp_path)
  with pytest.raises(BertTfError, match=f"already names another XLA cache folder, {tmp_path}"):
    xla_cache.enable(str(tmp_path / "other"), environ=environ)
  (tmp_path / "file").write_text("")
  with pytest.raises(BertTfError, match="is a file, not a folder"):
    xla_cache.enable(str(tmp_path / "file"), environ={})
  assert xla_cache.tf_xla_flags_with("/c", {"TF_XLA_FLAGS": "--a"}) == f"--a {xla_cache.FLAG}=/c"


def test_each_task_of_a_cluster_gets_its_own_folder():
  config = '{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}}'
  assert xla_cache.task_directory("/c", {"TF_CONFIG": config}) == os.path.join("/c", "worker-1")
  assert xla_cache.task_directory("/c", {}) == "/c"
  assert xla_cache.task_directory("/c", {"TF_CONFIG": "not json"}) == "/c"


def _run(workdir, output_dir, cache, extra=(), env=None):
  flags = ["--steps_per_loop=2", "--save_checkpoints_steps=2", "--jit_compile",
           *([f"--xla_cache_dir={cache}"] if cache else []), *extra]
  return warm.run(pretraining._command(workdir, output_dir, 6, flags),  # pylint: disable=protected-access
                  capture_output=True, text=True, cwd=ROOT, timeout=600,
                  env={**pretraining._env(), **(env or {})})  # pylint: disable=protected-access


def _entries(cache):
  return {name: os.path.getmtime(os.path.join(cache, name)) for name in os.listdir(cache)}


workdir = pretraining.workdir  # the module's fixture: TFRecords made by Google's code


def test_a_resumed_run_loads_what_its_killed_run_compiled(workdir, tmp_path):
  cache = tmp_path / "cache"
  killed_dir = tmp_path / "killed"
  # Killed after step 4's progress line, before its save: resumes from ckpt-2.
  killed = _run(workdir, killed_dir, cache, env={"BERT_TF_FAULT": "kill:step:4"})
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  written = _entries(cache)
  assert written and all(xla_cache.entry_is_whole(str(cache / name)) for name in written)
  resumed = _run(workdir, killed_dir, cache)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from {killed_dir}/ckpt-2 at step 2" in resumed.stdout
  # Every program the resumed run ran was loaded: none compiled and written again.
  assert _entries(cache) == written
  # An uninterrupted run over the same cache (another output folder) compiles nothing either,
  # and ends with the same weights.
  straight = _run(workdir, tmp_path / "straight", cache)
  assert straight.returncode == 0, straight.stderr[-3000:]
  assert _entries(cache) == written
  a = pretraining._google_export(tmp_path / "straight")  # pylint: disable=protected-access
  b = pretraining._google_export(killed_dir)  # pylint: disable=protected-access
  assert a.keys() == b.keys()
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)

  # A damaged entry (a run killed while TensorFlow wrote it) is removed and written again.
  largest = max(written, key=lambda name: os.path.getsize(cache / name))
  data = (cache / largest).read_bytes()
  (cache / largest).write_bytes(data[:len(data) // 2])
  again = _run(workdir, tmp_path / "again", cache)
  assert again.returncode == 0, again.stderr[-3000:]
  assert (f"removed a damaged XLA cache entry (compiled again): {cache / largest}"
          in again.stdout)
  assert xla_cache.entry_is_whole(str(cache / largest))


def test_a_cache_folder_that_is_a_file_is_a_one_line_error(workdir, tmp_path):
  (tmp_path / "cache").write_text("")
  result = _run(workdir, tmp_path / "o", tmp_path / "cache")
  assert result.returncode == 1, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      f"run_pretraining.py: error: --xla_cache_dir {tmp_path / 'cache'} is a file, "
      "not a folder")
