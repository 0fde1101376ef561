"""Data-prep workers whose parent was killed (issue 27, item 8): before, each busy worker
finished its shard and printed a BrokenPipeError traceback sending it to the dead parent. Now
the workers exit quietly with the parent. The parent is killed at a known point (a worker
kills it as it starts its shard: ``BERT_TF_FAULT=kill_parent:shard_start``), no timing."""

import os
import signal
import subprocess

from tests.faults.test_data_prep_interrupt import _ENV, ROOT, _command


def test_workers_of_a_killed_parent_exit_without_a_traceback(tmp_path, minilm_path):
  command = _command(minilm_path / "vocab.txt", tmp_path, "2")
  # stderr is a pipe every worker shares: run() returns at its end, once every worker exited.
  result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**_ENV, "BERT_TF_FAULT": "kill_parent:shard_start"},
                          start_new_session=True)
  assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
  assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, (
      result.stderr[-3000:])
  assert not [n for n in os.listdir(tmp_path) if n.endswith(".tfrecord")]
