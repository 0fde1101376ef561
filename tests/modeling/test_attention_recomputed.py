"""layers.attention_recomputed: the attention with its dropout, recomputed in the backward
pass instead of keeping its [B,N,F,T] tensors (``attention_implementation="xla_recompute"``).
Checked against the plain composition (the q·kᵀ product, softmax_to, hash_dropout, the
context product, each with TensorFlow's own gradients), against the forward and gradients
written out in NumPy float64, inside a small BERT update against ``"xla"`` with dropout on and
the same seeds, and in the update's HLO (the recomputation waits for the backward pass)."""

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
B, N, F, T, D = 2, 3, 5, 7, 8
SCALE = 1.0 / math.sqrt(D)
SEED = tf.constant([17, 5], tf.int32)


def _inputs(dtype):
  rng = np.random.RandomState(0)
  q, k, v = (tf.cast(tf.constant(rng.normal(size=shape), tf.float32), dtype)
             for shape in ([B, N, F, D], [B, N, T, D], [B, N, T, D]))
  mask = np.ones([B, T], np.float32)
  mask[1, 4:] = 0  # padding on the "to" side
  adder = tf.constant((1.0 - mask)[:, None, None, :] * -10000.0, tf.float32)
  d_context = tf.constant(rng.normal(size=[B, F, N, D]), tf.float32)
  return q, k, v, adder, d_context


def _recomputed(q, k, v, adder):
  return layers.attention_recomputed(q, k, v, adder, SCALE, RATE, SEED)


def _composition(q, k, v, adder):  # BertSelfAttention's plain path
  scores = tf.cast(tf.einsum("BNFD,BNTD->BNFT", q, k), tf.float32) * SCALE + adder
  probs = layers.softmax_to(scores, v.dtype)
  return tf.einsum("BNFT,BNTD->BFND", layers.hash_dropout(probs, RATE, SEED), v)


def _value_and_grad(fn, dtype, jit=False):
  q, k, v, adder, d_context = _inputs(dtype)

  def run(q, k, v, adder):
    with tf.GradientTape() as tape:
      tape.watch([q, k, v])
      context = fn(q, k, v, adder)
      loss = tf.reduce_sum(tf.cast(context, tf.float32) * d_context)
    return (context, *tape.gradient(loss, [q, k, v]))

  if jit:
    run = tf.function(run, jit_compile=True)
  return [t.numpy().astype(np.float64) for t in run(q, k, v, adder)]


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_same_numbers_as_the_composition_outside_xla(dtype):
  # Outside XLA nothing is recomputed: the same ops in the same order, bit for bit.
  for got, want in zip(_value_and_grad(_recomputed, dtype),
                       _value_and_grad(_composition, dtype)):
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_under_xla_the_same_forward_and_gradients_to_rounding(dtype):
  got = _value_and_grad(_recomputed, dtype, jit=True)
  want = _value_and_grad(_composition, dtype, jit=True)
  np.testing.assert_array_equal(got[0], want[0])  # the forward: the same ops
  tolerance = 1e-6 if dtype == tf.float32 else 1e-2
  for g, w in zip(got[1:], want[1:]):
    np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance * np.abs(w).max())


def test_forward_and_gradients_are_the_written_out_formulas():
  """context = (p * keep / (1 - rate)) v with p = softmax(q kᵀ scale + adder); the gradients of
  sum(context * d_context) by q, k and v, in float64 from the same inputs, under XLA (where the
  recomputation runs); the mask from hash_keep (tested against MurmurHash3 in test_dropout.py)."""
  q, k, v, adder, d_context = [t.numpy().astype(np.float64) for t in _inputs(tf.float32)]
  logits = np.einsum("bnfd,bntd->bnft", q, k) * SCALE + adder
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  keep = layers.hash_keep([B, N, F, T], RATE, SEED).numpy()
  dropped = p * keep / (1.0 - RATE)
  d_c = d_context.transpose(0, 2, 1, 3)  # [B,N,F,D]
  dp = np.einsum("bnfd,bntd->bnft", d_c, v) * keep / (1.0 - RATE)
  d_scores = SCALE * p * (dp - (dp * p).sum(-1, keepdims=True))
  want = [np.einsum("bnft,bntd->bfnd", dropped, v),
          np.einsum("bnft,bntd->bnfd", d_scores, k),
          np.einsum("bnft,bnfd->bntd", d_scores, q),
          np.einsum("bnft,bnfd->bntd", dropped, d_c)]
  got = _value_and_grad(_recomputed, tf.float32, jit=True)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6 * np.abs(w).max())
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
  rounding, the same dropout masks drawn. (Outside XLA both are the same ops.)"""
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


def test_the_backward_pass_recomputes_after_the_gradient_arrives():
  """The update's HLO (one layer, 2 x 16 tokens, 4 heads of 8): the backward pass computes the
  scores again (a third [B,N,F,T] product besides the forward's and d_probs') and the softmax's
  max and sum again, behind an optimization barrier that holds q, k, v, the adder, the seed and
  the context's gradient, so that XLA cannot run the recomputation before the backward pass
  reaches the layer (and keep its [B,N,F,T] results alive over the rest of the forward pass)."""
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
  scores = lambda hlo: len(re.findall(r"= bf16\[2,4,16,16\]\{[0-9,]*\} dot\(", hlo))  # noqa: E731
  row_reductions = lambda hlo: len(re.findall(r"reduce\(f32\[2,4,16,16\]", hlo))  # noqa: E731
  assert (scores(hlo["xla"]), scores(hlo["xla_recompute"])) == (2, 3)
  assert (row_reductions(hlo["xla"]), row_reductions(hlo["xla_recompute"])) == (3, 5)
  assert "opt-barrier" not in hlo["xla"]
  barriers = re.findall(r"= \(([^=]*)\) opt-barrier\(",
                        re.sub(r"/\*[^*]*\*/", "", hlo["xla_recompute"]))  # "/*index=5*/"
  q_k_v, adder, seed, d_context = "bf16[2,4,16,8]", "f32[2,1,1,16]", "s32[2]", "bf16[2,16,4,8]"
  assert any(re.sub(r"\{[0-9,]*\}", "", b).split(", ") == [q_k_v] * 3 + [adder, seed, d_context]
             for b in barriers), barriers
