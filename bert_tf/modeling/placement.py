"""Where what is being traced will run: inside an XLA computation or not, and whether this
process sees a GPU. The GPU-only choices of the model (cuDNN's fused attention, the recomputed
activation, the weights' shared casts, the LayerNorm's one-pass statistics), of the optimizer
(its fused update) and of the pretraining loss ask these; the recomputed activation also asks
whether XLA_FLAGS wants cuBLASLt GEMMs, which the training loop asks for on a Hopper GPU
(``set_gpu_xla_flags``)."""

import os
import re

import tensorflow as tf

# The compute capabilities of the GPUs this process sees, e.g. ((9, 0),); () where it sees none.
# Read once (tests and bench/hlo_census.py set it to trace as a GPU would).
_GPU_CAPABILITIES = None


def gpu_capabilities():
  """The compute capabilities (major, minor) of the GPUs this process sees (cached)."""
  global _GPU_CAPABILITIES  # pylint: disable=global-statement
  if _GPU_CAPABILITIES is None:
    _GPU_CAPABILITIES = tuple(
        tuple(tf.config.experimental.get_device_details(device).get("compute_capability")
              or (0, 0))
        for device in tf.config.list_physical_devices("GPU"))
  return _GPU_CAPABILITIES


def gpu_visible():
  """Whether this process sees a GPU."""
  return bool(gpu_capabilities())


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


# XLA flags of a training run under XLA on a Hopper GPU (compute capability 9.x: H100, H200),
# where XLA_FLAGS does not name them: cuBLASLt GEMMs (their epilogues then take the bias adds
# and the intermediate layer's GELU: cublaslt_enabled) and no Triton GEMMs (every GEMM was
# cuBLAS's anyway; Triton's autotuning was warm-up for nothing). On an H100 a BERT-Large
# phase-1 update ran 6.3% faster with both (1,548.0 against 1,456.3 sequences/s) and warmed up
# in 97 s instead of 155 (BENCHMARKS.md, 2026-11-28). Other GPUs: not measured, not set.
GPU_XLA_FLAGS = (("xla_gpu_enable_cublaslt", "true"), ("xla_gpu_enable_triton_gemm", "false"))


def with_gpu_xla_flags(flags):
  """``flags`` (an XLA_FLAGS value) with the ``GPU_XLA_FLAGS`` it does not name appended ->
  (the new value, the flags added)."""
  added = [f"--{name}={value}" for name, value in GPU_XLA_FLAGS
           if not re.search(rf"--{name}(?=[=\s]|$)", flags)]
  return " ".join(([flags] if flags else []) + added), added


def set_gpu_xla_flags(environ=None):
  """Adds ``GPU_XLA_FLAGS`` that XLA_FLAGS does not name to it, on a Hopper GPU; returns the
  flags added (``[]`` elsewhere). XLA reads XLA_FLAGS once per process, at its first compile:
  call this before anything is XLA-compiled (later, it changes only the model's choice that
  ``cublaslt_enabled`` makes, not XLA's). Name a flag in XLA_FLAGS to choose its value."""
  environ = os.environ if environ is None else environ
  if not any(major == 9 for major, _ in gpu_capabilities()):
    return []
  flags, added = with_gpu_xla_flags(environ.get("XLA_FLAGS", ""))
  if added:
    environ["XLA_FLAGS"] = flags
  return added
