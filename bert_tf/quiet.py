"""Quiet TensorFlow for the scripts and ``python -m bert_tf``: no C++ log lines, no INFO chatter.

Every TensorFlow process otherwise prints 7-35 lines its user did not ask for: the C++ start-up
lines (``Could not find cuda drivers``, ``E0000 ... failed call to cuInit ... (303)`` on a machine
without a GPU), which ``TF_CPP_MIN_LOG_LEVEL=2`` does not silence, since TensorFlow 2.21 writes
the import-time ones through absl's C++ logging before ``absl::InitializeLog()`` (where no level
applies); and Python INFO lines (``Sharding callback duration`` per checkpoint, SavedModel
``signature_serialization`` and ``Assets written``, the latter twice: the ``tensorflow`` logger
has its own handler besides absl's).

Found by experiment (TF 2.21, CPU): ``TF_CPP_MIN_LOG_LEVEL=3`` removes the ``cuInit`` error
(logged at the first op); the import-time lines go to file descriptor 2 whatever the settings,
so ``import tensorflow`` runs with descriptor 2 pointed at a temporary file, replayed if the
import fails; the ``tensorflow`` Python logger is set to WARNING, and absl's handler drops INFO
records logged from inside TensorFlow's packages (``functional_saver``, ``builder_impl`` and
``signature_serialization`` log through absl's logger), keeping the scripts' own INFO lines. ``setup`` must run before
TensorFlow is imported; it changes nothing when the user asked for logs with absl's
``--verbosity``/``-v`` (or set ``TF_CPP_MIN_LOG_LEVEL`` themselves, which is kept).

The library does much the same for its own users (a notebook, where a Jupyter kernel shows
whatever reaches descriptor 2 as red lines under the cell, even with ``TF_CPP_MIN_LOG_LEVEL=3``,
whichever bert_tf module it imports first): ``import bert_tf`` calls ``setup_library``, which
does nothing when ``TF_CPP_MIN_LOG_LEVEL=0`` asks for every log line. Otherwise TensorFlow's
C++ logging stays at level 3 for the process (set while TensorFlow is imported: the
environment child processes inherit is left as it was), a user's level of the ``tensorflow``
logger stays, and child processes' output is theirs. A script's ``setup``, which runs after
it, decides by the script's flags.
"""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import sys
import tempfile

_VERBOSE_FLAGS = ("--verbosity", "-v", "--v")


def verbose_requested(argv=None):
  """True when ``argv`` has absl's ``--verbosity=N``/``-v N``/``--v=N`` (logs wanted)."""
  argv = sys.argv[1:] if argv is None else argv
  return any(a in _VERBOSE_FLAGS or a.startswith(tuple(f + "=" for f in _VERBOSE_FLAGS))
             for a in argv)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Imports the ``tensorflow`` package with file descriptor 2 sent to a temporary file.

  ``library``: installed by ``setup_library`` (``import bert_tf`` in a notebook or a program):
  ``TF_CPP_MIN_LOG_LEVEL=3`` in the environment only while TensorFlow is imported, unless the
  user set it. TensorFlow reads it then and keeps that level for the process's C++ logging
  (its later lines too: "failed call to cuInit" on a machine without a GPU, but also a device
  placement log asked for); the environment, which child processes inherit, is left as it
  was. The ``tensorflow`` logger's level only where the user set none."""

  def __init__(self, library=False):
    self.library = library

  def find_spec(self, fullname, path=None, target=None):
    if fullname != "tensorflow":
      return None
    sys.meta_path.remove(self)  # once, and so that find_spec below finds the real one
    spec = importlib.util.find_spec(fullname)
    if spec is None or spec.loader is None:
      return spec
    self._loader = spec.loader
    spec.loader = self
    return spec

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    # The real loader from here on (for anything that reads resources through it).
    module.__loader__ = module.__spec__.loader = self._loader
    level_set = self.library and "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    if level_set:
      os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    try:
      self._exec_captured(module)
    finally:
      if level_set:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    tf_logger = logging.getLogger("tensorflow")
    if not self.library or tf_logger.level == logging.NOTSET:
      tf_logger.setLevel(logging.WARNING)

  def _exec_captured(self, module):
    try:
      sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # closed, or None
      pass
    try:
      saved = os.dup(2)
    except OSError:  # no descriptor 2 (closed): nothing to silence
      self._loader.exec_module(module)
      return
    with tempfile.TemporaryFile() as captured:
      os.dup2(captured.fileno(), 2)
      try:
        self._loader.exec_module(module)
      except BaseException:
        os.dup2(saved, 2)
        captured.seek(0)
        sys.stderr.write(captured.read().decode("utf-8", "replace"))
        raise
      finally:
        os.dup2(saved, 2)
        os.close(saved)


_LIBRARIES = ("tensorflow", "keras", "tensorflow_text", "tf_keras")
# Apache Beam's own logging (create_pretraining_data.py --runner): its warnings too are set-up
# chatter (optional GCP libraries missing, internal options it discards, its worker processes'
# logging relayed), so records below ERROR are dropped.
_CHATTY_LIBRARIES = ("apache_beam",)
_STATE = {"active": False}


def _library_dirs(libraries=_LIBRARIES):
  """The folders of the ``libraries`` packages (found without importing them)."""
  dirs = []
  for name in libraries:
    try:
      spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
      continue
    if spec is not None and spec.submodule_search_locations:
      dirs.extend(os.path.join(os.path.realpath(d), "") for d in spec.submodule_search_locations)
  return tuple(dirs)


class _DropLibraryInfo(logging.Filter):
  """Drops INFO (and debug) records logged from inside TensorFlow's packages (many of them log
  through absl's logger, not ``tensorflow``'s); warnings and the scripts' own INFO lines stay."""

  def __init__(self):
    super().__init__()
    self._dirs = None
    self._chatty_dirs = None

  def filter(self, record):
    if record.levelno >= logging.ERROR:
      return True
    if self._dirs is None:
      self._dirs = _library_dirs()
      self._chatty_dirs = _library_dirs(_CHATTY_LIBRARIES)
    path = os.path.realpath(record.pathname)
    if self._chatty_dirs and path.startswith(self._chatty_dirs):
      return False
    return record.levelno >= logging.WARNING or not path.startswith(self._dirs)


# The functions each run (or loaded model) compiles anew and traces once: their retracing
# warnings are dropped (``per_run_functions``).
_PER_RUN = set()


class _PerRunRetracing(logging.Filter):
  """Drops TensorFlow's "N out of the last M calls to <function ...> triggered tf.function
  retracing" for the functions bert_tf compiles anew for each run or loaded model (a Trainer's
  loop, an evaluation's step, an optimizer's fused update, a model's encoder...) and traces once
  each: TensorFlow counts traces by the Python code across those instances, so the fifth run or
  model in one process (a notebook, a sweep) was told to define its tf.function outside of the
  loop. Warnings about any other function pass."""

  def filter(self, record):
    message = record.getMessage()
    if "triggered tf.function retracing" not in message:
      return True
    return not any(f"<function {name}" in message or
                   (f"<bound method {name}" in message and " of <bert_tf." in message)
                   for name in _PER_RUN)


def _prints_to_console(handler, level):
  """Whether a root handler prints a record of ``level`` on the terminal: absl's, or a stream
  handler on stdout/stderr (a file, a NullHandler, pytest's capture do not count)."""
  if handler.level > level:
    return False
  if type(handler).__name__ == "ABSLHandler":
    return True
  stream = getattr(handler, "stream", None)
  return (isinstance(handler, logging.StreamHandler) and stream is not None and
          stream in (sys.stdout, sys.stderr))


class _RootPrints(logging.Filter):
  """On TensorFlow's own handler: drops a record that a root handler prints on the console
  too. TensorFlow gives its logger a handler at import only when the root has none ("this
  prevents double logging"), but absl configures the root at its first log line, after that:
  every TensorFlow warning was then printed twice (in a notebook once on stdout, once in red).
  Kept when the logger does not propagate or no root handler prints to the console."""

  def filter(self, record):
    if not logging.getLogger("tensorflow").propagate:
      return True
    return not any(_prints_to_console(h, record.levelno) for h in logging.getLogger().handlers)


def per_run_functions(*names):
  """Registers the qualified names (a prefix: ``"Trainer."``, ``"evaluate.<locals>.step "``)
  of functions compiled anew per run, and installs the filter on TensorFlow's logger (and
  ``_RootPrints`` on its own handler)."""
  _PER_RUN.update(names)
  tf_logger = logging.getLogger("tensorflow")
  if not any(isinstance(f, _PerRunRetracing) for f in tf_logger.filters):
    tf_logger.addFilter(_PerRunRetracing())
  for handler in tf_logger.handlers:
    if not any(isinstance(f, _RootPrints) for f in handler.filters):
      handler.addFilter(_RootPrints())


_decided = []  # [True] once a script's setup ran: its flags say whether TF logs are wanted.


def setup(argv=None):
  """Silences TensorFlow's logging unless ``argv`` asks for it; call before TF is imported."""
  _decided.append(True)
  library_hooks = [f for f in sys.meta_path if isinstance(f, _QuietTensorFlowImport)]
  if verbose_requested(argv):
    # What import bert_tf set up (setup_library): the script's flags rule.
    for hook in library_hooks:
      sys.meta_path.remove(hook)
    return False
  for hook in library_hooks:
    hook.library = False
  _STATE["active"] = True
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  logging.getLogger("tensorflow").setLevel(logging.WARNING)
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
  handler = absl_logging.get_absl_handler()
  if not any(isinstance(f, _DropLibraryInfo) for f in handler.filters):
    handler.addFilter(_DropLibraryInfo())
  if "tensorflow" not in sys.modules and not any(
      isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _QuietTensorFlowImport())
  return True


_library = []  # [True] once setup_library ran


def setup_library():
  """``setup`` for the library's users (``import bert_tf`` in a notebook or a program): quiets
  TensorFlow's import and C++ logging (see ``_QuietTensorFlowImport``'s ``library``) unless a
  script already decided or ``TF_CPP_MIN_LOG_LEVEL=0`` asks for every line; another level the
  user set is TensorFlow's C++ level (the import's own lines are still held back). Unlike a
  script's, it leaves the process's environment, absl's handler (a program's own INFO lines,
  Apache Beam's warnings) and child processes' output alone."""
  if _decided or _library or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
    return False
  _library.append(True)
  if "tensorflow" not in sys.modules and not any(
      isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _QuietTensorFlowImport(library=True))
  return True


@contextlib.contextmanager
def child_processes_quiet():
  """Keeps what child processes started inside the block write to file descriptor 2 off the
  terminal (Apache Beam's DirectRunner workers print ~25 lines of logging set-up each), and
  shows it if the block fails. Nothing changes unless ``setup`` quieted this process."""
  if not _STATE["active"]:
    yield
    return
  sys.stderr.flush()
  saved = os.dup(2)
  try:
    with tempfile.TemporaryFile() as captured:
      os.dup2(captured.fileno(), 2)
      try:
        yield
      except BaseException:
        sys.stderr.flush()
        os.dup2(saved, 2)
        captured.seek(0)
        sys.stderr.write(captured.read().decode("utf-8", "replace"))
        raise
      finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
  finally:
    os.close(saved)
