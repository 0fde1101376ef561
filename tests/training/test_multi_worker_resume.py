"""A 2-worker run_pretraining.py job (127.0.0.1, multi_worker_mirrored) whose worker 1 is
killed with SIGKILL after a checkpoint exists (while it waits at the fault point after step 3):
the chief stops within a bounded time with one line on stderr (exit status 1, no traceback),
and the same two commands run again resume from the chief's last checkpoint to the weights of
an uninterrupted single-process run (which test_multi_worker_pretraining.py shows equal to an
uninterrupted 2-worker run)."""

import re
import signal
import subprocess
import time

from tests.faults import hook
from tests.training import multi_worker as mw

# "At once" against the 600 s default wait (heartbeats time out after 10 s); generous for a loaded
# machine.
BOUND_S = 300


def test_a_killed_worker_stops_the_chief_and_the_job_resumes(tmp_path, uncased_vocab):
  work = mw.pretraining_workdir(tmp_path, uncased_vocab)
  out = work / "out"
  commands = [mw.pretraining_command(work, out)] * 2
  # Worker 1 waits after step 3's progress line (ckpt-2 is the chief's last save) until the
  # SIGKILL; the chief meanwhile waits for it in step 4.
  ready = tmp_path / "ready"
  # The uninterrupted single-process run, beside the whole job.
  with mw.single_beside(mw.pretraining_command(work, work / "single", strategy="default"),
                        tmp_path):
    with mw.Workers(commands, mw.ROOT, tmp_path, {"TMPDIR": str(tmp_path)},
                    {1: hook.env({}, "step", 3, ready)}) as workers:
      hook.wait_at_point(workers.procs[1], ready, mw.RUN_TIMEOUT_S)
      workers.procs[1].send_signal(signal.SIGKILL)
      start = time.time()
      try:
        code = workers.procs[0].wait(timeout=BOUND_S)
      except subprocess.TimeoutExpired:
        code = None
      elapsed = time.time() - start
      chief = workers.output(0)
    assert code == 1 and elapsed < BOUND_S, chief[-3000:]
    last = chief.strip().splitlines()[-1]
    assert re.fullmatch(
        r"run_pretraining\.py: error: training stopped after step \d+: a worker of the cluster "
        r"was lost or did not answer \((UnavailableError|DeadlineExceededError|AbortedError|"
        r"CancelledError): .+\); restart every worker with the same command to resume from the "
        r"last checkpoint", last), chief[-3000:]
    assert "Traceback" not in chief
    resumed = mw.run_workers(commands, tmp_path, tmp_path)
  step = int(re.search(r"resumed from \S+ at step (\d+)", resumed[0]).group(1))
  assert step == 2, resumed[0][-2000:]  # the chief's last checkpoint before the kill
  assert f"at step {step}" in resumed[1]
  mw.assert_weights_close(mw.checkpoint_weights(str(out / f"ckpt-{mw.STEPS}")),
                          mw.checkpoint_weights(str(work / "single" / f"ckpt-{mw.STEPS}")),
                          atol=1e-5)
