"""Google's original BERT (bert-tensorflow 1.0.4) made importable under TF 2.21.

The original is TF1 code: ``modeling.py`` imports ``tensorflow.contrib`` and calls
``tf.layers.dense``, both gone with TF2/Keras 3, and ``tokenization.py`` reads an absl flag.
This module supplies faithful stand-ins (same variable names, same arithmetic as the TF 1.15
implementations) so the original can run in graph mode as the reference for differential
tests. Nothing here is used by bert_tf itself.

Usage:
    from tests.reference.google_bert import google
    modeling = google("modeling")
"""

import importlib
import sys
import types

import tensorflow.compat.v1 as tf1

_READY = False


def _layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None, **_):
  """tf.contrib.layers.layer_norm as in TF 1.15: variables LayerNorm/{beta,gamma}, eps 1e-12."""
  del begin_norm_axis, begin_params_axis  # BERT always normalises the last axis.
  with tf1.variable_scope(scope, default_name="LayerNorm"):
    depth = inputs.shape[-1]
    beta = tf1.get_variable("beta", shape=[depth], initializer=tf1.zeros_initializer())
    gamma = tf1.get_variable("gamma", shape=[depth], initializer=tf1.ones_initializer())
    mean, variance = tf1.nn.moments(inputs, [inputs.shape.ndims - 1], keepdims=True)
    return tf1.nn.batch_normalization(
        inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)


def _dense(inputs, units, activation=None, name=None, kernel_initializer=None, **_):
  """tf.layers.dense (TF1): variables <scope>/kernel [in, units] and <scope>/bias [units]."""
  with tf1.variable_scope(name, default_name="dense"):
    kernel = tf1.get_variable("kernel", shape=[inputs.shape[-1], units],
                              initializer=kernel_initializer)
    bias = tf1.get_variable("bias", shape=[units], initializer=tf1.zeros_initializer())
    if inputs.shape.ndims > 2:
      outputs = tf1.tensordot(inputs, kernel, [[inputs.shape.ndims - 1], [0]])
    else:
      outputs = tf1.matmul(inputs, kernel)
    outputs = tf1.nn.bias_add(outputs, bias)
    return activation(outputs) if activation is not None else outputs


def _install_stand_ins():
  global _READY
  if _READY:
    return
  contrib = types.ModuleType("tensorflow.contrib")
  layers = types.ModuleType("tensorflow.contrib.layers")
  layers.layer_norm = _layer_norm
  contrib.layers = layers
  sys.modules.setdefault("tensorflow.contrib", contrib)
  sys.modules.setdefault("tensorflow.contrib.layers", layers)
  tf1.layers = types.SimpleNamespace(dense=_dense)
  # tokenization.py and the run_* scripts define absl flags at import and read them later.
  from absl import flags
  if not flags.FLAGS.is_parsed():
    flags.FLAGS(["google_bert_reference"], known_only=True)
  _READY = True


def google(module_name):
  """Imports ``bert.<module_name>`` from bert-tensorflow 1.0.4 with the stand-ins installed."""
  _install_stand_ins()
  from absl import flags
  full_name = f"bert.{module_name}"
  removed = []
  if full_name not in sys.modules:
    # The original scripts each define flags such as --input_file; drop the other scripts'
    # definitions so this one can define its own (defaults are what the tests rely on).
    by_module = {m: list(fl) for m, fl in flags.FLAGS.flags_by_module_dict().items()}
    for other, defined in by_module.items():
      if other.startswith("bert.") and other != "bert.tokenization":
        for flag in defined:
          if flag.name in flags.FLAGS:
            delattr(flags.FLAGS, flag.name)
            removed.append((other, flag))
  module = importlib.import_module(full_name)
  # Put back the other scripts' flags that this one does not define: run_squad's functions
  # read --version_2_with_negative whichever script was imported after it.
  for other, flag in removed:
    if flag.name not in flags.FLAGS:
      flags.FLAGS[flag.name] = flag
      flags.FLAGS.register_flag_by_module(other, flag)
  # Modules imported after the first parse define new flags; mark them parsed with defaults.
  if not flags.FLAGS.is_parsed():
    flags.FLAGS(["google_bert_reference"], known_only=True)
  else:
    flags.FLAGS.mark_as_parsed()
  return module
