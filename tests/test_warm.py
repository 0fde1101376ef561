"""tests/warm.py: a command forked from the warm interpreter gives what the same command gives
as a new process (``subprocess``, the reference): exit status, stdout and stderr, for a normal
end, ``sys.exit`` with a number or a message, an exception, SIGKILL, KeyboardInterrupt; argv,
``sys.path[0]``, ``__name__``, the folder, stdin, the variables a test may set, buffered
output and atexit functions. It was forked (its parent is not this process), and what it cannot
reproduce is run as a new process."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import warm

PROBE = r"""
import atexit, json, os, signal, sys
atexit.register(lambda: print("atexit ran"))
case = sys.argv[1]
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                  "file": __file__, "stdin": sys.stdin.read(),
                  "fault": os.environ.get("BERT_TF_FAULT"), "parent": os.getppid()}))
sys.stdout.write("no newline")
print("on stderr", file=sys.stderr)
if case == "exit3":
  sys.exit(3)
if case == "message":
  sys.exit("a message")
if case == "raise":
  raise ValueError("boom")
if case == "kill":
  os.kill(os.getpid(), signal.SIGKILL)
if case == "interrupt":
  raise KeyboardInterrupt
"""


@pytest.fixture(name="probe")
def _probe(tmp_path):
  path = tmp_path / "scripts" / "probe.py"
  path.parent.mkdir()
  path.write_text(PROBE)
  return path


def _both(probe, tmp_path, case, env_extra=None):
  """(warm result, new process's result) of the probe, each with the parent pid it saw."""
  env = {**os.environ, "BERT_TF_FAULT": "none:probe", **(env_extra or {})}
  results = []
  for run in (warm.run, subprocess.run):
    results.append(run([sys.executable, str(probe), case], cwd=tmp_path, env=env,
                       capture_output=True, text=True, input="from stdin\n", timeout=120))
  return results


def _parent(result):
  import json  # pylint: disable=import-outside-toplevel
  return json.loads(result.stdout.splitlines()[0])["parent"]


@pytest.mark.parametrize("case", ["ok", "exit3", "message", "raise", "kill", "interrupt"])
def test_a_forked_command_gives_what_a_new_process_gives(probe, tmp_path, case):
  forked, new = _both(probe, tmp_path, case)
  assert _parent(forked) != os.getpid()  # forked by the warm interpreter
  assert _parent(new) == os.getpid()
  assert forked.returncode == new.returncode, (forked, new)
  assert forked.stdout.replace(str(_parent(forked)), "P") == new.stdout.replace(
      str(_parent(new)), "P")
  if case in ("raise", "interrupt"):  # a traceback: its frames differ (runpy's), not its end
    assert forked.stderr.startswith("on stderr\nTraceback (most recent call last):\n")
    assert forked.stderr.splitlines()[-1] == new.stderr.splitlines()[-1]
  else:
    assert forked.stderr == new.stderr
  expected = {"ok": 0, "exit3": 3, "message": 1, "raise": 1, "kill": -signal.SIGKILL,
              "interrupt": -signal.SIGINT}[case]
  assert new.returncode == expected


def test_what_the_warm_interpreter_cannot_reproduce_runs_as_a_new_process(probe, tmp_path):
  # A variable read at the interpreter's start differs: a new process, as asked.
  forked, new = _both(probe, tmp_path, "ok", {"PYTHONPATH": str(tmp_path)})
  assert _parent(forked) == _parent(new) == os.getpid()
  assert forked.returncode == 0 and forked.stdout == new.stdout


def test_a_changed_environment_of_the_tests_restarts_the_warm_interpreter(probe, tmp_path,
                                                                           monkeypatch):
  forked, _ = _both(probe, tmp_path, "ok")
  first = _parent(forked)
  # As library code run in-process does (bert_tf.modeling.placement sets XLA_FLAGS): the
  # commands that pass the tests' environment on are still forked, from a new interpreter.
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
  forked, new = _both(probe, tmp_path, "ok")
  assert _parent(forked) not in (first, os.getpid())
  assert forked.stdout.replace(str(_parent(forked)), "P") == new.stdout.replace(
      str(_parent(new)), "P")


def test_a_timeout_kills_the_forked_command_and_the_next_one_runs(probe, tmp_path):
  script = tmp_path / "sleep.py"
  script.write_text("import os, time\nopen('pid', 'w').write(str(os.getpid()))\n"
                    "time.sleep(600)\n")
  with pytest.raises(subprocess.TimeoutExpired):
    warm.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
             timeout=5)
  if (tmp_path / "pid").exists():  # it was killed (and reaped) before the answer came
    with pytest.raises(ProcessLookupError):
      os.kill(int((tmp_path / "pid").read_text()), 0)
  forked, _ = _both(probe, tmp_path, "ok")
  assert forked.returncode == 0 and _parent(forked) != os.getpid()


def test_a_popen_child_takes_signals_and_gives_its_output(tmp_path):
  script = tmp_path / "wait.py"
  script.write_text("import os, sys, time\nprint(os.getppid())\n"
                    "try:\n  open('ready', 'w').close()\n  time.sleep(600)\n"
                    "except KeyboardInterrupt:\n"
                    "  print('interrupted', file=sys.stderr)\n  sys.exit(130)\n")
  process = warm.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
  while not (tmp_path / "ready").exists():  # in its try block, sleeping
    assert process.poll() is None, process.communicate()
    time.sleep(0.01)
  with pytest.raises(subprocess.TimeoutExpired):
    process.wait(timeout=0.1)
  process.send_signal(signal.SIGINT)
  out, err = process.communicate(timeout=120)
  assert (process.returncode, err) == (130, "interrupted\n")
  assert int(out) != os.getpid()  # forked by the warm interpreter
