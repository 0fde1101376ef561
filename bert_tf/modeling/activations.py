"""Activation functions by the names in ``BertConfig.hidden_act``."""

import math

import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.modeling.placement import gpu_visible, in_xla_computation


def gelu(x):
  """Google's GELU: the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def gelu_exact(x):
  """The exact GELU, x * Phi(x) with the erf form (Hugging Face's ``"gelu"``)."""
  return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def recomputed_under_xla(fn, x, bias=None):
  """``fn(x + bias)`` (``tf.nn.bias_add``; ``fn(x)`` without a bias); inside an XLA
  computation its gradient recomputes the forward pass from ``x`` and ``bias`` (behind an
  optimization barrier, so that XLA does not merge the two and keep the forward's
  intermediates alive) instead of keeping what autodiff would keep.

  The gradient is autodiff's own (the same ops on the same inputs), so the numbers are the
  same up to how XLA fuses them. What it saves on a GPU: Google's tanh GELU keeps its input
  and its ``tanh`` for the backward pass, one ``[B*S, intermediate]`` 16-bit tensor per layer
  more than the input alone (128 MB per layer of BERT-Large at 16,384 tokens); the backward
  pass recomputes the tanh in the kernel that needs it (BENCHMARKS.md, "The GELU's tanh").
  With ``bias`` (the intermediate dense layer's) the backward pass also recomputes the bias
  add, from the GEMM's output (kept in place of the sum: the same size), so the forward
  kernel writes the activation only, not its input as well: one ``[B*S, intermediate]``
  tensor less written per layer (BENCHMARKS.md, "The bias add recomputed too").
  Outside XLA (eager, a plain ``tf.function``) and where no GPU is visible this is
  ``fn(x + bias)``: on a CPU the recomputation costs ~4% of a training step under XLA (BERT
  with 4 layers, hidden 256) and memory is rarely what limits it.
  """
  def forward(x, *bias):
    return fn(tf.nn.bias_add(x, bias[0]) if bias else x)

  inputs = (x,) if bias is None else (x, bias)
  if not (gpu_visible() and in_xla_computation()):
    return forward(*inputs)
  from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
  # The backward pass is traced outside this name scope; it re-enters it under
  # "gradient_tape/", as TensorFlow names gradients (bench/hlo_census.py counts by layer).
  scope = tf.get_current_name_scope()

  @tf.custom_gradient
  def apply(*inputs):
    def grad(dy):
      with tf.name_scope(f"gradient_tape/{scope}/" if scope else "gradient_tape/"):
        again = xla.optimization_barrier(*inputs)
        with tf.GradientTape() as tape:
          tape.watch(again)
          y = forward(*again)
        return tape.gradient(y, again, output_gradients=dy)
    return forward(*inputs), grad

  return apply(*inputs)


def get_activation(name):
  """Maps a ``hidden_act`` name to a function (``None`` for ``"linear"``)."""
  table = {"gelu": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu, "tanh": tf.tanh,
           "swish": tf.nn.silu, "linear": None}
  if name not in table:
    raise BertTfError(f"unknown activation {name!r}; expected one of {', '.join(table)}")
  return table[name]
