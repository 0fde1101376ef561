"""create_pretraining_data.py interrupted mid-run: Ctrl-C (SIGINT to the whole process group, as
a terminal sends it) is one line and exit 130 with no file left behind; SIGKILL at seeded points
after the first temporary file appeared, then the same command, gives the uninterrupted
outputs byte for byte."""

import hashlib
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOTU = str(FIXTURES / "pretraining" / "sotu_sample.txt")
PROG = "create_pretraining_data.py"
NAMES = ["a.tfrecord", "b.tfrecord"]
_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _command(vocab, folder, workers):
  outputs = ",".join(str(folder / n) for n in NAMES)
  return [sys.executable, os.path.join(ROOT, "data_prep", PROG), f"--input_file={SOTU}",
          f"--output_file={outputs}", f"--vocab_file={vocab}", "--dupe_factor=150",
          "--max_seq_length=32", "--max_predictions_per_seq=5", f"--num_workers={workers}",
          "--shard_size_mb=0.01"]


def _listing(folder):
  return sorted(os.listdir(folder))


def _digests(folder):
  return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
          for name in _listing(folder)}


def _start_and_wait_for_writing(command, folder):
  """Starts ``command`` in its own process group; returns once a temporary output or spill
  directory exists in ``folder`` (the run is writing), with the process still running."""
  proc = subprocess.Popen(command, cwd=ROOT, env=_ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)
  deadline = time.monotonic() + 120
  while not any(".tmp-" in n or ".bert_tf-shards-" in n for n in os.listdir(folder)):
    assert proc.poll() is None, f"finished before writing anything: {proc.communicate()}"
    assert time.monotonic() < deadline, "no temporary file appeared in 120 s"
    time.sleep(0.002)
  return proc


@pytest.fixture(name="clean", scope="module")
def _clean(tmp_path_factory, minilm_path):
  """The uninterrupted outputs' digests, per --num_workers (the reference mode and sharded
  mode draw different records), and how long that run wrote (from its first temporary file to
  its end: the window a kill must land in)."""
  cache = {}

  def run(workers):
    if workers not in cache:
      folder = tmp_path_factory.mktemp(f"clean{workers}")
      proc = _start_and_wait_for_writing(_command(minilm_path / "vocab.txt", folder, workers),
                                         folder)
      writing_since = time.monotonic()
      _, stderr = proc.communicate(timeout=300)
      assert proc.returncode == 0, stderr[-2000:]
      cache[workers] = _digests(folder), time.monotonic() - writing_since
    return cache[workers]

  return run


@pytest.mark.parametrize("workers", ["0", "2"])
def test_ctrl_c_is_one_line_exit_130_and_leaves_nothing(tmp_path, uncased_vocab, workers):
  proc = _start_and_wait_for_writing(_command(uncased_vocab, tmp_path, workers), tmp_path)
  os.killpg(proc.pid, signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 130, stderr[-2000:]
  assert stderr.strip().splitlines() == [f"{PROG}: interrupted"]
  assert _listing(tmp_path) == []


@pytest.mark.parametrize("workers,seed", [("0", 1), ("0", 2), ("2", 3), ("2", 4)])
def test_sigkill_while_writing_then_the_same_command(tmp_path, uncased_vocab, clean, workers,
                                                     seed):
  digests, writing_s = clean(workers)
  command = _command(uncased_vocab, tmp_path, workers)
  proc = _start_and_wait_for_writing(command, tmp_path)
  # A seeded point in the first 60% of the time the uninterrupted run spent writing (measured
  # on this machine, so the kill lands mid-run however fast the machine is).
  time.sleep(random.Random(seed).uniform(0.0, 0.6) * writing_s)
  killed_while_running = proc.poll() is None
  if killed_while_running:
    os.killpg(proc.pid, signal.SIGKILL)
  proc.communicate(timeout=60)
  assert killed_while_running, "the run ended before the kill; lengthen it (--dupe_factor)"
  again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_ENV,
                         timeout=300)
  assert again.returncode == 0, again.stderr[-2000:]
  assert _digests(tmp_path) == digests
