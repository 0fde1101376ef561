"""layers.layer_norm_one_pass: the encoder's LayerNorm with its mean and mean of squares taken
in one pass (variance E[x²] - E[x]²), which a GPU's XLA takes under mixed precision. Checked
against NumPy float64 formulas, against Keras' LayerNormalization (values and gradients), and
inside a small BERT update against the two-pass LayerNorm."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertModel, layers, placement
from tests.modeling.padded_update import padded_update
from tests.reference import google_models


def _norm(width):
  norm = layers.layer_norm(BertConfig.from_dict(google_models.tiny_config_dict()))
  norm.build((None, width))
  rng = np.random.RandomState(2)
  norm.gamma.assign(rng.normal(1.0, 0.3, size=[width]).astype(np.float32))
  norm.beta.assign(rng.normal(0.0, 0.3, size=[width]).astype(np.float32))
  return norm


def _inputs(width=64):
  rng = np.random.RandomState(0)
  # Rows whose mean is several standard deviations, as BERT's residual sums can have.
  x = rng.normal(size=[6, width]) * rng.uniform(0.2, 2.0, size=[6, 1]) + rng.normal(0, 3, [6, 1])
  return tf.constant(x, tf.float32), tf.constant(rng.normal(size=[6, width]), tf.float32)


def _value_and_grads(fn, norm, x, dy):
  @tf.function(jit_compile=True)
  def run(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = fn(x)
      loss = tf.reduce_sum(y * dy)
    return (y, *tape.gradient(loss, [x, norm.gamma, norm.beta]))

  return [t.numpy().astype(np.float64) for t in run(x)]


def test_the_layer_norm_of_the_formula_and_of_keras():
  x, dy = _inputs()
  norm = _norm(x.shape[-1])
  got = _value_and_grads(lambda t: layers.layer_norm_one_pass(norm, t), norm, x, dy)
  want = _value_and_grads(norm, norm, x, dy)
  # The definition in float64: (x - mean) / sqrt(var + eps) * gamma + beta.
  x64 = x.numpy().astype(np.float64)
  mean = x64.mean(-1, keepdims=True)
  x_hat = (x64 - mean) / np.sqrt(x64.var(-1, keepdims=True) + norm.epsilon)
  gamma = norm.gamma.numpy().astype(np.float64)
  np.testing.assert_allclose(got[0], x_hat * gamma + norm.beta.numpy(), rtol=1e-5, atol=1e-5)
  dy64 = dy.numpy().astype(np.float64)
  np.testing.assert_allclose(got[2], (dy64 * x_hat).sum(0), rtol=1e-4, atol=1e-4)  # d gamma
  np.testing.assert_allclose(got[3], dy64.sum(0), rtol=1e-5, atol=1e-5)  # d beta
  for g, w in zip(got, want):  # and Keras' two-pass LayerNorm, values and d x too
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def _update(monkeypatch, one_pass):
  monkeypatch.setattr(layers, "LAYER_NORM_ONE_PASS", one_pass)
  keras.utils.set_random_seed(0)
  model = BertModel(BertConfig.from_dict(google_models.tiny_config_dict()),
                    dtype="mixed_bfloat16")
  layers.set_dropout_rng(model, "hash")
  values, step, inputs = padded_update(model, jit=True)
  return values, step.experimental_get_compiler_ir(*inputs)(stage="hlo")


def test_a_bert_update_with_it_under_mixed_precision(monkeypatch):
  # Where it applies: a GPU visible (nothing here needs one to run).
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))
  (got, hlo), (want, two_pass_hlo) = _update(monkeypatch, True), _update(monkeypatch, False)
  assert len(got) == len(want) > 30
  np.testing.assert_allclose(got[0], want[0], rtol=2 ** -7)
  scale = max(np.abs(w).max() for w in want[1:])
  for g, w in zip(got[1:], want[1:]):
    np.testing.assert_allclose(g, w, rtol=2 ** -6, atol=2 ** -7 * scale)
  # Keras' variance reduction is gone from the 4 encoder LayerNorms (the embeddings' stays).
  count = lambda text: text.count("moments/variance")  # noqa: E731
  assert count(two_pass_hlo) > count(hlo) > 0
  assert "layer_0" not in "".join(l for l in hlo.splitlines() if "moments/variance" in l)


@pytest.mark.parametrize("dtype, gpu", [("float32", True), ("mixed_bfloat16", False)])
def test_float32_or_no_gpu_keep_the_two_pass_layer_norm(monkeypatch, dtype, gpu):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),) if gpu else ())
  keras.utils.set_random_seed(0)
  model = BertModel(BertConfig.from_dict(google_models.tiny_config_dict()), dtype=dtype)
  _, step, inputs = padded_update(model, jit=True)
  hlo = step.experimental_get_compiler_ir(*inputs)(stage="hlo")
  assert "layer_0" in "".join(l for l in hlo.splitlines() if "moments/variance" in l)
