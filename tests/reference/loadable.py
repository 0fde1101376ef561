"""Checks that a folder a script wrote loads alone (``bert_tf.load(folder)``, ``--model``)."""

import io
import os
import tempfile

import numpy as np
import tensorflow as tf

import bert_tf
from bert_tf import __main__ as bert_cli

TEXTS = ["the cat sat on the mat.", ("who wrote it?", "a man in paris.")]


def assert_folder_loads_alone(folder, google_dir, has_masked_lm):
  """``folder`` and ``google_dir`` load with no other argument, give the same outputs, and
  hold the weights of ``google_dir/bert_model.ckpt`` (read by TensorFlow's own reader)."""
  folder, google_dir = str(folder), str(google_dir)
  for path in (folder, google_dir):
    for name in ("bert_config.json", "vocab.txt"):
      assert os.path.exists(os.path.join(path, name)), (path, name)
  bert = bert_tf.load(folder)
  google = bert_tf.load(google_dir)
  reader = tf.train.load_checkpoint(os.path.join(google_dir, "bert_model.ckpt"))
  np.testing.assert_array_equal(google.encoder.word_embeddings.numpy(),
                                reader.get_tensor("bert/embeddings/word_embeddings"))
  np.testing.assert_array_equal(bert.encoder.word_embeddings.numpy(),
                                reader.get_tensor("bert/embeddings/word_embeddings"))
  ours, theirs = bert(TEXTS), google(TEXTS)
  np.testing.assert_allclose(ours.sequence_output, theirs.sequence_output, atol=1e-6)
  assert bert.has_masked_lm == google.has_masked_lm == has_masked_lm
  # The CLI, --model alone: what the folder can do works; fill-mask names the missing head.
  with tempfile.TemporaryDirectory() as tmp:
    npy = os.path.join(tmp, "embedding.npy")
    assert bert_cli.main(["embed", f"--model={google_dir}", f"--output_file={npy}",
                          "the cat sat."], out=io.StringIO()) == 0
    np.testing.assert_allclose(np.load(npy), google.embed(["the cat sat."]), atol=1e-6)
  return google


def assert_fill_mask_names_missing_head(google_dir, capsys):
  status = bert_cli.main(["fill-mask", f"--model={google_dir}", "the [MASK] sat."],
                         out=io.StringIO())
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 1
  assert err == [f"bert_tf fill-mask: error: fill_mask: {google_dir} has no masked-LM head "
                 "(cls/predictions/*) weights (this checkpoint was saved without its "
                 "pretraining heads)"]
