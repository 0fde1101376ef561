"""tests/warm.py: a command forked from the warm interpreter gives what the same command gives
as a new process (``subprocess``, the reference): exit status, stdout and stderr, for a normal
end, ``sys.exit`` with a number or a message, an exception, SIGKILL, KeyboardInterrupt; argv,
``sys.path[0]``, ``__name__``, the folder, stdin, the variables a test may set, buffered
output and atexit functions. It was forked (its parent is not this process), and what it cannot
reproduce is run as a new process."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import warm

PROBE = r"""
import atexit, json, os, signal, sys, tempfile
atexit.register(lambda: print("atexit ran"))
case = sys.argv[1]
print(json.dumps({"argv": sys.argv, "path": sys.path, "cwd": os.getcwd(), "name": __name__,
                  "file": __file__, "stdin": sys.stdin.read(), "tmp": tempfile.gettempdir(),
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


def _both(probe, tmp_path, case, env_extra=None, argv=()):
  """(warm result, new process's result) of the probe, each with the parent pid it saw."""
  (tmp_path / "tmp").mkdir(exist_ok=True)  # TMPDIR is read at run time: the child's own
  env = {**os.environ, "BERT_TF_FAULT": "none:probe", "TMPDIR": str(tmp_path / "tmp"),
         **(env_extra or {})}
  results = []
  for run in (warm.run, subprocess.run):
    results.append(run([sys.executable, str(probe), case, *argv], cwd=tmp_path, env=env,
                       capture_output=True, text=True, input="from stdin\n", timeout=120))
  return results


def _parent(result):
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


def test_a_command_in_another_environment_is_forked_from_a_warm_interpreter_of_its_own(
    probe, tmp_path):
  # A variable read at the interpreter's start differs (sys.path): a warm interpreter started
  # with it, not the one of the tests' environment.
  forked, _ = _both(probe, tmp_path, "ok")
  usual = _parent(forked)
  forked, new = _both(probe, tmp_path, "ok", {"PYTHONPATH": str(tmp_path)})
  assert _parent(forked) not in (usual, os.getpid())
  assert str(tmp_path) in json.loads(forked.stdout.splitlines()[0])["path"]
  assert forked.returncode == 0
  assert forked.stdout.replace(str(_parent(forked)), "P") == new.stdout.replace(
      str(_parent(new)), "P")


def test_what_a_warm_interpreter_cannot_reproduce_runs_as_a_new_process(probe, tmp_path):
  # absl's --verbosity is decided at import.
  forked, new = _both(probe, tmp_path, "ok", argv=["--verbosity=1"])
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


_WAIT = ("import os, sys, time\nprint(os.getppid(), flush=True)\n"
         "open(sys.argv[1], 'w').close()\ntime.sleep(600)\n")


def test_commands_at_once_are_forked_from_as_many_warm_interpreters(tmp_path, monkeypatch):
  """Two commands at once: two warm interpreters; a third while both run: a new process; the
  next ones reuse the interpreters. Output to a file object or DEVNULL, as subprocess gives it."""
  script = tmp_path / "wait.py"
  script.write_text(_WAIT)
  monkeypatch.setattr(warm, "_POOL", [])
  monkeypatch.setattr(warm, "_MAX_WARM", 2)
  processes, logs = [], []
  try:
    for i in range(3):
      logs.append(open(tmp_path / f"{i}.log", "w", encoding="utf-8"))  # pylint: disable=consider-using-with
      logs[-1].write("before\n")
      processes.append(warm.Popen([sys.executable, str(script), f"ready{i}"], cwd=tmp_path,
                                  stdout=logs[-1], stderr=subprocess.DEVNULL,
                                  start_new_session=True))
    for i, process in enumerate(processes):
      while not (tmp_path / f"ready{i}").exists():
        assert process.poll() is None
        time.sleep(0.01)
      os.killpg(process.pid, signal.SIGTERM)  # each leads a session of its own
    assert [p.wait(timeout=60) for p in processes] == [-signal.SIGTERM] * 3
  finally:
    for process in processes:
      if process.poll() is None:
        process.kill()
    for log in logs:
      log.close()
  parents = [int((tmp_path / f"{i}.log").read_text().split()[1]) for i in range(3)]
  assert [(tmp_path / f"{i}.log").read_text().split()[0] for i in range(3)] == ["before"] * 3
  assert len({parents[0], parents[1], os.getpid()}) == 3 and parents[2] == os.getpid()
  # Both are free again: the next two commands reuse them.
  again = []
  for i in range(2):
    again.append(warm.Popen([sys.executable, str(script), f"again{i}"], cwd=tmp_path,
                            stdout=subprocess.PIPE))
  try:
    while not all((tmp_path / f"again{i}").exists() for i in range(2)):
      time.sleep(0.01)
    for process in again:
      process.kill()
    outputs = [int(p.communicate(timeout=60)[0]) for p in again]
  finally:
    for process in again:
      process.kill()
  assert sorted(outputs) == sorted(parents[:2])


def test_a_new_session_is_there_when_popen_returns(tmp_path):
  """The process group of a child started in a session of its own can be signalled as soon
  as Popen returns (the warm interpreter answers once the child has it)."""
  script = tmp_path / "wait.py"
  script.write_text(_WAIT)
  process = warm.Popen([sys.executable, str(script), "ready"], cwd=tmp_path,
                       stdout=subprocess.DEVNULL, start_new_session=True)
  try:
    assert isinstance(process, warm._WarmProcess)  # forked  pylint: disable=protected-access
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=60) == -signal.SIGKILL
  finally:
    process.kill()
