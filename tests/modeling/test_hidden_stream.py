"""The encoder's hidden stream is the original's 2-D ``[B*S,H]`` matrix (``reshape_to_matrix``):
every hidden dropout and LayerNorm of a training step works on rank-2 tensors, and the pooler
reads the first token as the first H columns of the ``[B,S*H]`` matrix (BENCHMARKS.md, "The 2-D
hidden stream": on a GPU's compile of BERT-Large, 6 layout transposes per layer instead of 16),
whose gradient is a pad at the edge, not an interior one (BENCHMARKS.md, "The pooler's gradient
and the TPU compiler"). The numbers are checked
against Google's modeling.py in test_google_original.py and against transformers."""

import re

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


def test_the_stream_between_layers_stays_16_bit_and_three_dimensional():
  # Under mixed_bfloat16 each block hands the next one its LayerNorm's output rounded to
  # bf16, shaped [B,S,H] (only the inside of a block is 2-D).
  config = BertConfig(vocab_size=40, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32)
  model = BertModel(config, dtype="mixed_bfloat16")
  ids = tf.constant(np.arange(B * S).reshape(B, S) % 40, tf.int32)
  x = model.embeddings(ids, tf.zeros_like(ids), training=False)
  assert x.dtype == tf.bfloat16 and x.shape == (B, S, H)
  adder = layers.attention_adder_from_mask(tf.ones_like(ids))
  for block in model.encoder_layers:
    x, _ = block(x, adder, training=False)
    assert x.dtype == tf.bfloat16 and x.shape == (B, S, H)


def test_pooler_reads_the_first_token_when_the_length_is_known_only_when_run():
  # A serving signature's [None, None] inputs: the first token of each sequence, whatever S.
  config = BertConfig(vocab_size=40, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32)
  model = BertModel(config)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
  def pooled(ids):
    return model({"input_word_ids": ids}, training=False)["pooled_output"]

  ids = tf.constant(np.arange(B * S).reshape(B, S) % 40, tf.int32)
  out = model({"input_word_ids": ids}, training=False)
  first = out["sequence_output"][:, 0, :]
  expected = np.tanh(first.numpy() @ model.pooler.kernel.numpy() + model.pooler.bias.numpy())
  np.testing.assert_allclose(pooled(ids).numpy(), expected, rtol=1e-5, atol=1e-6)
  assert pooled.get_concrete_function().structured_outputs.shape.as_list() == [None, H]


def test_the_pooler_gradient_has_no_interior_padding():
  # Reading every S-th row of [B*S,H] differentiates to a pad with interior padding S-1
  # (`lo_hi_interior`), on which libtpu 0.0.35's compiler stops from 8,192 tokens at S >= 256.
  # The update's HLO, as XLA gets it, holds only edge pads.
  config = BertConfig(vocab_size=40, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32)
  model = BertModel(config)
  ids = tf.constant(np.arange(B * S).reshape(B, S) % 40, tf.int32)

  @tf.function(jit_compile=True)
  def grads(ids):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(model({"input_word_ids": ids}, training=False)["pooled_output"])
    return tape.gradient(loss, model.trainable_variables)

  hlo = grads.experimental_get_compiler_ir(ids)(stage="hlo")
  pads = re.findall(r" pad\(.*?padding=([0-9_x]+)", hlo)
  assert pads, "no pad in the update's HLO: the pooler's read changed; see this test's comment"
  interior = [p for p in pads for dim in p.split("x") if dim.count("_") == 2
              and int(dim.split("_")[2]) != 0]
  assert not interior, interior
