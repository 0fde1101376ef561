"""create_pretraining_data.py killed (SIGKILL) at seeded random points, then run again: the
outputs are byte-equal to an uninterrupted run's, and no stray files are left."""

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


def _command(vocab, outputs, workers):
  return [sys.executable, os.path.join(ROOT, "data_prep", "create_pretraining_data.py"),
          f"--input_file={SOTU}", f"--output_file={','.join(outputs)}", f"--vocab_file={vocab}",
          "--dupe_factor=30", "--max_seq_length=32", "--max_predictions_per_seq=5",
          f"--num_workers={workers}", "--shard_size_mb=0.01"]


_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _digests(folder):
  return {name: hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
          for name in sorted(os.listdir(folder))}


@pytest.mark.parametrize("workers,seed", [("0", 1), ("0", 2), ("2", 3), ("2", 4)])
def test_killed_then_rerun_gives_the_uninterrupted_output(tmp_path, uncased_vocab, workers, seed):
  clean, killed = tmp_path / "clean", tmp_path / "killed"
  os.makedirs(clean)
  os.makedirs(killed)
  names = ["a.tfrecord", "b.tfrecord"]
  done = subprocess.run(_command(uncased_vocab, [str(clean / n) for n in names], workers),
                        capture_output=True, text=True, cwd=ROOT, env=_ENV, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  command = _command(uncased_vocab, [str(killed / n) for n in names], workers)
  # Killed (with its workers: the whole process group) after a seeded random delay, which
  # falls before, during or after the writing depending on the seed and the machine.
  proc = subprocess.Popen(command, cwd=ROOT, env=_ENV, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
  time.sleep(random.Random(seed).uniform(0.1, 0.45))
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  proc.wait()
  again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_ENV,
                         timeout=300)
  assert again.returncode == 0, again.stderr[-2000:]
  assert _digests(killed) == _digests(clean)
  assert sorted(os.listdir(killed)) == names
