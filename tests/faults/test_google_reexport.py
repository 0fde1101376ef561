"""A ``google/`` re-export killed between its data and index renames (issue 27, item 8).

``save_google_checkpoint`` over an existing checkpoint: before, a SIGKILL after the new data
file was renamed in and before the new index left the old index over the new data, a
checkpoint of mixed halves. Now the old index goes first: the kill (at the fault point
``google_export_data``) leaves no loadable checkpoint, and the next export writes a whole one.
"""

import os
import signal
import subprocess
import sys

import numpy as np
import tensorflow as tf

from tests.faults.support_export import ROOT

# Saves a tiny BERT with weights drawn from seed argv[2] at prefix argv[1]; prints the sum of
# its word embeddings.
_EXPORT = """
import sys
import numpy as np
from bert_tf.modeling import BertConfig, BertModel, checkpoints
model = BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                             num_attention_heads=2, intermediate_size=16))
rng = np.random.RandomState(int(sys.argv[2]))
for variable in model.trainable_variables:
  variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(np.float32))
checkpoints.save_google_checkpoint(model, sys.argv[1], global_step=int(sys.argv[2]))
print(repr(float(np.sum(np.float64(model.word_embeddings.numpy())))))
"""
WORDS = "bert/embeddings/word_embeddings"


def _export(prefix, seed, fault=None):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  if fault:
    env["BERT_TF_FAULT"] = fault
  return subprocess.run([sys.executable, "-c", _EXPORT, str(prefix), str(seed)], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=300)


def _read(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return int(reader.get_tensor("global_step")), float(np.sum(np.float64(reader.get_tensor(WORDS))))


def test_a_reexport_killed_between_data_and_index_is_never_mixed(tmp_path):
  prefix = tmp_path / "google" / "bert_model.ckpt"
  first = _export(prefix, 1)
  assert first.returncode == 0, first.stderr[-3000:]
  assert _read(prefix) == (1, float(first.stdout.split()[-1]))
  killed = _export(prefix, 2, fault="kill:google_export_data")
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  # The new data is in place, the old index is gone: nothing loads, nothing mixed.
  assert os.path.exists(f"{prefix}.data-00000-of-00001")
  assert not os.path.exists(f"{prefix}.index")
  again = _export(prefix, 2)  # the next run's export
  assert again.returncode == 0, again.stderr[-3000:]
  assert _read(prefix) == (2, float(again.stdout.split()[-1]))
  assert _read(prefix)[1] != float(first.stdout.split()[-1])
