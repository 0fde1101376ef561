"""``subprocess.run`` and ``subprocess.Popen`` for ``python script.py args`` and ``python -m
bert_tf args``, forked from a warm interpreter.

A script's process spends 3.5-4.5 s importing TensorFlow, Keras and bert_tf before it does
anything, and about 1 s more tearing its modules down at exit; the suite runs some two hundred
of them. ``run`` and ``Popen`` send such a command to a long-lived interpreter
(``tests/_warm_zygote.py``, one per test process) that has imported all of that once and has
not started TensorFlow's runtime; it forks, and the child runs the script as ``python
script.py args`` would (``__main__``, argv, ``sys.path[0]``, folder, environment, descriptors;
its exit status and its output are the command's; threads joined, atexit functions run and
streams flushed at exit, the module teardown skipped). A run of the tests' tiny models goes
from about 11 s to 6 s, a one-line flag error from 4.5 s to 0.03 s.

What a forked child cannot reproduce runs as a new process, as before (``subprocess``):
anything but those two forms; an environment that differs from the warm interpreter's (the
test process's) in anything but the variables of ``_AT_RUN_TIME``, which are read while a
script runs (so ``TMPDIR``, ``PYTHONPATH``, ``TF_CPP_MIN_LOG_LEVEL``: new processes); absl's
``--verbosity`` (the quieting is decided at import); a second command while one runs (one
child at a time); output to anything but a pipe or the test's own; ``BERT_TF_WARM=0`` (every
command a new process, to compare; ``BERT_TF_WARM=debug`` says why a command was not forked).
A forked child's piped output comes whole from ``communicate`` (not line by line while it
runs).

Differences that remain: every child shares the warm interpreter's string-hash seed (a new
process draws its own) and its already-imported modules (a script that forgets an import a
library module made is not caught here); the scripts' start as new processes is what
tests/test_help.py, test_quiet.py, test_quickstart.py and the multi-worker tests run."""

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings

_ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_warm_zygote.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Variables read while a script runs (not at the interpreter's start or TensorFlow's import):
# a request may set, change or drop these; any other difference runs a new process.
_AT_RUN_TIME = ("BERT_TF_FAULT", "BERT_TF_FAULT_READY", "TF_DETERMINISTIC_OPS",
                "PYTHONUNBUFFERED", "TF_XLA_FLAGS", "TF_CONFIG",
                "PYTEST_CURRENT_TEST")  # (pytest's, for the test it runs)
_LOCK = threading.Lock()
_STATE = {"zygote": None, "env": None, "failed": False, "busy": None,
          "buffer": b""}


def _enabled():
  return os.environ.get("BERT_TF_WARM", "1") != "0" and hasattr(os, "fork") and hasattr(
      os, "pidfd_open")


def _comparable(env):
  return {k: v for k, v in env.items() if k not in _AT_RUN_TIME}


def _zygote():
  """The warm interpreter (started on first use), or None when it cannot run."""
  zygote = _STATE["zygote"]
  if zygote is not None and zygote.poll() is None:
    return zygote
  if _STATE["failed"]:
    return None
  env = dict(os.environ)
  zygote = subprocess.Popen([sys.executable, _ZYGOTE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=ROOT, env=env, text=True)
  _STATE.update(zygote=zygote, env=_comparable(env), buffer=b"")
  atexit.register(_stop, zygote)
  return zygote


def _stop(zygote):
  try:
    zygote.stdin.close()
    zygote.wait(timeout=30)
  except (OSError, subprocess.TimeoutExpired):
    zygote.kill()


def _warm_applies(args, env):
  args = [str(a) for a in args]
  if not (_enabled() and len(args) >= 2 and args[0] == sys.executable and
          (args[1].endswith(".py") and os.path.isfile(args[1]) or
           args[1:3] == ["-m", "bert_tf"])):
    return False
  if any(a.split("=")[0] in ("--verbosity", "-v", "--v") for a in args[2:]):
    return False
  return True


def _answer(zygote, timeout):
  """The warm interpreter's next answer; None when ``timeout`` s passed without one. (Read
  from the descriptor with a buffer of our own: a buffered reader could hold the next answer
  where ``select`` does not see it.)"""
  fd = zygote.stdout.fileno()
  while b"\n" not in _STATE["buffer"]:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
      return None
    data = os.read(fd, 65536)
    if not data:
      raise RuntimeError("tests/_warm_zygote.py stopped answering (its errors are above)")
    _STATE["buffer"] += data
  line, _, _STATE["buffer"] = _STATE["buffer"].partition(b"\n")
  return json.loads(line)


class _WarmProcess:
  """A forked child, with what the tests use of ``subprocess.Popen``: ``pid``, ``poll``,
  ``wait``, ``communicate``, ``send_signal``, ``kill``, ``returncode``; its output (when
  asked for with ``PIPE``) comes whole from ``communicate``."""

  def __init__(self, zygote, args, paths, folder, text, timeout):
    self.args, self._zygote, self._paths, self._folder = args, zygote, paths, folder
    self._text, self._timeout_given = text, timeout
    self.returncode = None
    self._timed_out = False
    answer = _answer(zygote, 120)
    if answer is None:
      raise RuntimeError("tests/_warm_zygote.py did not start the command within 120 s")
    self.pid = answer["pid"]
    # Truthy where output was asked for (tests/faults/hook.py reads them with communicate).
    self.stdout = paths["stdout"] is not None or None
    self.stderr = paths["stderr"] not in (None, "stdout") or None

  def poll(self):
    return self._collect(0)

  def wait(self, timeout=None):
    if self._collect(timeout) is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def _collect(self, timeout):
    if self.returncode is None and not self._timed_out:
      answer = _answer(self._zygote, timeout)
      if answer is None:
        return None
      if answer.get("timeout"):
        self._timed_out = True
      else:
        self.returncode = answer["status"]
      _STATE["busy"] = None
    return self.returncode

  def send_signal(self, signum):
    if self.returncode is None:
      os.kill(self.pid, signum)

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def _outputs(self):
    outputs = []
    for key in ("stdout", "stderr"):
      path = self._paths[key]
      if path and path != "stdout":
        with open(path, "rb") as f:
          data = f.read()
        outputs.append(data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
                       if self._text else data)
      else:
        outputs.append(None)
    shutil.rmtree(self._folder, ignore_errors=True)
    return tuple(outputs)

  def communicate(self, timeout=None):
    if self._collect(timeout) is None and not self._timed_out:
      raise subprocess.TimeoutExpired(self.args, timeout)
    outputs = self._outputs()
    if self._timed_out:
      raise subprocess.TimeoutExpired(self.args, self._timeout_given, output=outputs[0],
                                      stderr=outputs[1])
    return outputs


def _start(args, cwd, env, timeout, stdout, stderr, text, input=None, new_session=False):  # pylint: disable=redefined-builtin
  """A ``_WarmProcess`` for ``args``, or None where the warm interpreter does not apply."""
  if not _warm_applies(args, env):
    return None
  with _LOCK:
    if _STATE["busy"] is not None:
      _STATE["busy"].poll()
      if _STATE["busy"] is not None:
        return None  # one child at a time: another runs as a new process
    zygote = _zygote()
    if zygote is None:
      return None
    if _comparable(env) != _STATE["env"] and _comparable(env) == _comparable(os.environ):
      # The test process's own environment changed since the warm interpreter started (a
      # test set a variable for good, or library code run in-process did, e.g. XLA_FLAGS):
      # a new warm interpreter, with it.
      _stop(zygote)
      zygote = _zygote()
      if zygote is None:
        return None
    if _comparable(env) != _STATE["env"]:
      if os.environ.get("BERT_TF_WARM") == "debug":
        differ = sorted(set(_comparable(env).items()) ^ set(_STATE["env"].items()))
        print(f"warm.py: a new process for {args[1]}: the environment differs in {differ}",
              file=sys.stderr)
      return None
    folder = tempfile.mkdtemp(prefix="warm-")
    paths = {"stdin": os.devnull, "stdout": None, "stderr": None}
    if input is not None:
      paths["stdin"] = os.path.join(folder, "in")
      with open(paths["stdin"], "w" if text else "wb", encoding="utf-8" if text else None) as f:
        f.write(input)
    if stdout == subprocess.PIPE:
      paths["stdout"] = os.path.join(folder, "out")
    if stderr == subprocess.PIPE:
      paths["stderr"] = os.path.join(folder, "err")
    elif stderr == subprocess.STDOUT:
      paths["stderr"] = "stdout"
    request = {"argv": [str(a) for a in args[1:]], "cwd": str(cwd) if cwd else os.getcwd(),
               "env": env, "timeout": timeout, "new_session": new_session, **paths}
    try:
      zygote.stdin.write(json.dumps(request) + "\n")
      zygote.stdin.flush()
      process = _WarmProcess(zygote, args, paths, folder, text, timeout)
    except (OSError, RuntimeError) as e:
      _STATE["failed"] = True
      zygote.kill()
      shutil.rmtree(folder, ignore_errors=True)
      warnings.warn(f"tests/warm.py: the warm interpreter failed ({e}); new processes from "
                    "here on")
      return None
    _STATE["busy"] = process
    return process


def run(args, *, cwd=None, env=None, timeout=None, capture_output=False, text=False,
        stdout=None, stderr=None, check=False, input=None):  # pylint: disable=redefined-builtin
  """``subprocess.run(args, ...)`` with these arguments; forked warm where it applies."""
  env = dict(os.environ if env is None else env)
  if capture_output:
    stdout = stderr = subprocess.PIPE
  process = None
  if stdout in (None, subprocess.PIPE) and stderr in (None, subprocess.PIPE, subprocess.STDOUT):
    process = _start(args, cwd, env, timeout, stdout, stderr, text, input)
  if process is None:
    return subprocess.run(args, cwd=cwd, env=env, timeout=timeout, text=text, stdout=stdout,  # pylint: disable=subprocess-run-check
                          stderr=stderr, check=check, input=input)
  out, err = process.communicate()
  result = subprocess.CompletedProcess(args, process.returncode, out, err)
  if check:
    result.check_returncode()
  return result


def Popen(args, *, cwd=None, env=None, stdout=None, stderr=None, text=False,  # pylint: disable=invalid-name
          start_new_session=False, **kwargs):
  """``subprocess.Popen(args, ...)``; forked warm where it applies (then its output, if piped,
  comes from ``communicate``, whole)."""
  env = dict(os.environ if env is None else env)
  process = None
  if not kwargs and stdout in (None, subprocess.PIPE) and stderr in (
      None, subprocess.PIPE, subprocess.STDOUT):
    process = _start(args, cwd, env, None, stdout, stderr, text, new_session=start_new_session)
  if process is None:
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=text,  # pylint: disable=consider-using-with
                               start_new_session=start_new_session, **kwargs)
  return process
