"""Task heads of the original: masked LM, next sentence, classifier, span (SQuAD).

Shape legend: B = batch, S = sequence length, H = hidden, V = vocab, P = masked positions
per sequence, C = classes. Every head returns float32 logits.
"""

import keras
import tensorflow as tf

from bert_tf.modeling import layers as bert_layers
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.placement import gpu_visible, in_xla_computation

_PACKAGE = "bert_tf"


def gather_positions(sequence_output, positions, compute_dtype=None):
  """``[B,S,H]`` gathered at ``[B,P]`` positions -> ``[B,P,H]`` (the original's gather_indexes).

  ``compute_dtype``: the dtype the caller computes with the gathered rows in, when it casts
  them to it first thing (the masked LM head's dense layer does); the rows may then come back
  in it. Where it (or the rows' own dtype) is 16-bit, under XLA on a GPU, the rows are cast to
  it and gathered as a batched matmul by the positions' one-hot ``[B,P,S]`` matrix: the same
  values (each output is one product by 1.0, summed with exact zeros in float32), and a
  gradient that is the transposed product instead of a scatter-add into a zeroed float32
  ``[B*S,H]``. That scatter is what led XLA's GPU layout assignment (TensorFlow 2.21's XLA)
  to lay the encoder's whole hidden stream out transposed, with a transpose kernel around
  every residual add and dropout, forward and backward (BENCHMARKS.md, "The masked LM's
  gather as a one-hot product"). A position outside ``[0, S)`` gives zeros, as the GPU's
  gather does. Float32 keeps the gather (a GPU's matmul may round float32 operands to TF32).
  """
  positions = tf.cast(positions, tf.int32)
  dtype = tf.as_dtype(compute_dtype or sequence_output.dtype)
  if dtype in (tf.bfloat16, tf.float16) and gpu_visible() and in_xla_computation():
    rows = tf.cast(sequence_output, dtype)
    length = rows.shape[1]
    if length is None:
      length = tf.shape(rows)[1]
    one_hot = tf.one_hot(positions, length, dtype=dtype)  # [B,P,S]
    return tf.matmul(one_hot, rows)
  return tf.gather(sequence_output, positions, batch_dims=1)


def _matmul_transposed(x, weights):
  """``x [..., H]`` times ``weights [K,H]`` transposed -> ``[..., K]``, as one 2-D matmul.

  A rank-3 ``x`` in ``tf.matmul`` becomes a broadcast batch matmul whose gradient for the
  shared ``weights`` is a ``[B,K,H]`` tensor summed over B afterwards (for the MLM output
  layer, B copies of the ``[V,H]`` table); flattening the leading axes gives the same
  products with one ``[K,H]`` gradient.
  """
  hidden = tf.shape(x)[-1]
  flat = tf.matmul(tf.reshape(x, [-1, hidden]), weights, transpose_b=True)  # [B*P,K]
  out_shape = tf.concat([tf.shape(x)[:-1], tf.shape(weights)[:1]], axis=0)
  return tf.reshape(flat, out_shape)


def vocab_logits(x, embedding_table, vocab_major=True):
  """``x [M,H]`` times the ``[V,H]`` table transposed -> ``[M,V]``: the MLM output layer.

  ``vocab_major=False``: the plain ``x table^T`` product. Under XLA the ``vocab_major`` form
  costs layout copies of the ``[M,V]`` logits and of their gradient (four transposes of
  ``[B*P,V]`` per step, the largest of the HLO census); ``set_vocab_logits_layout`` picks the
  plain form for ``jit_compile``.

  The forward product is computed as ``(table x^T)^T``: with the vocabulary as the rows of
  the left operand, CPU matmul kernels run several times faster for the few hundred rows of
  a batch's masked positions (BERT-Base, one core: 20 rows 226 -> 23 ms, 160 rows
  291 -> 103 ms). The same products; their sums may round differently in the last bit. The
  gradients are the plain ``x table^T`` ones, which are fast as they are.
  """
  x = tf.convert_to_tensor(x)
  embedding_table = tf.convert_to_tensor(embedding_table)
  if not vocab_major:
    return tf.matmul(x, embedding_table, transpose_b=True)  # [M,V]

  @tf.custom_gradient
  def logits_fn(x, table):
    logits = tf.transpose(tf.matmul(table, x, transpose_b=True))  # [V,M] -> [M,V]

    def grad(d_logits):  # [M,V]
      return (tf.matmul(d_logits, table),  # [M,H]
              tf.matmul(d_logits, x, transpose_a=True))  # [V,H]

    return logits, grad

  return logits_fn(x, embedding_table)


def set_vocab_logits_layout(model, vocab_major):
  """Sets how every ``MaskedLMHead`` in ``model`` computes its logits (``vocab_logits``'s
  ``vocab_major``); call it before the model's training function is traced. The numbers are
  the same products either way."""
  for layer in model._flatten_layers(include_self=True, recursive=True):  # pylint: disable=protected-access
    if isinstance(layer, MaskedLMHead):
      layer.vocab_major_logits = bool(vocab_major)


class _HeadLayer(bert_layers._ConfigLayer):  # pylint: disable=protected-access

  def _output_weights(self, rows, name="output_weights", stddev=None):
    # Stored [rows, H] as in Google's checkpoints and used transposed.
    return self.add_weight(name=name, shape=(rows, self.config.hidden_size),
                           initializer=bert_layers.truncated_normal(self.config, stddev))

  def _output_bias(self, size, name="output_bias"):
    return self.add_weight(name=name, shape=(size,), initializer="zeros")


@keras.saving.register_keras_serializable(package=_PACKAGE)
class MaskedLMHead(_HeadLayer):
  """``cls/predictions``: dense(H, act) -> LayerNorm -> logits = x E^T + output_bias.

  The output weights are the encoder's word embeddings ``E`` [V,H], passed in at call time
  (tied, never copied). Call: ``(sequence_output [B,S,H], masked_lm_positions [B,P],
  embedding_table [V,H])`` -> logits ``[B,P,V]`` float32.
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    c = self.config
    with bert_layers.scoped(self.name, "transform"):
      self.transform_dense = bert_layers.Dense(
          c.hidden_size, activation=get_activation(c.hidden_act), name="dense",
          kernel_initializer=bert_layers.truncated_normal(c), dtype=self.dtype_policy)
      self.transform_dense.build((None, None, c.hidden_size))
      self.transform_layer_norm = bert_layers.layer_norm(c)
      self.transform_layer_norm.build((None, None, c.hidden_size))
    self.output_bias = self._output_bias(c.vocab_size)
    # The CPU-fast vocab-major product (see vocab_logits); set_vocab_logits_layout changes it.
    self.vocab_major_logits = True
    self.built = True

  def call(self, sequence_output, masked_lm_positions, embedding_table):
    x = gather_positions(sequence_output, masked_lm_positions,
                         self.compute_dtype)  # [B,P,H], cast by transform_dense anyway
    x = self.transform_layer_norm(self.transform_dense(x))  # [B,P,H] float32
    dtype = self.compute_dtype
    batch, num_masked = tf.shape(x)[0], tf.shape(x)[1]
    logits = vocab_logits(tf.reshape(tf.cast(x, dtype), [-1, self.config.hidden_size]),
                          tf.cast(embedding_table, dtype),
                          vocab_major=self.vocab_major_logits)  # [B*P,V]
    logits = tf.reshape(logits, [batch, num_masked, self.config.vocab_size])  # [B,P,V]
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class LinearHead(_HeadLayer):
  """``logits = x W^T + b`` with ``W`` stored ``[num_outputs, H]`` as Google stores it.

  Used for next sentence (``cls/seq_relationship``, 2 outputs on the pooled output), the
  classifier (``output_weights``/``output_bias``, C outputs) and SQuAD (``cls/squad``,
  2 outputs on every token). Call: ``x [..., H]`` -> ``[..., num_outputs]`` float32.
  ``initializer_stddev``: the output weights' truncated normal (default the config's
  ``initializer_range``; the original's fine-tuning heads use 0.02 whatever the config says).
  """

  def __init__(self, config, num_outputs, dropout_rate=0.0, initializer_stddev=None, **kwargs):
    super().__init__(config, **kwargs)
    self.num_outputs = num_outputs
    self.dropout_rate = dropout_rate
    self.initializer_stddev = initializer_stddev
    self.output_weights = self._output_weights(num_outputs, stddev=initializer_stddev)
    self.output_bias = self._output_bias(num_outputs)
    self.dropout = bert_layers.Dropout(dropout_rate) if dropout_rate else None
    self.built = True

  def call(self, x, training=None):
    if self.dropout is not None:
      x = self.dropout(x, training=training)
    dtype = self.compute_dtype
    logits = _matmul_transposed(tf.cast(x, dtype), tf.cast(self.output_weights, dtype))
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    base = super().get_config()
    base.update(num_outputs=self.num_outputs, dropout_rate=self.dropout_rate,
                initializer_stddev=self.initializer_stddev)
    return base
