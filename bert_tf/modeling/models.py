"""Task models: encoder + head (+ loss), as the original's ``run_*.py`` build them.

  ``BertPretrainer``    masked LM + next sentence (``run_pretraining.py``)
  ``BertClassifier``    dropout(0.1) on the pooled output -> dense(C) (``run_classifier.py``);
                        ``num_labels=1`` is a regression head (STS-B)
  ``BertSpanLabeler``   dense(2) on every token -> start/end logits (``run_squad.py``)
  ``BertTokenClassifier`` dropout(0.1) on every token -> dense(C) (``run_ner.py``; the
                        original had no token classification: Hugging Face's
                        ``BertForTokenClassification`` head, under the classifier's names)

Each is a plain ``keras.Model``: it works in bert_tf's custom training loop and with Keras
``compile``/``fit``/``evaluate``/``predict``. Shape legend as in ``heads.py``.
"""

import contextlib
import warnings

import keras
import tensorflow as tf

from bert_tf.modeling import heads
from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling.bert import BertModel

_PACKAGE = "bert_tf"

# Keras's optimizer warning about the pooler of a head that does not use it (the span and
# token heads, as the original's run_squad.py: the pooler stays in the model, untrained, so
# that its checkpoints keep Google's variables). It reads as if the user had forgotten a loss.
UNUSED_POOLER_WARNING = (r"Gradients do not exist for variables "
                         r"\['bert/pooler/dense/kernel', 'bert/pooler/dense/bias'\] when")


@contextlib.contextmanager
def unused_pooler_quiet():
  """Keras's ``UNUSED_POOLER_WARNING`` not shown inside (``warnings.catch_warnings``: enter it
  in the thread that trains, around the whole call: the warning comes while the train step is
  traced, under MirroredStrategy in each replica's thread, where catch_warnings, which is not
  thread-safe, could leave the filter on for the process)."""
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", UNUSED_POOLER_WARNING)
    yield


class _UnusedPoolerModel(keras.Model):
  """``fit`` without Keras's warning that the pooler has no gradient (it is not used)."""

  def fit(self, *args, **kwargs):
    with unused_pooler_quiet():
      return super().fit(*args, **kwargs)

  def train_on_batch(self, *args, **kwargs):
    with unused_pooler_quiet():
      return super().train_on_batch(*args, **kwargs)


class _TaskModel(keras.Model):

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = bert_layers.as_config(config)
    self.bert = BertModel(self.config, dtype=self.dtype_policy)

  def get_config(self):
    base = super().get_config()
    base["config"] = self.config.to_dict()
    return base

  @classmethod
  def from_config(cls, config):
    return cls(**config)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertPretrainer(_TaskModel):
  """BERT with both pretraining heads.

  Call with the pretraining features (``input_ids``/``input_word_ids``, ``input_mask``,
  ``segment_ids``/``input_type_ids``, ``masked_lm_positions`` [B,P]) -> dict with
  ``masked_lm_logits`` [B,P,V], ``next_sentence_logits`` [B,2] (float32), plus the encoder's
  ``sequence_output`` and ``pooled_output``.
  """

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "bert_pretrainer")
    super().__init__(config, **kwargs)
    with bert_layers.scoped("cls"):
      self.masked_lm = heads.MaskedLMHead(self.config, name="predictions",
                                          dtype=self.dtype_policy)
      self.next_sentence = heads.LinearHead(self.config, 2, name="seq_relationship",
                                            dtype=self.dtype_policy)
    self.built = True

  def call(self, inputs, training=None):
    encoder = self.bert(inputs, training=training)
    masked_lm_logits = self.masked_lm(encoder["sequence_output"], inputs["masked_lm_positions"],
                                      self.bert.word_embeddings)
    return {
        "masked_lm_logits": masked_lm_logits,
        "next_sentence_logits": self.next_sentence(encoder["pooled_output"]),
        "sequence_output": encoder["sequence_output"],
        "pooled_output": encoder["pooled_output"],
    }


# The original's run_classifier and run_squad draw their heads' output_weights with this
# stddev whatever bert_config.json's initializer_range (every released config says 0.02).
FINE_TUNING_HEAD_STDDEV = 0.02


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertClassifier(_TaskModel):
  """Sequence (pair) classification; ``num_labels=1`` gives a regression score.

  Call with the encoder inputs -> logits ``[B, num_labels]`` float32. The head is the
  original's: dropout 0.1 on ``pooled_output``, then ``output_weights [C,H]``/``output_bias``.
  """

  def __init__(self, config, num_labels, classifier_dropout=0.1, **kwargs):
    kwargs.setdefault("name", "bert_classifier")
    super().__init__(config, **kwargs)
    self.num_labels = num_labels
    self.classifier_dropout = classifier_dropout
    # run_classifier.create_model: truncated_normal_initializer(stddev=0.02), not the config's.
    self.classifier = heads.LinearHead(self.config, num_labels, dropout_rate=classifier_dropout,
                                       initializer_stddev=FINE_TUNING_HEAD_STDDEV,
                                       name="classifier", dtype=self.dtype_policy)
    self.built = True

  def call(self, inputs, training=None):
    pooled = self.bert(inputs, training=training)["pooled_output"]
    return self.classifier(pooled, training=training)

  def get_config(self):
    base = super().get_config()
    base.update(num_labels=self.num_labels, classifier_dropout=self.classifier_dropout)
    return base


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertSpanLabeler(_UnusedPoolerModel, _TaskModel):
  """SQuAD: ``cls/squad`` dense(2) on every token, no dropout.

  Call with the encoder inputs -> dict ``start_logits`` [B,S], ``end_logits`` [B,S] float32.
  """

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "bert_span_labeler")
    super().__init__(config, **kwargs)
    with bert_layers.scoped("cls"):
      # run_squad.create_model: truncated_normal_initializer(stddev=0.02), as the classifier.
      self.span = heads.LinearHead(self.config, 2, initializer_stddev=FINE_TUNING_HEAD_STDDEV,
                                   name="squad", dtype=self.dtype_policy)
    self.built = True

  def call(self, inputs, training=None):
    sequence_output = self.bert(inputs, training=training)["sequence_output"]
    logits = self.span(sequence_output)  # [B,S,2]
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertTokenClassifier(_UnusedPoolerModel, _TaskModel):
  """A label for every token (named entities, chunks, part-of-speech tags).

  Call with the encoder inputs -> logits ``[B, S, num_labels]`` float32. The head is Hugging
  Face's ``BertForTokenClassification``: dropout (0.1) on ``sequence_output``, then one dense
  layer, stored as the classifier's ``output_weights [C,H]``/``output_bias`` (Google names)
  and ``classifier.weight``/``classifier.bias`` (Hugging Face names).
  """

  def __init__(self, config, num_labels, classifier_dropout=0.1, **kwargs):
    kwargs.setdefault("name", "bert_token_classifier")
    super().__init__(config, **kwargs)
    self.num_labels = num_labels
    self.classifier_dropout = classifier_dropout
    self.classifier = heads.LinearHead(self.config, num_labels, dropout_rate=classifier_dropout,
                                       name="classifier", dtype=self.dtype_policy)
    self.built = True

  def call(self, inputs, training=None):
    sequence_output = self.bert(inputs, training=training)["sequence_output"]  # [B,S,H]
    return self.classifier(sequence_output, training=training)                # [B,S,C]

  def get_config(self):
    base = super().get_config()
    base.update(num_labels=self.num_labels, classifier_dropout=self.classifier_dropout)
    return base


def masked_lm_loss(masked_lm_logits, masked_lm_ids, masked_lm_weights):
  """The original's weighted MLM loss: ``sum(w * nll) / (sum(w) + 1e-5)``.

  Returns ``(loss scalar, per_position_nll [B,P])``, float32.
  """
  log_probs = tf.nn.log_softmax(tf.cast(masked_lm_logits, tf.float32), axis=-1)  # [B,P,V]
  ids = tf.cast(masked_lm_ids, tf.int32)
  nll = -tf.gather(log_probs, ids, batch_dims=2)  # [B,P]
  weights = tf.cast(masked_lm_weights, tf.float32)
  loss = tf.reduce_sum(weights * nll) / (tf.reduce_sum(weights) + 1e-5)
  return loss, nll


def next_sentence_loss(next_sentence_logits, next_sentence_labels):
  """The original's NSP loss: mean negative log-likelihood over the batch (float32)."""
  log_probs = tf.nn.log_softmax(tf.cast(next_sentence_logits, tf.float32), axis=-1)  # [B,2]
  labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
  nll = -tf.gather(log_probs, labels, batch_dims=1)  # [B]
  return tf.reduce_mean(nll), nll


def pretraining_loss(outputs, features):
  """Total loss = MLM + NSP, as in ``run_pretraining.py``. Returns a dict of scalars."""
  mlm, _ = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                          features["masked_lm_weights"])
  nsp, _ = next_sentence_loss(outputs["next_sentence_logits"],
                              features["next_sentence_labels"])
  return {"loss": mlm + nsp, "masked_lm_loss": mlm, "next_sentence_loss": nsp}
