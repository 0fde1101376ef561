"""A ``google/`` re-export killed between its data and index renames (issue 27, item 8), and
the temporary files a killed export leaves.

``save_google_checkpoint`` over an existing checkpoint: before, a SIGKILL after the new data
file was renamed in and before the new index left the old index over the new data, a
checkpoint of mixed halves. Now the old index goes first: the kill (at the fault point
``google_export_data``) leaves no loadable checkpoint, and the next export writes a whole one.
The export writes in a temporary folder named as every temporary file
(``<prefix>.tmp-<pid>-<8 hex>``, ``fileio.temp_target``): before, its files were
``bert_model.ckpt.tmp-<pid>-<hex>.index``, a name no cleanup knew, left for ever by a kill.
Only the killed export runs in a subprocess; the others run here.
"""

import os
import signal
import subprocess
import sys

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.modeling import BertConfig, BertModel, checkpoints
from tests.faults.support_export import ROOT

# Saves a tiny BERT with weights drawn from seed argv[2] at prefix argv[1].
_EXPORT = """
import sys
from tests.faults.test_google_reexport import export
export(sys.argv[1], int(sys.argv[2]))
"""
WORDS = "bert/embeddings/word_embeddings"


def export(prefix, seed):
  """Saves a tiny BERT with weights drawn from ``seed`` at ``prefix``; returns the sum of its
  word embeddings (float64, from the model's own variable)."""
  model = BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=16))
  rng = np.random.RandomState(seed)
  for variable in model.trainable_variables:
    variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(np.float32))
  checkpoints.save_google_checkpoint(model, str(prefix), global_step=seed)
  return float(np.sum(np.float64(model.word_embeddings.numpy())))


def _killed_export(prefix, seed):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "BERT_TF_FAULT": "kill:google_export_data"}
  return subprocess.run([sys.executable, "-c", _EXPORT, str(prefix), str(seed)], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=600)


def _read(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return int(reader.get_tensor("global_step")), float(np.sum(np.float64(reader.get_tensor(WORDS))))


def test_a_reexport_killed_between_data_and_index_is_never_mixed(tmp_path):
  google = tmp_path / "google"
  prefix = google / "bert_model.ckpt"
  first = export(prefix, 1)
  assert _read(prefix) == (1, first)
  assert sorted(os.listdir(google)) == ["bert_model.ckpt.data-00000-of-00001",
                                        "bert_model.ckpt.index", "checkpoint"]
  killed = _killed_export(prefix, 2)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  # The new data is in place, the old index is gone: nothing loads, nothing mixed.
  assert os.path.exists(f"{prefix}.data-00000-of-00001")
  assert not os.path.exists(f"{prefix}.index")
  # What the kill left is one temporary of bert_model.ckpt (the killed process's), a folder
  # holding the new index, named so that cleanups and input globs know it.
  left = sorted(set(os.listdir(google)) - {"bert_model.ckpt.data-00000-of-00001", "checkpoint"})
  assert len(left) == 1, left
  assert fileio.temp_target(left[0]) == ("bert_model.ckpt", int(left[0].split("-")[1]))
  assert not fileio.process_running(fileio.temp_target(left[0])[1])
  assert os.listdir(google / left[0]) == ["bert_model.ckpt.index"]
  # A temporary of a running process is not touched by the next export.
  running = google / fileio.temp_name(str(prefix)).rsplit("/", 1)[1]
  running.mkdir()
  again = export(prefix, 2)  # the next run's export
  assert _read(prefix) == (2, again) and again != first
  assert sorted(os.listdir(google)) == sorted(["bert_model.ckpt.data-00000-of-00001",
                                               "bert_model.ckpt.index", "checkpoint",
                                               running.name])
