"""bert_tf.quiet on a stand-in ``tensorflow`` package that writes to file descriptor 2 while it
is imported, as TensorFlow 2.21's C++ start-up does: silenced by default, shown with
--verbosity, replayed (with the traceback) when the import fails; the library's setup_library
the same unless a script decided or TF_CPP_MIN_LOG_LEVEL=0."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = ("import sys; from bert_tf import quiet; quiet.setup(sys.argv[1:]); "
         "import tensorflow; print('imported', tensorflow.LOADED)")
FAKE = ("import os\n"
        "os.write(2, b'I0000 00:00:1.0  1 cudart_stub.cc:31] Could not find cuda drivers\\n')\n"
        "{tail}\n")


def _run(tmp_path, tail, *argv):
  package = tmp_path / "tensorflow"
  package.mkdir()
  (package / "__init__.py").write_text(FAKE.format(tail=tail))
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  return subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, capture_output=True,
                        text=True, timeout=60)


def test_import_time_lines_are_silenced(tmp_path):
  result = _run(tmp_path, "LOADED = os.environ['TF_CPP_MIN_LOG_LEVEL']")
  assert result.returncode == 0, result.stderr
  assert (result.stdout, result.stderr) == ("imported 3\n", "")


def test_verbosity_shows_them(tmp_path):
  result = _run(tmp_path, "LOADED = os.environ.get('TF_CPP_MIN_LOG_LEVEL')", "--verbosity=1")
  assert result.returncode == 0, result.stderr
  assert result.stdout == "imported None\n"
  assert result.stderr == ("I0000 00:00:1.0  1 cudart_stub.cc:31] Could not find cuda "
                           "drivers\n")


def test_a_failed_import_shows_what_it_wrote(tmp_path):
  result = _run(tmp_path, "raise ImportError('libcudart.so.12: cannot open shared object')")
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert lines[0] == "I0000 00:00:1.0  1 cudart_stub.cc:31] Could not find cuda drivers"
  assert lines[-1] == "ImportError: libcudart.so.12: cannot open shared object"


LIBRARY_CHILD = ("import sys; from bert_tf import quiet; {before}quiet.setup_library(); "
                 "import tensorflow; print('imported')")


@pytest.mark.parametrize("before,level,shown", [
    ("", None, False),  # A notebook's or program's default: silenced.
    ("", "3", False),  # TF_CPP_MIN_LOG_LEVEL=3 does not stop the import-time lines: silenced.
    ("", "0", True),  # Every log line asked for.
    ("quiet.setup(['--verbosity=1']); ", None, True),  # A script's flags decided.
])
def test_library_setup(tmp_path, before, level, shown):
  package = tmp_path / "tensorflow"
  package.mkdir()
  (package / "__init__.py").write_text(FAKE.format(tail=""))
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  if level is not None:
    env["TF_CPP_MIN_LOG_LEVEL"] = level
  result = subprocess.run([sys.executable, "-c", LIBRARY_CHILD.format(before=before)], env=env,
                          capture_output=True, text=True, timeout=60)
  assert result.returncode == 0 and result.stdout == "imported\n", result.stderr
  assert result.stderr == ("I0000 00:00:1.0  1 cudart_stub.cc:31] Could not find cuda "
                           "drivers\n" if shown else "")


_LIBRARY_IMPORT = """
import logging, os, subprocess, sys
logging.getLogger("tensorflow").setLevel(logging.INFO)  # the user's own level
import bert_tf  # nothing else: the set-up is the package's
import tensorflow
from absl import logging as absl_logging
print("during", tensorflow.LOADED, "after", os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
      "level", logging.getLogger("tensorflow").level,
      "absl filters", len(absl_logging.get_absl_handler().filters), flush=True)
subprocess.run([sys.executable, "-c",
                "import os; print('child', os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"])
"""


def _run_with_fake_tensorflow(tmp_path, code, tail=""):
  package = tmp_path / "tensorflow"
  package.mkdir()
  (package / "__init__.py").write_text(FAKE.format(tail=tail))
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                        timeout=60)


def test_import_bert_tf_quiets_tensorflow_and_leaves_the_environment_as_it_was(tmp_path):
  """``import bert_tf`` (a notebook importing bert_tf.modeling first) silences TensorFlow's
  import; TF_CPP_MIN_LOG_LEVEL is 3 in the environment only while TensorFlow is imported (not
  inherited by child processes), a level the user gave the tensorflow logger stays, and absl's
  handler gets no filter (a program's own INFO lines, Apache Beam's warnings)."""
  result = _run_with_fake_tensorflow(
      tmp_path, _LIBRARY_IMPORT, "LOADED = os.environ.get('TF_CPP_MIN_LOG_LEVEL')")
  assert result.returncode == 0, result.stderr
  assert (result.stdout, result.stderr) == ("during 3 after None level 20 absl filters 0\n"
                                            "child None\n", "")


@pytest.mark.parametrize("close_stderr", [False, True])
def test_a_notebook_importing_bert_tf_modeling_first_sees_no_tensorflow_lines(close_stderr):
  """The real TensorFlow: its C++ start-up lines at import and "failed call to cuInit" at the
  first op (no GPU here) are not printed; a program with descriptor 2 closed imports it."""
  env = {**os.environ, "PYTHONPATH": ROOT}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  close = "import os; os.close(2); " if close_stderr else ""
  result = subprocess.run(
      [sys.executable, "-c", f"{close}import bert_tf.modeling; import tensorflow as tf; "
       "print(int(tf.constant(1) + 1))"], cwd=ROOT, env=env, capture_output=True, text=True,
      timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (result.stdout, result.stderr) == ("2\n", "")


def test_the_test_suite_prints_no_tensorflow_lines():
  """tests/conftest.py quiets TensorFlow as the scripts do: importing it, then TensorFlow
  running an op (where "failed call to cuInit" is logged without a GPU), writes nothing."""
  env = {**os.environ, "PYTHONPATH": ROOT}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run(
      [sys.executable, "-c", "import tests.conftest; import tensorflow as tf; "
       "print(int(tf.constant(1) + 1))"], cwd=ROOT, env=env, capture_output=True, text=True,
      timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (result.stdout, result.stderr) == ("2\n", "")


_TWICE = """
import logging
import tensorflow as tf
from bert_tf.training import loop  # noqa: F401  (bert_tf's TensorFlow logging set-up)
tf.get_logger().warning("before the root has a handler")
logging.basicConfig()  # what absl does at its first log line (bert_tf.load's, a script's)
tf.get_logger().warning("after")
"""


def test_a_tensorflow_warning_is_printed_once():
  """TensorFlow gives its logger a handler of its own at import when the root logger has none;
  absl configures the root later, at its first log line: every TensorFlow warning was then
  printed twice (in a notebook, once on stdout and once in red)."""
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["PYTHONPATH"] = ROOT
  result = subprocess.run([sys.executable, "-c", _TWICE], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stderr.splitlines()
  assert [line for line in lines if "before the root" in line or "after" in line] == [
      "WARNING:tensorflow:before the root has a handler", "WARNING:tensorflow:after"]


_NOT_LOST = """
import logging
import tensorflow as tf
from bert_tf.training import loop  # noqa: F401
logging.getLogger().addHandler(logging.NullHandler())  # a root handler that prints nothing
tf.get_logger().warning("with a silent root handler")
logging.basicConfig()
tf.get_logger().propagate = False  # the usual cure for double logging
tf.get_logger().warning("not propagated")
"""


def test_a_tensorflow_warning_is_not_lost():
  """TensorFlow's own handler stays silent only while a root handler prints on the console."""
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["PYTHONPATH"] = ROOT
  result = subprocess.run([sys.executable, "-c", _NOT_LOST], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert [line for line in result.stderr.splitlines() if "silent root" in line or
          "not propagated" in line] == ["WARNING:tensorflow:with a silent root handler",
                                        "WARNING:tensorflow:not propagated"]


def test_absl_handler_drops_tensorflows_info_records_only():
  """The filter setup puts on absl's handler: INFO records logged from inside TensorFlow's
  package go (its SavedModel and checkpoint chatter logs through absl's logger); its warnings
  and errors stay, and so do the scripts' own INFO lines (TensorFlow's warnings dropped too
  went unnoticed)."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  import logging  # pylint: disable=import-outside-toplevel
  from bert_tf import quiet  # pylint: disable=import-outside-toplevel
  spec = importlib.util.find_spec("tensorflow")
  inside = os.path.join(os.path.realpath(list(spec.submodule_search_locations)[0]), "python",
                        "saved_model", "builder_impl.py")
  script = os.path.join(ROOT, "run_classifier.py")
  kept = {}
  for path in (inside, script):
    for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR):
      record = logging.LogRecord("absl", level, path, 1, "message", None, None)
      kept[path == script, logging.getLevelName(level)] = quiet._DropLibraryInfo().filter(record)
  assert kept == {(False, "DEBUG"): False, (False, "INFO"): False, (False, "WARNING"): True,
                  (False, "ERROR"): True, (True, "DEBUG"): True, (True, "INFO"): True,
                  (True, "WARNING"): True, (True, "ERROR"): True}
