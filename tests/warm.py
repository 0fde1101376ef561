"""``subprocess.run`` and ``subprocess.Popen`` for ``python script.py args`` and ``python -m
bert_tf args``, forked from a warm interpreter.

A script's process spends 3.5-4.5 s importing TensorFlow, Keras and bert_tf before it does
anything, and about 1 s more tearing its modules down at exit; the suite runs some two hundred
of them. ``run`` and ``Popen`` send such a command to a long-lived interpreter
(``tests/_warm_zygote.py``) that has imported all of that once and has not started
TensorFlow's runtime; it forks, and the child runs the script as ``python script.py args``
would (``__main__``, argv, ``sys.path[0]``, folder, environment, descriptors; its exit status
and its output are the command's; threads joined, atexit functions run and streams flushed at
exit, the module teardown skipped). A run of the tests' tiny models goes from about 11 s to
6 s, a one-line flag error from 4.5 s to 0.03 s.

A warm interpreter runs one command at a time and is started with the command's environment
(all but the variables of ``_AT_RUN_TIME``, which are read while a script runs: a request may
set, change or drop those). A test process keeps up to ``_MAX_WARM`` of them, for commands that
run at once (the workers of a multi-worker job) or in other environments (``PYTHONPATH``,
``TF_CPP_MIN_LOG_LEVEL``, the test process's own after a test changed it), and reuses each for
later commands of the same environment; when all are busy, a command runs as a new process.

What a forked child cannot reproduce runs as a new process, as before (``subprocess``):
anything but those two forms; absl's ``--verbosity`` (the quieting is decided at import);
output to anything but a pipe, a file or the test's own; ``BERT_TF_WARM=0`` (every command a
new process, to compare; ``BERT_TF_WARM=debug`` says when a warm interpreter is started for
another environment). A forked child's piped output comes whole from ``communicate`` (not line
by line while it runs); its output to a file object is appended to that file.

Differences that remain: every child of one warm interpreter shares its string-hash seed (a
new process draws its own) and its already-imported modules (a script that forgets an import a
library module made is not caught here); the scripts' start as new processes is what
tests/test_help.py, test_quiet.py and test_quickstart.py run."""

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
# a request may set, change or drop these; any other difference needs a warm interpreter
# started with that environment. (TMPDIR: Python's tempfile forgets its choice in the child.)
_AT_RUN_TIME = ("BERT_TF_FAULT", "BERT_TF_FAULT_READY", "TF_DETERMINISTIC_OPS",
                "PYTHONUNBUFFERED", "TF_XLA_FLAGS", "TF_CONFIG", "TMPDIR",
                "PYTEST_CURRENT_TEST")  # (pytest's, for the test it runs)
# Warm interpreters one test process keeps at most (about 240 MB of its own memory each, the
# rest shared): a multi-worker test runs up to five commands at once (tests/training/).
_MAX_WARM = 6
_LOCK = threading.Lock()
_POOL = []  # the warm interpreters, the least recently used first
_STATE = {"failed": False}


def _enabled():
  return os.environ.get("BERT_TF_WARM", "1") != "0" and hasattr(os, "fork") and hasattr(
      os, "pidfd_open")


def _comparable(env):
  return {k: v for k, v in env.items() if k not in _AT_RUN_TIME}


class _Zygote:
  """A warm interpreter (tests/_warm_zygote.py) started with ``env``; it runs one command at a
  time (``busy``: the _WarmProcess running, or None)."""

  def __init__(self, env):
    self.env = _comparable(env)
    self.busy = None
    self.buffer = b""
    self.process = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, _ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
        env=env, text=True)
    atexit.register(_stop, self.process)

  def idle(self):
    if self.busy is not None:
      self.busy.poll()
    return self.busy is None

  def answer(self, timeout):
    """The warm interpreter's next answer; None when ``timeout`` s passed without one. (Read
    from the descriptor with a buffer of our own: a buffered reader could hold the next answer
    where ``select`` does not see it.)"""
    fd = self.process.stdout.fileno()
    while b"\n" not in self.buffer:
      ready, _, _ = select.select([fd], [], [], timeout)
      if not ready:
        return None
      data = os.read(fd, 65536)
      if not data:
        raise RuntimeError("tests/_warm_zygote.py stopped answering (its errors are above)")
      self.buffer += data
    line, _, self.buffer = self.buffer.partition(b"\n")
    return json.loads(line)


def _stop(zygote):
  try:
    zygote.stdin.close()
    zygote.wait(timeout=30)
  except (OSError, subprocess.TimeoutExpired):
    zygote.kill()


def _zygote(env):
  """An idle warm interpreter started with ``env`` (started now if none is), or None when
  every one this process may keep is busy. Call with _LOCK held."""
  key = _comparable(env)
  for zygote in list(_POOL):
    if zygote.process.poll() is not None and zygote.idle():
      _POOL.remove(zygote)
  found = next((z for z in _POOL if z.env == key and z.idle()), None)
  if found is None:
    if len(_POOL) >= _MAX_WARM:
      idle = next((z for z in _POOL if z.idle()), None)
      if idle is None:
        return None
      _POOL.remove(idle)  # the least recently used: it ends at the end of its input
      idle.process.stdin.close()
    if os.environ.get("BERT_TF_WARM") == "debug" and _POOL:
      differ = sorted({k for k in set(key) | set(_POOL[-1].env)
                       if key.get(k) != _POOL[-1].env.get(k)})
      print(f"warm.py: a warm interpreter for the environment that differs in {differ}",
            file=sys.stderr)
    found = _Zygote(env)
  else:
    _POOL.remove(found)
  _POOL.append(found)
  return found


def _warm_applies(args):
  args = [str(a) for a in args]
  if not (_enabled() and len(args) >= 2 and args[0] == sys.executable and
          (args[1].endswith(".py") and os.path.isfile(args[1]) or
           args[1:3] == ["-m", "bert_tf"])):
    return False
  if any(a.split("=")[0] in ("--verbosity", "-v", "--v") for a in args[2:]):
    return False
  return True


def _target(stream):
  """Where a child's stream goes: None (the test's own), ``subprocess.PIPE``, a path (a file
  object of the test's, opened by path and appended to, or DEVNULL); False: not reproducible."""
  if stream in (None, subprocess.PIPE):
    return stream
  if stream == subprocess.DEVNULL:
    return os.devnull
  name = getattr(stream, "name", None)
  if isinstance(name, str) and hasattr(stream, "fileno") and os.path.isfile(name):
    stream.flush()
    return name
  return False


class _WarmProcess:
  """A forked child, with what the tests use of ``subprocess.Popen``: ``pid``, ``poll``,
  ``wait``, ``communicate``, ``send_signal``, ``kill``, ``returncode``; its output (when
  asked for with ``PIPE``) comes whole from ``communicate``."""

  def __init__(self, zygote, args, paths, folder, text, timeout):
    self.args, self._zygote, self._paths, self._folder = args, zygote, paths, folder
    self._text, self._timeout_given = text, timeout
    self.returncode = None
    self._timed_out = False
    answer = zygote.answer(120)
    if answer is None:
      raise RuntimeError("tests/_warm_zygote.py did not start the command within 120 s")
    self.pid = answer["pid"]
    # Truthy where output was asked for (tests/faults/hook.py reads them with communicate).
    self.stdout = paths["stdout_piped"] or None
    self.stderr = paths["stderr_piped"] or None

  def poll(self):
    return self._collect(0)

  def wait(self, timeout=None):
    if self._collect(timeout) is None:
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def _collect(self, timeout):
    if self.returncode is None and not self._timed_out:
      answer = self._zygote.answer(timeout)
      if answer is None:
        return None
      if answer.get("timeout"):
        self._timed_out = True
      else:
        self.returncode = answer["status"]
      self._zygote.busy = None
    return self.returncode

  def send_signal(self, signum):
    if self.poll() is None:
      try:
        os.kill(self.pid, signum)
      except ProcessLookupError:
        pass  # it ended (and its warm interpreter reaped it) since: as subprocess does

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def _outputs(self):
    outputs = []
    for key in ("stdout", "stderr"):
      if self._paths[f"{key}_piped"]:
        with open(self._paths[key], "rb") as f:
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
  """A ``_WarmProcess`` for ``args``, or None where a warm interpreter does not apply."""
  targets = {"stdout": _target(stdout),
             "stderr": "stdout" if stderr == subprocess.STDOUT else _target(stderr)}
  if any(target is False for target in targets.values()) or not _warm_applies(args):
    return None
  with _LOCK:
    if _STATE["failed"]:
      return None
    zygote = _zygote(env)
    if zygote is None:
      return None  # every warm interpreter busy: a new process
    folder = tempfile.mkdtemp(prefix="warm-")
    paths = {"stdin": os.devnull, "stdout": None, "stderr": None, "stdout_piped": False,
             "stderr_piped": False}
    if input is not None:
      paths["stdin"] = os.path.join(folder, "in")
      with open(paths["stdin"], "w" if text else "wb", encoding="utf-8" if text else None) as f:
        f.write(input)
    for key, target in targets.items():
      if target == subprocess.PIPE:
        paths[key], paths[f"{key}_piped"] = os.path.join(folder, key), True
      else:
        paths[key] = target  # None, a file's path (appended to), or "stdout" (stderr=STDOUT)
    request = {"argv": [str(a) for a in args[1:]], "cwd": str(cwd) if cwd else os.getcwd(),
               "env": env, "timeout": timeout, "new_session": new_session, **paths}
    try:
      zygote.process.stdin.write(json.dumps(request) + "\n")
      zygote.process.stdin.flush()
      process = _WarmProcess(zygote, args, paths, folder, text, timeout)
    except (OSError, RuntimeError) as e:
      _STATE["failed"] = True
      zygote.process.kill()
      shutil.rmtree(folder, ignore_errors=True)
      warnings.warn(f"tests/warm.py: the warm interpreter failed ({e}); new processes from "
                    "here on")
      return None
    zygote.busy = process
    return process


def run(args, *, cwd=None, env=None, timeout=None, capture_output=False, text=False,
        stdout=None, stderr=None, check=False, input=None):  # pylint: disable=redefined-builtin
  """``subprocess.run(args, ...)`` with these arguments; forked warm where it applies."""
  env = dict(os.environ if env is None else env)
  if capture_output:
    stdout = stderr = subprocess.PIPE
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
  comes from ``communicate``, whole; a file object's output is appended to its file)."""
  env = dict(os.environ if env is None else env)
  process = None
  if not kwargs:
    process = _start(args, cwd, env, None, stdout, stderr, text, new_session=start_new_session)
  if process is None:
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=text,  # pylint: disable=consider-using-with
                               start_new_session=start_new_session, **kwargs)
  return process
