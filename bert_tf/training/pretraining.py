"""The pretraining task: masked LM + next sentence, losses and eval metrics as the original.

Shape legend: B = batch, P = masked positions per sequence, V = vocab.

  masked_lm_loss      = sum(w * nll) / (sum(w) + 1e-5), w = masked_lm_weights
  next_sentence_loss  = mean nll over the batch
  loss                = masked_lm_loss + next_sentence_loss
Eval (run_pretraining.py's metric_fn): masked_lm_accuracy (weighted by w), masked_lm_loss
(w-weighted mean), next_sentence_accuracy, next_sentence_loss (means), plus ``loss``, the
mean over eval batches of the batch's total loss.
"""

import tensorflow as tf

from bert_tf.modeling import BertPretrainer

MASKED_LM_EPSILON = 1e-5


def _masked_lm_nll(outputs, features):
  log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"], axis=-1)  # [B,P,V] float32
  ids = tf.cast(features["masked_lm_ids"], tf.int32)
  nll = -tf.gather(log_probs, ids, batch_dims=2)  # [B,P]
  return log_probs, nll


def _next_sentence_nll(outputs, features):
  log_probs = tf.nn.log_softmax(outputs["next_sentence_logits"], axis=-1)  # [B,2]
  labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])  # [B]
  return log_probs, labels, -tf.gather(log_probs, labels, batch_dims=1)


class PretrainingTask:
  """Masked LM (+ next sentence unless ``use_next_sentence=False``)."""

  denominator_offsets = {"masked_lm": MASKED_LM_EPSILON}

  def __init__(self, config, use_next_sentence=True):
    self.config = config
    self.use_next_sentence = use_next_sentence

  def build_model(self, dtype=None):
    return BertPretrainer(self.config, dtype=dtype)

  def loss_denominators(self, features):
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    denominators = {"masked_lm": tf.reduce_sum(weights)}
    if self.use_next_sentence:
      batch = tf.shape(features["masked_lm_weights"])[0]
      denominators["next_sentence"] = tf.cast(batch, tf.float32)
    return denominators

  def loss_numerators(self, outputs, features):
    _, nll = _masked_lm_nll(outputs, features)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    numerators = {"masked_lm": tf.reduce_sum(weights * nll)}
    if self.use_next_sentence:
      _, _, nsp_nll = _next_sentence_nll(outputs, features)
      numerators["next_sentence"] = tf.reduce_sum(nsp_nll)
    return numerators

  def eval_metrics(self, outputs, features):
    """{name: (sum, weight)} of one batch on one replica (see ``training.loop.evaluate``)."""
    log_probs, nll = _masked_lm_nll(outputs, features)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    ids = tf.cast(features["masked_lm_ids"], tf.int32)
    correct = tf.cast(tf.equal(tf.argmax(log_probs, axis=-1, output_type=tf.int32), ids),
                      tf.float32)
    weight_sum = tf.reduce_sum(weights)
    mlm_loss = tf.reduce_sum(weights * nll) / (weight_sum + MASKED_LM_EPSILON)
    metrics = {
        "masked_lm_accuracy": (tf.reduce_sum(weights * correct), weight_sum),
        "masked_lm_loss": (tf.reduce_sum(weights * nll), weight_sum),
    }
    batch_loss = mlm_loss
    if self.use_next_sentence:
      nsp_log_probs, labels, nsp_nll = _next_sentence_nll(outputs, features)
      count = tf.cast(tf.shape(labels)[0], tf.float32)
      nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_log_probs, axis=-1, output_type=tf.int32),
                                     labels), tf.float32)
      metrics["next_sentence_accuracy"] = (tf.reduce_sum(nsp_correct), count)
      metrics["next_sentence_loss"] = (tf.reduce_sum(nsp_nll), count)
      batch_loss += tf.reduce_mean(nsp_nll)
    # The estimator's "loss": the mean over batches of each batch's total loss.
    replicas = float(tf.distribute.get_replica_context().num_replicas_in_sync)
    metrics["loss"] = (batch_loss / replicas, tf.constant(1.0 / replicas))
    return metrics
