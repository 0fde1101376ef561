"""Activation functions by the names in ``BertConfig.hidden_act``."""

import math

import tensorflow as tf

from bert_tf.errors import BertTfError


def gelu(x):
  """Google's GELU: the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def gelu_exact(x):
  """The exact GELU, x * Phi(x) with the erf form (Hugging Face's ``"gelu"``)."""
  return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def get_activation(name):
  """Maps a ``hidden_act`` name to a function (``None`` for ``"linear"``)."""
  table = {"gelu": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu, "tanh": tf.tanh,
           "swish": tf.nn.silu, "linear": None}
  if name not in table:
    raise BertTfError(f"unknown activation {name!r}; expected one of {', '.join(table)}")
  return table[name]
