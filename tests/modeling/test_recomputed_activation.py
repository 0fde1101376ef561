"""activations.recomputed_under_xla: the encoder's intermediate activation (Google's tanh GELU)
whose gradient recomputes the activation (and the bias add before it) from its inputs under
XLA instead of keeping the tanh and the pre-activation. Checked against TensorFlow's own gradient of the same function, against the GELU's
derivative written out in NumPy float64, and inside a small BERT update against the model
with the recomputation turned off."""

import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertModel, activations, layers, placement
from tests.modeling.padded_update import padded_update
from tests.reference import google_models

@pytest.fixture(autouse=True)
def fake_gpu(monkeypatch):
  # The recomputation runs where a GPU is visible; nothing here needs one to run.
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))


FUNCTIONS = {"gelu": activations.gelu, "gelu_exact": activations.gelu_exact,
             "relu": tf.nn.relu}


def _value_and_grad(fn, x, dy, jit, recompute):
  def run(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = activations.recomputed_under_xla(fn, x) if recompute else fn(x)
      loss = tf.reduce_sum(tf.cast(y, tf.float32) * dy)
    return y, tape.gradient(loss, x)

  return [t.numpy().astype(np.float64) for t in tf.function(run, jit_compile=jit)(x)]


def _inputs(dtype):
  rng = np.random.RandomState(0)
  x = tf.cast(tf.constant(rng.normal(size=[6, 40]) * 2, tf.float32), dtype)
  dy = tf.constant(rng.normal(size=[6, 40]), tf.float32)
  return x, dy


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_same_value_and_gradient_as_autodiff(name, dtype):
  x, dy = _inputs(dtype)
  for jit in (False, True):
    got = _value_and_grad(FUNCTIONS[name], x, dy, jit, recompute=True)
    want = _value_and_grad(FUNCTIONS[name], x, dy, jit, recompute=False)
    np.testing.assert_array_equal(got[0], want[0])  # the forward is the same ops
    if not jit:  # outside XLA nothing is wrapped: the same graph
      np.testing.assert_array_equal(got[1], want[1])
    elif dtype == tf.float32:
      np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-7)
    else:  # the same ops on the same input; XLA may fuse the bf16 roundings differently
      np.testing.assert_allclose(got[1], want[1], rtol=2 ** -7, atol=2 ** -7)


def _value_and_grads_with_bias(fn, x, bias, dy, jit, recompute):
  def run(x, bias):
    with tf.GradientTape() as tape:
      tape.watch([x, bias])
      y = (activations.recomputed_under_xla(fn, x, bias) if recompute
           else fn(tf.nn.bias_add(x, bias)))
      loss = tf.reduce_sum(tf.cast(y, tf.float32) * dy)
    return (y, *tape.gradient(loss, [x, bias]))

  step = tf.function(run, jit_compile=jit)
  values = [t.numpy().astype(np.float64) for t in step(x, bias)]
  return values, (step.experimental_get_compiler_ir(x, bias)(stage="hlo") if jit else None)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_with_a_bias_the_add_is_recomputed_too(dtype):
  x, dy = _inputs(dtype)
  bias = tf.cast(tf.constant(np.random.RandomState(1).normal(size=[40]), tf.float32), dtype)
  for jit in (False, True):
    (got, hlo) = _value_and_grads_with_bias(activations.gelu, x, bias, dy, jit, True)
    (want, plain_hlo) = _value_and_grads_with_bias(activations.gelu, x, bias, dy, jit, False)
    np.testing.assert_array_equal(got[0], want[0])  # the forward is the same ops
    for g, w in zip(got[1:], want[1:]):  # d x, d bias
      if not jit:
        np.testing.assert_array_equal(g, w)
      else:
        tol = 1e-6 if dtype == tf.float32 else 2 ** -7
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())
    if jit:
      # The backward pass starts from x and the bias behind one barrier (not from x + bias,
      # which the forward kernel then need not write out).
      name = dtype.name.replace("float", "f")  # f32, bf16
      barriers = [line for line in hlo.splitlines() if "opt-barrier(" in line]
      assert len(barriers) == 1 and f"{name}[6,40]" in barriers[0], barriers
      assert f"{name}[40]" in barriers[0], barriers
      assert "opt-barrier(" not in plain_hlo


def test_gelu_gradient_is_the_derivative_written_out():
  x, dy = _inputs(tf.float32)
  _, grad = _value_and_grad(activations.gelu, x, dy, jit=True, recompute=True)
  x = x.numpy().astype(np.float64)
  c = math.sqrt(2.0 / math.pi)
  t = np.tanh(c * (x + 0.044715 * x ** 3))
  derivative = 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2)
  np.testing.assert_allclose(grad, dy.numpy() * derivative, rtol=1e-5, atol=1e-5)


def _model_update(recompute, dtype="float32"):
  """Loss and gradients of a 2-layer BERT (dropout 0.1, hash masks) under XLA."""
  config = BertConfig.from_dict(google_models.tiny_config_dict())
  keras.utils.set_random_seed(0)
  model = BertModel(config, dtype=dtype)
  layers.set_dropout_rng(model, "hash")
  for block in model.encoder_layers:
    block.intermediate_dense.recompute_activation = recompute
  values, step, inputs = padded_update(model, jit=True)
  return values, step.experimental_get_compiler_ir(*inputs)(stage="hlo")


def test_bert_update_matches_autodiff_and_recomputes_the_tanh():
  (got, hlo), (want, plain_hlo) = _model_update(True), _model_update(False)
  assert len(got) == len(want) > 30
  scale = max(np.abs(w).max() for w in want[1:])
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  for g, w in zip(got[1:], want[1:]):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale)
  # The backward pass computes its own tanh of the intermediate layer's input (2 layers: 2
  # forward, 2 backward), behind an optimization barrier; autodiff reuses the forward's.
  assert "opt-barrier" in hlo and "opt-barrier" not in plain_hlo
  count = lambda text: text.count(" tanh(")  # noqa: E731
  assert count(plain_hlo) - 1 == 2  # + the pooler's tanh
  assert count(hlo) - 1 == 4


def test_without_a_gpu_the_gradient_is_autodiffs(monkeypatch):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ())
  x, dy = _inputs(tf.bfloat16)
  got = _value_and_grad(activations.gelu, x, dy, jit=True, recompute=True)
  want = _value_and_grad(activations.gelu, x, dy, jit=True, recompute=False)
  np.testing.assert_array_equal(got[1], want[1])


def test_with_cublaslt_the_biased_input_is_kept_for_a_gemm_epilogue(monkeypatch):
  """XLA_FLAGS with --xla_gpu_enable_cublaslt=true: the intermediate layer's backward pass
  recomputes the GELU from x W + b (what a cuBLASLt GEMM writes beside the activation from a
  BIAS_GELU_AUX epilogue), not from x W and b; the same update to rounding."""
  (want, default_hlo) = _model_update(True)
  monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_cublaslt=true")
  (got, hlo) = _model_update(True)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  scale = max(np.abs(w).max() for w in want[1:])
  for g, w in zip(got[1:], want[1:]):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * scale)

  def barriers(text):  # the barriers' operand shapes, one list per barrier
    return [sorted(re.findall(r"f32\[[\d,]*\]", line.split("opt-barrier(", 1)[1]))
            for line in text.splitlines() if "opt-barrier(" in line]
  # 2 layers; the intermediate layer's [B*S, 37] input, with (default) or without its bias.
  assert [b for b in barriers(default_hlo) if "f32[37]" in b] and len(barriers(default_hlo)) == 2
  assert barriers(hlo) and all(b == [b[0]] and b[0].endswith(",37]") for b in barriers(hlo))


def test_cublaslt_is_read_from_xla_flags_as_xla_reads_them():
  for flags, enabled in (("", False), ("--xla_gpu_enable_cublaslt=true", True),
                         ("--xla_gpu_enable_cublaslt", True),
                         ("--a --xla_gpu_enable_cublaslt=True --b", True),
                         ("--xla_gpu_enable_cublaslt=false", False),
                         ("--xla_gpu_enable_cublaslt=true --xla_gpu_enable_cublaslt=false", False),
                         ("--xla_gpu_enable_cublaslt_other=true", False)):
    assert placement.cublaslt_enabled({"XLA_FLAGS": flags}) is enabled, flags
