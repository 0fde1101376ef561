"""layers.softmax_to: the attention's softmax in float32 returned in the compute dtype, and its
hand-written gradient for 16-bit probabilities, against the formulas in NumPy float64
(softmax p = exp(x - max) / sum; dL/dx = p * (dL/dp - sum(dL/dp * p)))."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import layers

# Logits of the size attention scores reach, where bfloat16 keeps only 2-3 decimal digits.
SHAPE = (2, 3, 5, 7)


def _inputs():
  rng = np.random.RandomState(0)
  logits = (rng.normal(size=SHAPE) * 4.0 + 12.0).astype(np.float32)
  upstream = rng.normal(size=SHAPE).astype(np.float32)
  return logits, upstream


def _softmax64(x):
  x = np.asarray(x, np.float64)
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16, tf.float16])
def test_softmax_in_float32_rounded_once_and_its_gradient(dtype):
  logits, upstream = _inputs()
  x = tf.constant(logits)
  with tf.GradientTape() as tape:
    tape.watch(x)
    probs = layers.softmax_to(x, dtype)
    loss = tf.reduce_sum(tf.cast(probs, tf.float32) * upstream)
  grad = tape.gradient(loss, x)
  assert probs.dtype == dtype and grad.dtype == tf.float32
  p = _softmax64(logits)
  # The float32 softmax rounded once to dtype: within its unit roundoff (bfloat16 2^-8,
  # float16 2^-11 relative, float16's subnormals below 2^-14 half their spacing 2^-24); the
  # softmax of logits rounded to 16 bits first is off by several percent here.
  half_ulp = {tf.float32: 0.0, tf.bfloat16: 2.0 ** -8, tf.float16: 2.0 ** -11}[dtype]
  np.testing.assert_allclose(probs.numpy().astype(np.float64), p, rtol=half_ulp + 1e-6,
                             atol=2.0 ** -25 if dtype == tf.float16 else 0.0)
  want = p * (upstream - (upstream * p).sum(-1, keepdims=True))
  # The gradient is computed from the rounded probabilities: their rounding, times |upstream|.
  np.testing.assert_allclose(grad.numpy(), want, rtol=0,
                             atol=8 * half_ulp * np.abs(upstream).max() + 1e-7)
