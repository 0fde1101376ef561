"""``cli.stop_at_once_on_ctrl_c``: Ctrl-C (SIGINT) or SIGTERM in the middle of work is one line
on stderr and exit status 130 (143 for SIGTERM) at once, with no traceback; ``python -m
bert_tf`` installs it, and the next run removes what the stopped one left."""

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.faults import hook

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WORK = """
import sys, time
from bert_tf import cli
cli.stop_at_once_on_ctrl_c("prog")
print("ready", flush=True)
try:
  while True:  # However late the signal comes (a loaded machine), it lands in the sleep.
    time.sleep(3600)
finally:
  print("unwound", file=sys.stderr)  # not reached: the process stops where it is
"""


def _signal_and_wait(process, signum):
  """Sends ``signum`` and waits for the exit (bounded); kills the process if that fails."""
  try:
    process.send_signal(signum)
    return process.communicate(timeout=hook.WAIT_S)[1]
  finally:
    if process.poll() is None:
      process.kill()
      process.communicate()


@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_and_sigterm_are_one_line_and_stop_at_once(signum, code, word):
  # The process says "ready" once the handlers are in place and then sleeps: the signal lands
  # in the sleep.
  process = subprocess.Popen([sys.executable, "-c", _WORK], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": ROOT})
  try:
    assert process.stdout.readline() == "ready\n"
  except BaseException:
    process.kill()
    process.communicate()
    raise
  stderr = _signal_and_wait(process, signum)
  assert process.returncode == code
  assert stderr.splitlines()[-1] == f"prog: {word}"
  assert "Traceback" not in stderr and "unwound" not in stderr


@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated")])
def test_python_m_bert_tf_stops_at_once_and_the_next_run_cleans_up(minilm_path, tmp_path,
                                                                   signum, code, word):
  """Ctrl-C or SIGTERM while ``python -m bert_tf embed`` writes its output (it waits at the
  fault point ``write_together``: the temporary file is whole, not yet renamed): one line, exit
  130 or 143, the temporary file stays behind (no unwinding), no output; the same command then
  removes it and writes the whole output."""
  from pydoc_data import topics  # pylint: disable=import-outside-toplevel
  lines = [" ".join(text.split()[:30]) for text in topics.topics.values()][:40]
  (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n")
  out = tmp_path / "out"
  out.mkdir()
  command = [sys.executable, "-m", "bert_tf", "embed", f"--model={minilm_path}",
             f"--input_file={tmp_path / 'lines.txt'}", f"--output_file={out / 'emb.jsonl'}"]
  env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
  process = hook.start_at_point(command, env, "write_together", 1, tmp_path / "ready", cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  stderr = _signal_and_wait(process, signum)
  assert process.returncode == code, stderr[-2000:]
  assert stderr.strip().splitlines() == [f"bert_tf: {word}"]
  [left] = os.listdir(out)
  assert re.fullmatch(r"emb\.jsonl\.tmp-\d+-[0-9a-f]{8}", left), left
  again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=600)
  assert again.returncode == 0, again.stderr[-2000:]
  assert os.listdir(out) == ["emb.jsonl"]
  assert len((out / "emb.jsonl").read_text().splitlines()) == len(lines)


_SHELL = """
import signal, sys, types
shell = types.ModuleType("IPython")
shell.get_ipython = lambda: object()  # what %run in IPython or a Jupyter kernel has
sys.modules["IPython"] = shell
from bert_tf import cli
before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
cli.stop_at_once_on_ctrl_c("prog")
print(before == (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))
"""


def test_in_a_notebook_kernel_ctrl_c_is_left_to_the_kernel():
  """``%run run_classifier.py ...`` in a Jupyter kernel: the stop-at-once handler exited the
  kernel (the notebook's Stop button lost every variable); inside IPython nothing is
  installed, and Ctrl-C stays a KeyboardInterrupt."""
  result = subprocess.run([sys.executable, "-c", _SHELL], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ["True"]
