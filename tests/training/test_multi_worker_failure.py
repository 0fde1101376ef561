"""A multi-worker job whose chief hangs (SIGSTOP: alive, connections open, silent) stops the
other worker within a bounded time with one line on stderr and exit status 1, not a hang:
TensorFlow's coordination service heartbeats (10 s) abort the collectives, and the training
loop says what happened. (A worker killed with SIGKILL: test_multi_worker_resume.py.)"""

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
