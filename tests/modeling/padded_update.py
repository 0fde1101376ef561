"""One training-mode update of a small BERT on a padded batch, shared by the tests that compare
two ways of computing the same gradients (test_attention_recomputed, test_recomputed_activation)."""

import numpy as np
import tensorflow as tf


def padded_update(model, jit):
  """Loss and gradients of ``model`` (a 2-layer tiny BertModel, hidden 32) on a padded batch
  of 3 x 12 ids; every output reaches the loss through fixed random weights.

  Returns (``[loss, *gradients]`` as NumPy arrays, the tf.function step, its (ids, mask))."""
  rng = np.random.RandomState(1)
  ids = tf.constant(rng.randint(1, 99, [3, 12]), tf.int32)
  mask = tf.constant([[1] * 12, [1] * 9 + [0] * 3, [1] * 4 + [0] * 8], tf.int32)
  w_seq = tf.constant(rng.normal(size=[3, 12, 32]), tf.float32)
  w_pooled = tf.constant(rng.normal(size=[3, 32]), tf.float32)

  @tf.function(jit_compile=jit)
  def step(ids, mask):
    with tf.GradientTape() as tape:
      out = model({"input_word_ids": ids, "input_mask": mask}, training=True)
      loss = (tf.reduce_sum(out["sequence_output"] * w_seq)
              + tf.reduce_sum(out["pooled_output"] * w_pooled))
    return loss, tape.gradient(loss, model.trainable_variables)

  loss, grads = step(ids, mask)
  return [loss.numpy()] + [tf.convert_to_tensor(g).numpy() for g in grads], step, (ids, mask)
