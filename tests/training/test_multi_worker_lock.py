"""Under multi_worker_mirrored only the chief locks --output_dir (bert_tf.run_lock): in one
process, with TF_CONFIG set for each task and a strategy that is a MultiWorkerMirroredStrategy
to ``isinstance`` (no cluster is started). Which task is the chief is checked against
TensorFlow's own rule (``multi_worker_util.is_chief``). The real processes: the hung-chief case
of test_multi_worker_failure.py finds the lock held by the chief's pid."""

import json
import os
import shutil
from unittest import mock

import pytest
import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util

from bert_tf import run_lock
from bert_tf.errors import BertTfError
from bert_tf.training import distribution
from tests.faults.support_export import digests

WORKERS = ["127.0.0.1:1001", "127.0.0.1:1002"]


def _strategy(monkeypatch, cluster, task_type, index):
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                              "task": {"type": task_type, "index": index}}))
  strategy = mock.Mock(spec=tf.distribute.MultiWorkerMirroredStrategy)
  strategy.cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  return strategy


@run_lock.one_run_per_output_dir(trajectory=("seed",))
def _run(output_dir, strategy, *, do_train=True, progress=None, seed=1, inside=None):
  del strategy, do_train, progress, seed
  return inside(output_dir) if inside else None


@pytest.mark.parametrize("cluster,task_type,index", [
    ({"worker": WORKERS}, "worker", 0), ({"worker": WORKERS}, "worker", 1),
    ({"chief": ["127.0.0.1:1000"], "worker": WORKERS}, "chief", 0),
    ({"chief": ["127.0.0.1:1000"], "worker": WORKERS}, "worker", 0)])
def test_only_the_chief_locks_the_output_dir(tmp_path, monkeypatch, cluster, task_type, index):
  strategy = _strategy(monkeypatch, cluster, task_type, index)
  chief = multi_worker_util.is_chief(tf.train.ClusterSpec(cluster), task_type, index)
  assert distribution.is_chief(strategy) == chief
  lock = tmp_path / run_lock.LOCK_FILE

  def inside(output_dir):
    held = lock.exists() and json.loads(lock.read_text())["pid"] == os.getpid()
    if chief:  # a second chief on the same folder: one line, nothing written
      before = digests(tmp_path)
      with pytest.raises(BertTfError, match=r"^--output_dir '.+' is in use by another run: "
                         rf"pid {os.getpid()} on "):
        _run(output_dir, _strategy(monkeypatch, cluster, task_type, index))
      assert digests(tmp_path) == before
    return held

  assert _run(str(tmp_path), strategy, inside=inside) == chief
  assert not lock.exists()
  # The chief records the training flags, another task only compares.
  assert (tmp_path / run_lock.SETTINGS_FILE).exists() == chief


def test_a_worker_runs_beside_the_chief_holding_the_lock(tmp_path, monkeypatch):
  held = run_lock.OutputDirLock(str(tmp_path))  # the chief, in this process
  try:
    before = digests(tmp_path)
    _run(str(tmp_path), _strategy(monkeypatch, {"worker": WORKERS}, "worker", 1))
    assert digests(tmp_path) == before  # the lock file untouched, still the chief's
    with pytest.raises(BertTfError, match="is in use by another run"):
      _run(str(tmp_path), _strategy(monkeypatch, {"worker": WORKERS}, "worker", 0))
  finally:
    held.release()


@pytest.mark.parametrize("cluster,task_type,index", [
    ({"worker": WORKERS}, "worker", 0), ({"worker": WORKERS}, "worker", 1),
    ({"chief": ["127.0.0.1:1000"], "worker": WORKERS}, "chief", 0),
    ({"chief": ["127.0.0.1:1000"], "worker": WORKERS}, "worker", 0)])
def test_only_the_chief_saves_into_the_model_dir(tmp_path, monkeypatch, cluster, task_type,
                                                 index):
  """Every worker takes part in a save; TensorFlow's chief (``multi_worker_util.is_chief``)
  saves into the model folder, each other worker into a new empty folder of its own outside
  it, which no two calls share (mutation audit: a worker given the model folder, or a folder
  inside it, went unnoticed here: only the multi-worker runs' processes would show it)."""
  model_dir = tmp_path / "out"
  model_dir.mkdir()
  strategy = _strategy(monkeypatch, cluster, task_type, index)
  chief = multi_worker_util.is_chief(tf.train.ClusterSpec(cluster), task_type, index)
  first = distribution.worker_write_dir(strategy, str(model_dir))
  if chief:
    assert first == str(model_dir)
    return
  second = distribution.worker_write_dir(strategy, str(model_dir))
  try:
    for folder in (first, second):
      assert os.path.isdir(folder) and os.listdir(folder) == []
      assert os.path.commonpath([folder, str(model_dir)]) != str(model_dir)
    assert first != second and os.listdir(model_dir) == []
  finally:
    for folder in (first, second):
      shutil.rmtree(folder, ignore_errors=True)
