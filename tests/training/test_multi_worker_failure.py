"""A multi-worker job whose chief hangs (SIGSTOP: alive, connections open, silent) stops the
other worker within a bounded time with one line on stderr and exit status 1, not a hang:
TensorFlow's coordination service heartbeats (10 s) abort the collectives, and the training
loop says what happened. (A worker killed with SIGKILL: test_multi_worker_resume.py.) A worker
that never starts: the one that did gives up after --worker_start_timeout_s with one line;
Ctrl-C or SIGTERM while it waits stops it at once, with one line, and leaves the folder to the
same command run on every worker (the hung-chief job runs there, its chief holding the lock)."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from bert_tf import run_lock
from bert_tf.errors import BertTfError
from tests import warm
from tests.faults import hook
from tests.training import multi_worker as mw

# "At once" against the 600 s default wait: heartbeats time out after 10 s, and the exit takes
# seconds; the bound is generous for a loaded machine and still far below the 600 s.
BOUND_S = 300
# Lone workers, each the only started task of its own 2-worker cluster: {name: (its task
# index, --worker_start_timeout_s or None for the default 600 s, the signal sent while it
# waits)}. Worker 0 is the coordination leader (it waits for 1 to register), worker 1 registers
# with a leader that is not there; TensorFlow sets a SIGTERM handler of its own in both.
LONE = {"gives_up_0": (0, 5, None), "gives_up_1": (1, 5, None),
        "ctrl_c_0": (0, None, signal.SIGINT), "sigterm_0": (0, None, signal.SIGTERM),
        "sigterm_1": (1, None, signal.SIGTERM)}


@pytest.fixture(scope="module")
def work(tmp_path_factory, uncased_vocab):
  return mw.pretraining_workdir(tmp_path_factory.mktemp("mw_failure"), uncased_vocab,
                                num_files=1)


def _command(work, out, timeout_s=None):
  extra = [f"--worker_start_timeout_s={timeout_s}"] if timeout_s else []
  return mw.pretraining_command(work, out, steps=100000, extra=extra)


@pytest.fixture(scope="module")
def lone(work, tmp_path_factory):
  """Runs the LONE workers at once. Each announces its wait (fault point workers_register,
  where its SIGTERM handler is the script's again) and waits on; a signal is sent then, and
  the time to its exit is taken from there, not from its start (TensorFlow's start-up on a
  loaded machine is no part of the bound). The signalled ones share --output_dir ``out``."""
  tmp = tmp_path_factory.mktemp("lone")
  ports = mw.free_ports(2 * len(LONE))
  procs, runs = {}, {}
  try:
    for k, (name, (index, timeout_s, _)) in enumerate(LONE.items()):
      ready, log = tmp / f"{name}.ready", tmp / f"{name}.log"
      out = tmp / (f"{name}_out" if timeout_s else "out")
      with open(log, "w", encoding="utf-8") as f:
        procs[name] = warm.Popen(
            _command(work, out, timeout_s), cwd=mw.ROOT, stdout=subprocess.DEVNULL, stderr=f,
            env=mw.env({"TF_CONFIG": mw.tf_config(ports[2 * k:2 * k + 2], index),
                        **hook.env({}, "workers_register", 1, ready, action="announce")}))
      runs[name] = {"ports": ports[2 * k:2 * k + 2], "ready": ready, "log": log, "out": out}
    deadline = time.monotonic() + mw.RUN_TIMEOUT_S + BOUND_S  # against a hang only
    while time.monotonic() < deadline:
      for name, proc in procs.items():
        run, signum = runs[name], LONE[name][2]
        if "at" not in run and run["ready"].exists():
          run["at"] = time.time()
          if signum is not None:
            proc.send_signal(signum)
        if "elapsed" not in run and proc.poll() is not None:
          run["elapsed"] = time.time() - run["at"] if "at" in run else float("inf")
      if all("elapsed" in run for run in runs.values()):
        break
      time.sleep(0.05)
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.kill()
      proc.wait(timeout=30)
  for name, run in runs.items():
    run["code"] = procs[name].returncode
    run.setdefault("elapsed", float("inf"))  # killed at the deadline
    run["stderr"] = run["log"].read_text()
  return {"runs": runs, "out": tmp / "out"}


@pytest.mark.parametrize("name", ["gives_up_0", "gives_up_1"])
def test_a_worker_that_never_starts_is_one_line_on_the_one_that_did(lone, name):
  run, started = lone["runs"][name], LONE[name][0]
  assert run["code"] == 1, run["stderr"][-3000:]
  assert "Traceback" not in run["stderr"]
  ports = run["ports"]
  assert run["stderr"].strip().splitlines()[-1] == (
      "run_pretraining.py: error: multi_worker_mirrored: not every task of TF_CONFIG's cluster "
      f"(worker 0 at 127.0.0.1:{ports[0]}, worker 1 at 127.0.0.1:{ports[1]}) started within "
      f"5 s (this is worker {started}); start each one with the same TF_CONFIG cluster and its "
      "own task, or raise --worker_start_timeout_s")
  assert run["elapsed"] < BOUND_S  # the 5 s and the exit
  out = run["out"]
  assert not out.exists() or not [n for n in os.listdir(out) if n.startswith("ckpt")]


@pytest.mark.parametrize("name", ["ctrl_c_0", "sigterm_0", "sigterm_1"])
def test_a_signal_while_waiting_for_the_others_stops_at_once(lone, name):
  run = lone["runs"][name]
  code, word = {signal.SIGINT: (130, "interrupted"),
                signal.SIGTERM: (143, "terminated")}[LONE[name][2]]
  assert run["code"] == code, run["stderr"][-3000:]
  assert "Traceback" not in run["stderr"]
  assert run["stderr"].strip().splitlines()[-1] == f"run_pretraining.py: {word}"
  assert run["elapsed"] < BOUND_S  # far from the 600 s


def test_a_hung_chief_stops_the_other_worker_with_one_line(work, lone, tmp_path):
  victim, survivor, sig = 0, 1, signal.SIGSTOP
  # The folder the signalled lone workers left, the same command on both workers.
  out = lone["out"]
  command = _command(work, out)
  # The chief waits at the fault point after step 3 (its coordination threads still answer),
  # the other worker for it in step 4; then the chief stops answering at all.
  ready = tmp_path / "ready"
  with mw.Workers([command] * 2, mw.ROOT, tmp_path, {"TMPDIR": str(tmp_path)},
                  {victim: hook.env({}, "step", 3, ready)}) as workers:
    hook.wait_at_point(workers.procs[victim], ready, mw.RUN_TIMEOUT_S)
    # It trained there (ckpt-2), and the chief alone holds the folder's lock: a second chief
    # (this process) is refused, naming it.
    assert (out / "ckpt-2.index").exists()
    holder = json.loads((out / run_lock.LOCK_FILE).read_text())["pid"]
    assert holder == workers.procs[victim].pid
    with pytest.raises(BertTfError, match=rf"is in use by another run: pid {holder} on "):
      run_lock.OutputDirLock(str(out))
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


def test_worker_start_timeout_must_be_positive():
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  with pytest.raises(BertTfError, match=r"^--worker_start_timeout_s must be >= 1, got 0$"):
    distribution.resolve_distribution_args(distribution_strategy="multi_worker_mirrored",
                                           worker_start_timeout_s=0)
