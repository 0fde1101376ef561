"""The warm interpreter of ``tests/warm.py``: imports what the scripts import (bert_tf's quieting
first, as the scripts do, then TensorFlow, Keras and the bert_tf modules the scripts name),
starts nothing of TensorFlow's runtime, and then forks one child per request, which runs the
script as ``python script.py args`` (or ``python -m module args``) would: ``__main__``,
``sys.argv``, ``sys.path[0]``, the working folder, the environment, file descriptors 0-2 from
the request, its exit status the interpreter's own (a traceback, ``sys.exit``, a signal).

Protocol (one request at a time): a JSON line on descriptor 0 (``argv``, ``cwd``, ``env``,
``stdin``/``stdout``/``stderr`` paths (output appended) or null for this process's,
``timeout``, ``new_session``); the answer, a JSON line on descriptor 1: ``{"pid": ...}`` once
the child has its descriptors, session, folder and environment, then ``{"status": exit
status as subprocess gives it}`` or ``{"timeout": true}`` (the child was killed at the
timeout). The child is killed, and this process ends, when the tests'
process closes descriptor 0.
"""

import ast
import glob
import importlib
import io
import json
import os
import select
import signal
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script_imports():
  """The bert_tf modules (and TensorFlow's companions) the top-level scripts import."""
  names = set()
  scripts = glob.glob(os.path.join(ROOT, "*.py")) + glob.glob(os.path.join(ROOT, "data_prep",
                                                                          "*.py"))
  for path in scripts:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:  # top-level imports only: what every run of the script imports
      if isinstance(node, ast.Import):
        names.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names.add(node.module)
        names.update(f"{node.module}.{alias.name}" for alias in node.names)
  # `python -m bert_tf`'s commands import these when they run.
  names.update(("bert_tf.inference", "bert_tf.visualize", "bert_tf.export.hugging_face"))
  return sorted(n for n in names if n.split(".")[0] in ("bert_tf", "tensorflow_text"))


def _preload():
  # pylint: disable=unused-import,import-outside-toplevel
  from absl import app, flags, logging  # noqa: F401
  absl_flags = set(flags.FLAGS)
  from bert_tf import cli  # noqa: F401  (bert_tf.quiet's setup, before TensorFlow)
  import bert_tf.training.flags  # noqa: F401
  for name in _script_imports():
    try:
      importlib.import_module(name)
    except ImportError:
      pass  # a name imported from a module (a function, a class), not a module
  # A child defines its script's flags: none may be defined here already.
  defined = sorted(name for name in set(flags.FLAGS) - absl_flags
                   if not flags.FLAGS.find_module_defining_flag(name, "").startswith(
                       ("tensorflow", "keras", "absl")))
  if defined:
    raise SystemExit(f"_warm_zygote: flags defined at import: {defined}")
  threads = len(os.listdir("/proc/self/task"))
  if threads > 2:  # the main thread and numpy's OpenBLAS server, which is fork-safe
    raise SystemExit(f"_warm_zygote: {threads} threads after the imports (TensorFlow's runtime "
                     "started?): forking would not be safe")


def _open(path, flags, fd):
  target = os.open(path, flags, 0o644)
  if target != fd:
    os.dup2(target, fd)
    os.close(target)


def _serve(requests, answers):
  """Answers requests until end of input; returns (the request, the descriptor to tell the
  parent it is ready on) in each child."""
  while True:
    line = requests.readline()
    if not line:
      sys.exit(0)
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
      requests.close()
      answers.close()
      os.close(ready_r)
      return request, ready_w
    os.close(ready_w)
    # Its pid once it has its own descriptors and session (a test may signal its process
    # group at once); end of file if it failed before.
    os.read(ready_r, 1)
    os.close(ready_r)
    answers.write(json.dumps({"pid": pid}) + "\n")
    answers.flush()
    answers.write(json.dumps(_wait(pid, request.get("timeout"), requests)) + "\n")
    answers.flush()


def _wait(pid, timeout, requests):
  """The child's exit status; kills it at ``timeout`` or when the tests' process has gone
  (end of input)."""
  fd = os.pidfd_open(pid)
  try:
    while True:
      ready, _, _ = select.select([fd, requests], [], [], timeout)
      if fd in ready:
        return {"status": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}
      if not ready or not requests.readline():
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        if ready:
          sys.exit(0)
        return {"timeout": True}
  finally:
    os.close(fd)


def _become(request):
  """This child becomes ``python <argv>``: descriptors, folder, environment, argv, path."""
  for fd, key, flags in ((0, "stdin", os.O_RDONLY),
                         (1, "stdout", os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                         (2, "stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND)):
    path = request.get(key)
    if path == "stdout":  # stderr=STDOUT
      os.dup2(1, fd)
    elif path:
      _open(path, flags, fd)
  if request.get("new_session"):
    os.setsid()
  if request.get("cwd"):
    os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  tempfile.tempdir = None  # chosen again from TMPDIR at its next use, as in a new process
  if os.environ.get("PYTHONUNBUFFERED"):  # as `python` makes its stdout for it
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=sys.stdout.encoding,
        errors=sys.stdout.errors, write_through=True)
  signal.signal(signal.SIGINT, signal.default_int_handler)
  argv = request["argv"]
  if argv[0] == "-m":  # python -m module args: sys.path[0] is the working folder
    sys.argv = argv[1:]
    sys.path[0] = os.getcwd()
    return argv[1:2]
  sys.argv = list(argv)
  sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
  return argv[0]


if __name__ == "__main__":
  _preload()
  # The protocol's descriptors away from 0 and 1, which children take for their own.
  _requests = os.fdopen(os.dup(0), "r")
  _answers = os.fdopen(os.dup(1), "w")
  _open(os.devnull, os.O_RDONLY, 0)
  os.dup2(2, 1)
  _request, _ready = _serve(_requests, _answers)
  del _requests, _answers
  _script = _become(_request)
  os.write(_ready, b".")
  os.close(_ready)
  import atexit  # pylint: disable=wrong-import-position,wrong-import-order
  import runpy  # pylint: disable=wrong-import-position,wrong-import-order
  import threading  # pylint: disable=wrong-import-position,wrong-import-order
  import traceback  # pylint: disable=wrong-import-position,wrong-import-order
  _code = 0
  try:
    if isinstance(_script, list):  # -m module
      runpy.run_module(_script[0], run_name="__main__", alter_sys=True)
    else:
      runpy.run_path(_script, run_name="__main__")
  except SystemExit as _e:  # as the interpreter turns it into an exit status
    if _e.code is None or isinstance(_e.code, int):
      _code = _e.code or 0
    else:
      print(_e.code, file=sys.stderr)
      _code = 1
  except KeyboardInterrupt:  # the interpreter prints it and dies of SIGINT
    traceback.print_exc()
    _code = -signal.SIGINT
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    _code = 1
  # The interpreter's exit up to its module teardown (which takes about a second with
  # TensorFlow loaded and has nothing to show): threads joined, atexit functions, streams
  # flushed.
  threading._shutdown()  # pylint: disable=protected-access
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for _stream in (sys.stdout, sys.stderr):
    try:
      _stream.flush()
    except (OSError, ValueError):
      pass
  if _code == -signal.SIGINT:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
  os._exit(_code & 0xFF)  # pylint: disable=protected-access
