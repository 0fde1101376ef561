"""Where what is being traced will run: inside an XLA computation or not, and whether this
process sees a GPU. The GPU-only choices of the model (cuDNN's fused attention, the recomputed
activation, the weights' shared casts, the LayerNorm's one-pass statistics), of the optimizer
(its fused update) and of the pretraining loss ask these; the recomputed activation also asks
whether XLA_FLAGS wants cuBLASLt GEMMs."""

import os
import re

import tensorflow as tf

_GPU = None


def gpu_visible():
  """Whether this process sees a GPU (cached)."""
  global _GPU  # pylint: disable=global-statement
  if _GPU is None:
    _GPU = bool(tf.config.list_physical_devices("GPU"))
  return _GPU


def in_xla_computation():
  """Whether the op being traced is part of an XLA computation (inside a
  ``tf.function(jit_compile=True)``, at any depth of nesting)."""
  from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
  from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
  if tf.executing_eagerly():
    return False
  return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


def cublaslt_enabled(environ=None):
  """Whether XLA_FLAGS asks XLA's GPU compiler for cuBLASLt GEMMs
  (``--xla_gpu_enable_cublaslt=true``; the last occurrence wins, as in XLA's parser): their
  epilogues can take a bias and the tanh GELU (``BIAS_GELU_AUX``), which the encoder's
  intermediate layer then lets them do (``layers.Dense.recompute_activation``)."""
  flags = (os.environ if environ is None else environ).get("XLA_FLAGS", "")
  values = re.findall(r"--xla_gpu_enable_cublaslt(?:=(\S*))?(?=\s|$)", flags)
  return bool(values) and values[-1].lower() in ("", "true", "1")
