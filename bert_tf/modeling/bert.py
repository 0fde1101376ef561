"""``BertModel``: the encoder of Google's ``modeling.BertModel`` as a Keras 3 model.

Shape legend: B = batch, S = sequence length, H = hidden size, N = heads, L = layers.
"""

import keras
import tensorflow as tf

from bert_tf.modeling import layers as bert_layers

_PACKAGE = "bert_tf"

# Input names: TF Hub's (canonical), then Google's feature names, then Hugging Face's.
_WORD_IDS = ("input_word_ids", "input_ids")
_MASK = ("input_mask", "attention_mask")
_TYPE_IDS = ("input_type_ids", "segment_ids", "token_type_ids")


def unpack_inputs(inputs):
  """Returns ``(input_word_ids, input_mask, input_type_ids)`` from a dict, tuple or id tensor.

  Dict keys may be TF Hub's (``input_word_ids``, ``input_mask``, ``input_type_ids``), Google's
  (``input_ids``, ``input_mask``, ``segment_ids``) or Hugging Face's (``attention_mask``,
  ``token_type_ids``). A missing mask means all ones; missing type ids mean all zeros.
  """
  if isinstance(inputs, dict):
    def pick(names, required=False):
      for name in names:
        if name in inputs:
          return inputs[name]
      if required:
        raise ValueError(f"inputs need one of {names}; got keys {sorted(inputs)}")
      return None
    word_ids = pick(_WORD_IDS, required=True)
    mask, type_ids = pick(_MASK), pick(_TYPE_IDS)
  elif isinstance(inputs, (list, tuple)):
    word_ids = inputs[0]
    mask = inputs[1] if len(inputs) > 1 else None
    type_ids = inputs[2] if len(inputs) > 2 else None
  else:
    word_ids, mask, type_ids = inputs, None, None
  word_ids = tf.cast(word_ids, tf.int32)
  mask = tf.ones_like(word_ids) if mask is None else tf.cast(mask, tf.int32)
  type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.cast(type_ids, tf.int32)
  return word_ids, mask, type_ids


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertModel(keras.Model):
  """The BERT encoder: embeddings, ``num_hidden_layers`` transformer blocks, pooler.

  Call with a dict of ``input_word_ids``, ``input_mask``, ``input_type_ids`` (each ``[B,S]``
  int; see ``unpack_inputs`` for the other accepted names). Returns a dict:
    ``sequence_output`` [B,S,H], ``pooled_output`` [B,H] (dense(H, tanh) on the first token),
    ``encoder_outputs`` (list of L tensors [B,S,H], one per layer),
    ``embedding_output`` [B,S,H], and with ``output_attentions=True`` also
    ``attention_probs`` (list of L tensors [B,N,S,S]).
  Outputs are float32 under every dtype policy. ``training=True`` turns dropout on (the
  original's ``is_training``).

  Example:
    >>> from bert_tf.modeling import BertConfig, BertModel
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=4, intermediate_size=64)
    >>> model = BertModel(config)
    >>> out = model({"input_word_ids": tf.constant([[2, 5, 3]])})
    >>> out["sequence_output"].shape, out["pooled_output"].shape
    (TensorShape([1, 3, 32]), TensorShape([1, 32]))
  """

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "bert")
    super().__init__(**kwargs)
    self.config = bert_layers.as_config(config)
    c = self.config
    policy = self.dtype_policy
    # Variable paths equal Google's checkpoint names (bert/embeddings/word_embeddings, ...).
    with bert_layers.scoped("bert"):
      self.embeddings = bert_layers.BertEmbeddings(c, name="embeddings", dtype=policy)
      with bert_layers.scoped("encoder"):
        self.encoder_layers = [
            bert_layers.TransformerBlock(c, name=f"layer_{i}", dtype=policy)
            for i in range(c.num_hidden_layers)
        ]
      with bert_layers.scoped("pooler"):
        self.pooler = keras.layers.Dense(c.hidden_size, activation="tanh", name="dense",
                                         kernel_initializer=bert_layers.truncated_normal(c),
                                         dtype=policy)
        self.pooler.build((None, c.hidden_size))
    self.built = True

  def call(self, inputs, training=None, output_attentions=False):
    word_ids, mask, type_ids = unpack_inputs(inputs)
    embedding_output = self.embeddings(word_ids, type_ids, training=training)  # [B,S,H]
    adder = bert_layers.attention_adder_from_mask(mask)  # [B,1,1,S]
    x = embedding_output
    encoder_outputs, attention_probs = [], []
    for block in self.encoder_layers:
      x, probs = block(x, adder, training=training, output_attentions=output_attentions)
      encoder_outputs.append(x)
      attention_probs.append(probs)
    # The first token of each sequence as the first H columns of the [B,S*H] matrix (not
    # x[:, 0]): its gradient is then a 2-D pad at the edge, which gives XLA no [B,S,H] layout
    # to pick for the stream's gradient either. (Every S-th row of the [B*S,H] matrix did the
    # same on a GPU, but its gradient, a pad with interior padding S-1, stopped libtpu's TPU
    # compiler on an internal check from 8,192 tokens at S >= 256: BENCHMARKS.md.)
    seq = x.shape[1] if x.shape[1] is not None else tf.shape(x)[1]
    hidden = self.config.hidden_size
    # (The reshape keeps H static where the sequence length is only known when run.)
    first = tf.reshape(tf.reshape(x, [-1, seq * hidden])[:, :hidden], [-1, hidden])  # [B,H]
    pooled = tf.cast(self.pooler(first), tf.float32)  # [B,H]
    # Between the layers the stream is in the compute dtype (16-bit under mixed precision);
    # what the model returns is float32.
    f32 = lambda t: tf.cast(t, tf.float32)  # noqa: E731
    outputs = {
        "sequence_output": f32(x),
        "pooled_output": pooled,
        "encoder_outputs": [f32(t) for t in encoder_outputs],
        "embedding_output": f32(embedding_output),
    }
    if output_attentions:
      outputs["attention_probs"] = attention_probs
    return outputs

  @property
  def word_embeddings(self):
    """The ``[V,H]`` word embedding table (tied to the masked-LM output layer)."""
    return self.embeddings.word_embeddings

  def get_config(self):
    base = super().get_config()
    base["config"] = self.config.to_dict()
    return base

  @classmethod
  def from_config(cls, config):
    return cls(**config)
