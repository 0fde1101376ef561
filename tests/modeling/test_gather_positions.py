"""heads.gather_positions: under XLA on a GPU with 16-bit values the masked LM's gather is a
one-hot batched matmul (its gradient a product too, not a scatter-add: the scatter is what
made TensorFlow 2.21's XLA lay the GPU's hidden stream out transposed). The values and
gradients must be the gather's, exactly; elsewhere it stays a gather."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertPretrainer, heads, layers, placement
from tests.reference import google_models

B, S, H, P = 3, 12, 16, 4
# Distinct positions per row; the last row pads with position 0, as the original's records do
# (label weight 0: no gradient comes back through them).
POSITIONS = np.array([[1, 5, 11, 3], [7, 2, 9, 10], [4, 6, 0, 0]], np.int32)
WEIGHTS = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]], np.float32)


def _fake_gpu(monkeypatch, visible=True):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),) if visible else ())


def _gathered(dtype, gather, input_dtype=None):
  """(values, gradient of sum(w * values * r) with respect to the [B,S,H] input, lowered HLO)
  of ``gather(x, positions, dtype)`` under jit_compile, x in ``input_dtype`` (default
  ``dtype``)."""
  rng = np.random.RandomState(0)
  x = tf.constant(rng.normal(size=[B, S, H]), input_dtype or dtype)
  r = tf.constant(rng.normal(size=[B, P, H]), tf.float32)

  @tf.function(jit_compile=True)
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      out = gather(x, tf.constant(POSITIONS), dtype)
      loss = tf.reduce_sum(tf.cast(out, tf.float32) * r * WEIGHTS[:, :, None])
    return out, tape.gradient(loss, x)

  out, grad = step(x)
  return out.numpy(), grad.numpy(), step.experimental_get_compiler_ir(x)(stage="hlo")


def _plain_gather(x, positions, compute_dtype=None):
  """The gather, then the cast its caller would make."""
  out = tf.gather(x, positions, batch_dims=1)
  return tf.cast(out, compute_dtype) if compute_dtype is not None else out


@pytest.mark.parametrize("dtype,input_dtype", [(tf.bfloat16, None), (tf.float16, None),
                                               (tf.bfloat16, tf.float32)])
def test_the_one_hot_product_gives_the_gathers_values_and_gradients(monkeypatch, dtype,
                                                                    input_dtype):
  """16-bit rows, or float32 rows a 16-bit user casts (the mixed-precision encoder's output
  is float32): the gather and its gradient, exactly."""
  _fake_gpu(monkeypatch)
  out, grad, hlo = _gathered(dtype, heads.gather_positions, input_dtype)
  want_out, want_grad, want_hlo = _gathered(dtype, _plain_gather, input_dtype)
  assert " dot(" in hlo and " scatter(" not in hlo and " gather(" not in hlo
  assert " scatter(" in want_hlo and " gather(" in want_hlo
  np.testing.assert_array_equal(out.astype(np.float32), want_out.astype(np.float32))
  np.testing.assert_array_equal(grad.astype(np.float32), want_grad.astype(np.float32))
  # The gathered rows are the input's rows at the positions (not a trivially equal pair).
  x = np.random.RandomState(0).normal(size=[B, S, H]).astype(
      (input_dtype or dtype).as_numpy_dtype).astype(dtype.as_numpy_dtype)
  np.testing.assert_array_equal(out, np.take_along_axis(x, POSITIONS[:, :, None], axis=1))


@pytest.mark.parametrize("dtype,visible", [(tf.float32, True), (tf.bfloat16, False)])
def test_float32_and_no_gpu_keep_the_gather(monkeypatch, dtype, visible):
  _fake_gpu(monkeypatch, visible)
  _, _, hlo = _gathered(dtype, heads.gather_positions)
  assert " gather(" in hlo and " dot(" not in hlo


def _pretraining_update(monkeypatch, one_hot):
  """Loss, gradients and HLO of a tiny mixed-bfloat16 BertPretrainer's jit-compiled
  update (masked LM and next sentence losses), with the GPU path of gather_positions on or
  off."""
  if not one_hot:
    monkeypatch.setattr(heads, "gather_positions", _plain_gather)
  config = BertConfig.from_dict(google_models.tiny_config_dict())
  keras.utils.set_random_seed(0)
  model = BertPretrainer(config, dtype="mixed_bfloat16")
  layers.set_dropout_rng(model, "hash")
  rng = np.random.RandomState(2)
  features = {
      "input_ids": tf.constant(rng.randint(1, config.vocab_size, [B, S]), tf.int32),
      "input_mask": tf.constant([[1] * S, [1] * 9 + [0] * 3, [1] * 7 + [0] * 5], tf.int32),
      "segment_ids": tf.constant([[0] * 6 + [1] * 6] * B, tf.int32),
      "masked_lm_positions": tf.constant(POSITIONS),
  }
  labels = tf.constant(rng.randint(1, config.vocab_size, [B, P]), tf.int32)

  @tf.function(jit_compile=True)
  def step(features):
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      per_position = tf.keras.losses.sparse_categorical_crossentropy(
          labels, outputs["masked_lm_logits"], from_logits=True)
      loss = (tf.reduce_sum(per_position * WEIGHTS) / tf.reduce_sum(WEIGHTS)
              + tf.reduce_mean(outputs["next_sentence_logits"][:, 0]))
    return loss, [tf.convert_to_tensor(g)
                  for g in tape.gradient(loss, model.trainable_variables)]

  loss, grads = step(features)
  return ([loss.numpy()] + [g.numpy() for g in grads],
          step.experimental_get_compiler_ir(features)(stage="hlo"))


def test_a_pretraining_update_is_the_same_with_the_one_hot_product(monkeypatch):
  _fake_gpu(monkeypatch)
  values, hlo = _pretraining_update(monkeypatch, one_hot=True)
  want, want_hlo = _pretraining_update(monkeypatch, one_hot=False)
  # The word embeddings' own gather (and its gradient) stay; the masked LM's are products.
  scatters = lambda text: len(re.findall(r" scatter\(", text))  # noqa: E731
  assert scatters(hlo) == scatters(want_hlo) - 1
  assert len(values) == len(want)
  for got, expected in zip(values, want):
    np.testing.assert_array_equal(got, expected)
