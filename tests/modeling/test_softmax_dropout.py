"""layers.softmax_dropout: the attention softmax and its hash dropout with one gradient that
recomputes the probabilities and the mask. Checked against the plain composition (softmax_to
then hash_dropout, each with TensorFlow's own gradients), against the gradient written out in
NumPy float64, and inside a small BERT update (``attention_implementation="xla_recompute"``) against
``"xla"`` (the separate ops), with dropout on and the same seeds."""

import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertModel, layers
from tests.modeling.padded_update import padded_update
from tests.reference import google_models

RATE = 0.3
SHAPE = [2, 3, 5, 7]  # B, N, F, T
SCALE = 1.0 / math.sqrt(8.0)
SEED = tf.constant([17, 5], tf.int32)


def _inputs(dtype):
  rng = np.random.RandomState(0)
  scores = tf.cast(tf.constant(rng.normal(size=SHAPE) * 3, tf.float32), dtype)
  mask = np.ones([SHAPE[0], SHAPE[3]], np.float32)
  mask[1, 4:] = 0  # padding on the "to" side
  adder = tf.constant((1.0 - mask)[:, None, None, :] * -10000.0, tf.float32)
  d_dropped = tf.constant(rng.normal(size=SHAPE), tf.float32)
  d_probs = tf.constant(rng.normal(size=SHAPE), tf.float32)
  return scores, adder, d_dropped, d_probs


def _fused(scores, adder, dtype):
  return layers.softmax_dropout(scores, adder, SCALE, RATE, SEED, dtype)


def _composition(scores, adder, dtype):
  probs = layers.softmax_to(tf.cast(scores, tf.float32) * SCALE + adder, dtype)
  return layers.hash_dropout(probs, RATE, SEED), probs


def _value_and_grad(fn, dtype, jit=False):
  scores, adder, d_dropped, d_probs = _inputs(dtype)

  def run(scores, adder):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      dropped, probs = fn(scores, adder, dtype)
      # Both outputs reach the loss (the probabilities do when a model returns them).
      loss = (tf.reduce_sum(tf.cast(dropped, tf.float32) * d_dropped)
              + tf.reduce_sum(tf.cast(probs, tf.float32) * d_probs))
    return dropped, probs, tape.gradient(loss, scores)

  if jit:
    run = tf.function(run, jit_compile=True)
  return [t.numpy().astype(np.float64) for t in run(scores, adder)]


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_same_numbers_as_the_composition(dtype):
  # Without XLA: bit for bit, forward and gradient (the same ops in the same order).
  for got, want in zip(_value_and_grad(_fused, dtype), _value_and_grad(_composition, dtype)):
    np.testing.assert_array_equal(got, want)


def test_under_xla_within_float32_rounding():
  got = _value_and_grad(_fused, tf.float32, jit=True)
  want = _value_and_grad(_composition, tf.float32, jit=True)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6 * np.abs(w).max())


def test_gradient_is_the_written_out_formula():
  """d_scores = scale * p * (dp - sum(dp * p)), dp = d_dropped * keep / (1 - rate) + d_probs,
  in float64 from the same inputs; the mask from hash_keep (tested against MurmurHash3 in
  test_dropout.py)."""
  scores, adder, d_dropped, d_probs = [t.numpy().astype(np.float64) for t in
                                       _inputs(tf.float32)]
  logits = scores * SCALE + adder
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  keep = layers.hash_keep(SHAPE, RATE, SEED).numpy()
  dp = d_dropped * keep / (1.0 - RATE) + d_probs
  want = SCALE * p * (dp - (dp * p).sum(-1, keepdims=True))
  dropped, probs, got = _value_and_grad(_fused, tf.float32)
  np.testing.assert_allclose(probs, p, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(dropped, p * keep / (1.0 - RATE), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
  assert 0 < keep.mean() < 1  # some dropped, some kept


def _model_update(implementation, dtype, jit):
  """Loss and gradients of a 2-layer BERT (dropout 0.1 everywhere, hash masks) on a padded
  batch; every output reaches the loss through fixed random weights."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(
      attention_implementation=implementation))
  keras.utils.set_random_seed(0)
  model = BertModel(config, dtype=dtype)
  layers.set_dropout_rng(model, "hash")  # what the training loop picks under jit_compile
  return padded_update(model, jit)[0]


def test_bert_update_matches_the_separate_ops():
  """Under XLA (where the training loop uses it): loss and every gradient within float32
  rounding. (Without XLA both paths are the same ops: test_same_numbers_as_the_composition.)"""
  got = _model_update("xla_recompute", "float32", jit=True)
  want = _model_update("xla", "float32", jit=True)
  assert len(got) == len(want) > 30
  # Rounding relative to the gradients' scale: the key bias's gradient is 0 up to rounding
  # (softmax ignores a constant added to every score of a row), so its own scale is noise.
  scale = max(np.abs(w).max() for w in want[1:])
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  for g, w in zip(got[1:], want[1:]):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale)


def _gradient_step(model):
  @tf.function(jit_compile=True)
  def step(ids, mask):
    with tf.GradientTape() as tape:
      out = model({"input_word_ids": ids, "input_mask": mask}, training=True)
      loss = tf.reduce_sum(out["sequence_output"] ** 2)
    return tape.gradient(loss, model.trainable_variables)
  return step


def test_backward_keeps_no_probabilities_under_xla():
  """The update's HLO: the backward pass recomputes the softmax behind an optimization
  barrier instead of reading the forward's probabilities."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(num_hidden_layers=1))
  hlo = {}
  for implementation in ("xla", "xla_recompute"):
    keras.utils.set_random_seed(0)
    model = BertModel(BertConfig.from_dict(dict(config.to_dict(),
                                                attention_implementation=implementation)),
                      dtype="mixed_bfloat16")
    layers.set_dropout_rng(model, "hash")

    ids, mask = tf.ones([2, 16], tf.int32), tf.ones([2, 16], tf.int32)
    hlo[implementation] = _gradient_step(model).experimental_get_compiler_ir(
        ids, mask)(stage="hlo")
  assert "opt-barrier" in hlo["xla_recompute"] and "opt-barrier" not in hlo["xla"]
  # Row reductions over [B,N,F,T]: the softmax's max and sum forward, sum(dp * p) backward;
  # with the recomputation the backward's own max and sum too (the barrier keeps XLA from
  # merging them with the forward's).
  count = lambda hlo: len(re.findall(r"reduce\(f32\[2,4,16,16\]", hlo))  # noqa: E731
  assert count(hlo["xla"]) == 3
  assert count(hlo["xla_recompute"]) == 5
