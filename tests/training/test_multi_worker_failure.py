"""A multi-worker job whose chief hangs (SIGSTOP: alive, connections open, silent) stops the
other worker within a bounded time with one line on stderr and exit status 1, not a hang:
TensorFlow's coordination service heartbeats (10 s) abort the collectives, and the training
loop says what happened. (A worker killed with SIGKILL: test_multi_worker_resume.py.) A worker
that never starts: the one that did gives up after --worker_start_timeout_s with one line."""

import os
import re
import signal
import subprocess
import time

import pytest

from tests.training import multi_worker as mw

# Heartbeats time out after 10 s; startup, the failing step and the exit add a few seconds.
BOUND_S = 60


@pytest.fixture(scope="module")
def work(tmp_path_factory, uncased_vocab):
  return mw.pretraining_workdir(tmp_path_factory.mktemp("mw_failure"), uncased_vocab,
                                num_files=1)


def test_a_hung_chief_stops_the_other_worker_with_one_line(work, tmp_path):
  victim, survivor, sig = 0, 1, signal.SIGSTOP
  command = mw.pretraining_command(work, tmp_path / "out", steps=100000)
  with mw.Workers([command] * 2, mw.ROOT, tmp_path, {"TMPDIR": str(tmp_path)}) as workers:
    assert workers.wait_for(r"^step 3/", mw.RUN_TIMEOUT_S, survivor), workers.output(
        survivor)[-2000:]
    os.killpg(workers.procs[victim].pid, sig)
    start = time.time()
    try:
      code = workers.procs[survivor].wait(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
      code = None
    elapsed = time.time() - start
    output = workers.output(survivor)
  assert code == 1, output[-2000:]
  assert elapsed < BOUND_S
  errors = [line for line in output.splitlines() if "error:" in line and
            line.startswith("run_pretraining.py")]
  assert len(errors) == 1, output[-3000:]
  assert re.fullmatch(
      r"run_pretraining\.py: error: training stopped after step \d+: a worker of the cluster "
      r"was lost or did not answer \((UnavailableError|DeadlineExceededError): .+\); restart "
      r"every worker with the same command to resume from the last checkpoint", errors[0])
  assert errors[0] == output.strip().splitlines()[-1]
  assert "Traceback" not in output


@pytest.mark.parametrize("started", [0, 1])
def test_a_worker_that_never_starts_is_one_line_on_the_one_that_did(work, tmp_path, started):
  # Only worker `started` of a 2-worker cluster runs: 0 is the coordination leader (it waits
  # for 1 to register), 1 registers with a leader that is not there.
  ports = mw.free_ports(2)
  out = tmp_path / "out"
  command = mw.pretraining_command(work, out, extra=["--worker_start_timeout_s=5"])
  start = time.time()
  result = subprocess.run(command, cwd=mw.ROOT, capture_output=True, text=True,
                          timeout=BOUND_S + 60,
                          env=mw.env({"TF_CONFIG": mw.tf_config(ports, started)}))
  elapsed = time.time() - start
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  assert result.stderr.strip().splitlines()[-1] == (
      "run_pretraining.py: error: multi_worker_mirrored: not every task of TF_CONFIG's cluster "
      f"(worker 0 at 127.0.0.1:{ports[0]}, worker 1 at 127.0.0.1:{ports[1]}) started within "
      f"5 s (this is worker {started}); start each one with the same TF_CONFIG cluster and its "
      "own task, or raise --worker_start_timeout_s")
  assert elapsed < BOUND_S  # TensorFlow's start, the 5 s and the exit
  assert not out.exists() or not [n for n in os.listdir(out) if n.startswith("ckpt")]


def test_worker_start_timeout_must_be_positive():
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  with pytest.raises(BertTfError, match=r"^--worker_start_timeout_s must be >= 1, got 0$"):
    distribution.resolve_distribution_args(distribution_strategy="multi_worker_mirrored",
                                           worker_start_timeout_s=0)
