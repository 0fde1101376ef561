"""The encoder's hidden stream is the original's 2-D ``[B*S,H]`` matrix (``reshape_to_matrix``):
every hidden dropout and LayerNorm of a training step works on rank-2 tensors, and the pooler
reads the first token as every S-th row (BENCHMARKS.md, "The 2-D hidden stream"). The numbers
are checked against Google's modeling.py in test_google_original.py."""

import numpy as np
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertModel, layers

B, S, H = 2, 6, 16


def _graph(rng):
  config = BertConfig(vocab_size=40, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32)
  model = BertModel(config)
  layers.set_dropout_rng(model, rng)
  ids = tf.constant(np.arange(B * S).reshape(B, S) % 40, tf.int32)

  @tf.function
  def step(ids):
    with tf.GradientTape() as tape:
      out = model({"input_word_ids": ids}, training=True)
      loss = tf.reduce_sum(out["pooled_output"]) + tf.reduce_sum(out["sequence_output"])
    return tape.gradient(loss, model.trainable_variables)
  return step.get_concrete_function(ids).graph


def test_hidden_dropouts_and_layer_norms_are_two_dimensional():
  graph = _graph("hash")
  # The hash masks: `bits >= threshold` over each dropped tensor; [B,N,S,S] ones are the
  # attention's, the others the hidden stream's (embeddings + 2 per layer).
  masks = [op.outputs[0].shape.as_list() for op in graph.get_operations()
           if op.type == "GreaterEqual" and "dropout" in op.name]
  hidden = [m for m in masks if len(m) != 4]
  assert len(hidden) == 1 + 2 * 2
  assert all(m == [B * S, H] for m in hidden), hidden
  norms = [op.inputs[0].shape.as_list() for op in graph.get_operations()
           if op.type in ("Mean", "Moments") and "LayerNorm" in op.name
           and "pooler" not in op.name]
  assert norms and all(len(shape) == 2 for shape in norms), norms


def test_philox_dropout_is_two_dimensional_too():
  graph = _graph("philox")
  shapes = [op.outputs[0].shape.as_list() for op in graph.get_operations()
            if op.type == "StatelessRandomUniformV2"]
  assert sorted(len(s) for s in shapes) == [2] * 5 + [4] * 2, shapes
