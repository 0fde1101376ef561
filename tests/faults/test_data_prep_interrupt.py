"""create_pretraining_data.py stopped mid-run. The run waits at a named point (``bert_tf/faults``:
``records_written``, after the n-th output file's share or shard of records) while the test
signals it, so the signal always lands mid-run. Ctrl-C (SIGINT to the whole process group, as
a terminal sends it) is one line and exit 130; SIGTERM (to the process alone, as a preemption
sends it) is one line and exit 143; either way no file is left behind and no worker lives on.
SIGKILL at seeded points, then the same command, gives the uninterrupted outputs byte for
byte."""

import hashlib
import os
import random
import signal
import subprocess
import sys

import pytest

from bert_tf.data.pretraining import run as data_run
from tests.conftest import FIXTURES
from tests.faults import hook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOTU = str(FIXTURES / "pretraining" / "sotu_sample.txt")
PROG = "create_pretraining_data.py"
NAMES = ["a.tfrecord", "b.tfrecord"]
SHARD_SIZE_MB = 0.01
_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _command(vocab, folder, workers):
  outputs = ",".join(str(folder / n) for n in NAMES)
  return [sys.executable, os.path.join(ROOT, "data_prep", PROG), f"--input_file={SOTU}",
          f"--output_file={outputs}", f"--vocab_file={vocab}", "--dupe_factor=10",
          "--max_seq_length=32", "--max_predictions_per_seq=5", f"--num_workers={workers}",
          f"--shard_size_mb={SHARD_SIZE_MB}"]


def _passes(workers):
  """How often a whole run passes ``records_written``: once per output file in the reference
  mode (all records in one write), once per shard in sharded mode."""
  if workers == "0":
    return len(NAMES)
  return len(data_run.plan_shards([SOTU], int(SHARD_SIZE_MB * (1 << 20))))


def _listing(folder):
  return sorted(os.listdir(folder))


def _digests(folder):
  return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
          for name in _listing(folder)}


@pytest.fixture(name="clean", scope="module")
def _clean(tmp_path_factory, uncased_vocab):
  """The uninterrupted outputs' digests, per --num_workers (the reference mode and sharded
  mode draw different records)."""
  cache = {}

  def run(workers):
    if workers not in cache:
      folder = tmp_path_factory.mktemp(f"clean{workers}")
      result = subprocess.run(_command(uncased_vocab, folder, workers), cwd=ROOT, env=_ENV,
                              capture_output=True, text=True, timeout=600)
      assert result.returncode == 0, result.stderr[-2000:]
      assert _listing(folder) == NAMES
      cache[workers] = _digests(folder)
    return cache[workers]

  return run


def _start_at(command, folder, n):
  """The command in its own process group, waiting at its n-th ``records_written``: its
  temporary outputs (and, sharded, the workers' spill folder) exist."""
  process = hook.start_at_point(command, _ENV, "records_written", n, folder.parent / "ready",
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
  assert any(".tmp-" in name for name in os.listdir(folder)), os.listdir(folder)
  return process


def _group_gone(pgid):
  try:
    os.killpg(pgid, 0)
  except ProcessLookupError:
    return True
  return False


@pytest.mark.parametrize("workers,signum,code,word,point", [
    ("0", signal.SIGINT, 130, "interrupted", "first"),
    ("2", signal.SIGINT, 130, "interrupted", "first"),
    ("0", signal.SIGTERM, 143, "terminated", "last"),
    ("2", signal.SIGTERM, 143, "terminated", "last")])
def test_ctrl_c_and_sigterm_are_one_line_and_leave_nothing(tmp_path, uncased_vocab, clean,
                                                           workers, signum, code, word, point):
  folder = tmp_path / "out"
  folder.mkdir()
  command = _command(uncased_vocab, folder, workers)
  process = _start_at(command, folder, 1 if point == "first" else _passes(workers))
  if signum == signal.SIGINT:
    os.killpg(process.pid, signum)  # a terminal's Ctrl-C: the whole foreground group
  else:
    process.send_signal(signum)  # a preemption's SIGTERM: the main process alone
  _, stderr = process.communicate(timeout=600)
  assert process.returncode == code, stderr[-2000:]
  assert stderr.strip().splitlines() == [f"{PROG}: {word}"]
  assert _listing(folder) == []
  assert _group_gone(process.pid), "a worker outlived the stopped run"
  again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_ENV,
                         timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert _digests(folder) == clean(workers)


@pytest.mark.parametrize("workers,i", [("0", 0), ("0", 1), ("2", 0), ("2", 1)])
def test_sigkill_while_writing_then_the_same_command(tmp_path, uncased_vocab, clean, workers, i):
  folder = tmp_path / "out"
  folder.mkdir()
  command = _command(uncased_vocab, folder, workers)
  # The i-th of a seeded order of the run's points: distinct points for each i.
  n = random.Random(20261125).sample(range(1, _passes(workers) + 1), _passes(workers))[i]
  process = _start_at(command, folder, n)
  os.killpg(process.pid, signal.SIGKILL)
  process.communicate(timeout=600)
  assert process.returncode == -signal.SIGKILL
  assert any(".tmp-" in name for name in os.listdir(folder))  # what the next run must clean
  again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_ENV,
                         timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert _digests(folder) == clean(workers)
