"""The masked LM's negative log-likelihood (pretraining._masked_lm_nll): under XLA the
original's one-hot form (log-probabilities times the labels' one-hot rows, summed), whose
gradient XLA fuses, elsewhere a gather; the same numbers either way, checked against NumPy
float64 and against the gather compiled the same way (whose gradient is a scatter)."""

import numpy as np
import tensorflow as tf

from bert_tf.training import pretraining

B, P, V = 3, 5, 41


def _inputs():
  rng = np.random.RandomState(0)
  logits = tf.constant(rng.normal(size=[B, P, V]) * 3, tf.float32)
  ids = tf.constant(rng.randint(0, V, size=[B, P]), tf.int32)
  weights = tf.constant(rng.randint(0, 2, size=[B, P]), tf.float32)
  return logits, ids, weights


def _nll_and_grad(nll_fn, logits, ids, weights):
  with tf.GradientTape() as tape:
    tape.watch(logits)
    nll = nll_fn(logits, ids)
    loss = tf.reduce_sum(weights * nll)
  return nll, tape.gradient(loss, logits)


def _task_nll(logits, ids):
  return pretraining._masked_lm_nll({"masked_lm_logits": logits},  # pylint: disable=protected-access
                                    {"masked_lm_ids": ids})[1]


def _gather_nll(logits, ids):
  return -tf.gather(tf.nn.log_softmax(logits, axis=-1), ids, batch_dims=2)


def test_the_nll_is_minus_the_log_probability_of_the_label():
  logits, ids, weights = _inputs()
  x = logits.numpy().astype(np.float64)
  log_probs = x - x.max(-1, keepdims=True)
  log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
  want = -np.take_along_axis(log_probs, ids.numpy()[..., None], axis=-1)[..., 0]
  # d/dlogits of sum(w * nll) = w * (softmax - one_hot(label)).
  want_grad = weights.numpy()[..., None] * (np.exp(log_probs) - np.eye(V)[ids.numpy()])
  for jit in (False, True):
    nll, grad = tf.function(lambda *a: _nll_and_grad(_task_nll, *a), jit_compile=jit)(
        logits, ids, weights)
    np.testing.assert_allclose(nll.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-5, atol=1e-6)


def test_under_xla_the_same_numbers_as_the_gather_without_its_scatter():
  logits, ids, weights = _inputs()
  one_hot = tf.function(lambda *a: _nll_and_grad(_task_nll, *a), jit_compile=True)
  gather = tf.function(lambda *a: _nll_and_grad(_gather_nll, *a), jit_compile=True)
  for got, want in zip(one_hot(logits, ids, weights), gather(logits, ids, weights)):
    np.testing.assert_array_equal(got.numpy(), want.numpy())
  hlo = one_hot.experimental_get_compiler_ir(logits, ids, weights)(stage="hlo")
  gather_hlo = gather.experimental_get_compiler_ir(logits, ids, weights)(stage="hlo")
  assert " scatter(" in gather_hlo  # the gather's gradient
  assert " scatter(" not in hlo and " gather(" not in hlo
