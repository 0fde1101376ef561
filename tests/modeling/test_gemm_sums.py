"""layers.fan_out_for_gemm_sums: where a layer's input feeds the residual and three products
(q, k, v in the fused kernel's layout), its gradient is the four uses' gradients summed as a
left fold with the newest term as each add's first operand: the operand order XLA's GPU
compile needs to fold every add into a GEMM (BENCHMARKS.md, "The input gradient's sum in the
GEMMs"). TensorFlow's own sum is a left fold of the same terms in an order of its choosing."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertModel, fused_attention, layers, placement

B, S, N, D = 2, 8, 2, 16
MASK = [[1] * 8, [1] * 5 + [0] * 3]


def _plain_fan_out(x, n):
  """x used n times: TensorFlow's own gradient (an AddN of the n uses' gradients)."""
  return [x] * n


def _uses_gradient(fan_out=None):
  """Gradient of x used as a residual and by three products (bf16, XLA) with ``fan_out``,
  and the lowered HLO; without: the four uses' own gradients (x as four separate inputs)."""
  rng = np.random.RandomState(0)
  x = tf.constant(rng.normal(size=[6, 8]), tf.bfloat16)
  weights = [tf.constant(rng.normal(size=[8, 8]), tf.bfloat16) for _ in range(3)]
  r = tf.constant(rng.normal(size=[6, 8]), tf.bfloat16)

  def loss_of(residual, *inputs):
    y = residual * r
    for inp, w in zip(inputs, weights):
      y = y + tf.matmul(inp, w)
    return tf.reduce_sum(tf.cast(y, tf.float32) ** 2)

  @tf.function(jit_compile=True)
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss = loss_of(*fan_out(x, 4))
    return tape.gradient(loss, x)

  @tf.function(jit_compile=True)
  def per_use(x):
    uses = [tf.identity(x) for _ in range(4)]
    with tf.GradientTape() as tape:
      tape.watch(uses)
      loss = loss_of(*uses)
    return tape.gradient(loss, uses)

  if fan_out is None:
    return [g.numpy() for g in per_use(x)]
  return step(x).numpy(), step.experimental_get_compiler_ir(x)(stage="hlo")


def _gradient_adds(hlo, shape):
  """(first operand, second operand) of each bf16 add of ``shape`` in the HLO."""
  return re.findall(rf"= bf16\[{shape}\]\S* add\(bf16\[{shape}\]\S* %([\w.]+), "
                    rf"bf16\[{shape}\]\S* %([\w.]+)\)", hlo)


def test_the_sum_is_the_left_fold_bit_for_bit_newest_term_first():
  grad, hlo = _uses_gradient(layers.fan_out_for_gemm_sums)
  g = [tf.constant(u) for u in _uses_gradient()]  # residual, q, k, v
  want = (((g[0] + g[1]) + g[2]) + g[3]).numpy()  # bf16 adds, as XLA's
  np.testing.assert_array_equal(grad.astype(np.float32), want.astype(np.float32))
  # Not an order-insensitive case: another association rounds differently here.
  other = (((g[3] + g[2]) + g[0]) + g[1]).numpy()
  assert not np.array_equal(other.astype(np.float32), want.astype(np.float32))
  # The three gradient adds: a product first; the residual's gradient (a multiply) enters
  # the first add second, each later add takes the previous one second.
  adds = _gradient_adds(hlo, "6,8")[3:]  # after the forward pass's three
  assert len(adds) == 3, adds
  assert [a.startswith("MatMul") for a, _ in adds] == [True] * 3, adds
  assert adds[0][1].startswith("Mul") and adds[1][1] == _name(hlo, adds[0])
  assert adds[2][1] == _name(hlo, adds[1])


def _name(hlo, operands):
  """The name of the add whose operands are ``operands``."""
  a, b = operands
  return re.search(rf"%([\w.]+) = bf16\[[\d,]+\]\S* add\(bf16\[[\d,]+\]\S* %{re.escape(a)}, "
                   rf"bf16\[[\d,]+\]\S* %{re.escape(b)}\)", hlo).group(1)


def _plain_attention_btnh(q, k, v, key_lengths):
  """The fused kernel's math in plain ops (so that the btnh path runs on a CPU)."""
  scale = 1.0 / np.sqrt(q.shape[-1])
  scores = tf.einsum("BFND,BTND->BNFT", tf.cast(q, tf.float32), tf.cast(k, tf.float32))
  valid = tf.sequence_mask(key_lengths, k.shape[1])[:, None, None, :]
  probs = tf.nn.softmax(tf.where(valid, scores * scale, -1e9), axis=-1)
  return tf.cast(tf.einsum("BNFT,BTND->BFND", probs, tf.cast(v, tf.float32)), q.dtype)


def _update(monkeypatch, fan_out):
  """Loss, {variable: gradient} and HLO of a 2-layer mixed-bfloat16 BERT update on the fused
  kernel's [B,S,N,D] path (a GPU made visible to the model, the kernel's math in plain ops)."""
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))
  monkeypatch.setattr(fused_attention, "cudnn_attention_btnh", _plain_attention_btnh)
  monkeypatch.setattr(layers, "fan_out_for_gemm_sums", fan_out)
  config = BertConfig(vocab_size=50, hidden_size=N * D, num_hidden_layers=2,
                      num_attention_heads=N, intermediate_size=64,
                      attention_probs_dropout_prob=0.0, attention_implementation="cudnn_btnh")
  keras.utils.set_random_seed(0)
  model = BertModel(config, dtype="mixed_bfloat16")
  layers.set_dropout_rng(model, "hash")
  ids = tf.constant(np.random.RandomState(0).randint(1, 50, [B, S]), tf.int32)
  mask = tf.constant(MASK, tf.int32)

  @tf.function(jit_compile=True)
  def step(ids, mask):
    with tf.GradientTape() as tape:
      out = model({"input_word_ids": ids, "input_mask": mask}, training=True,
                  output_attentions=False)
      loss = (tf.reduce_sum(tf.cast(out["sequence_output"], tf.float32) ** 2)
              + tf.reduce_sum(tf.cast(out["pooled_output"], tf.float32)))
    return loss, [tf.convert_to_tensor(g)
                  for g in tape.gradient(loss, model.trainable_variables)]

  loss, grads = step(ids, mask)
  return (loss.numpy(),
          {v.path: g.numpy().astype(np.float64) for v, g in zip(model.trainable_variables, grads)},
          step.experimental_get_compiler_ir(ids, mask)(stage="hlo"))


def _input_gradient_adds(hlo):
  """(first operand, op_type) of the bf16 [B,S,H] adds of the backward pass (op_name without
  a layer: the gradient sums of the layers' inputs and of the encoder's output)."""
  return re.findall(rf"= bf16\[{B},{S},{N * D}\]\S* add\(bf16\S+ %([\w.]+), [^)]*\), "
                    r'metadata=\{op_type="(\w+)" op_name="(?:AddN|add)[_\d]*"', hlo)


def test_a_bert_update_on_the_fused_layout(monkeypatch):
  """Each layer's input gradient is three adds, each with a q/k/v product's gradient first
  (TensorFlow's own: an AddN whose left fold starts from the residual's); the loss is the
  same, the gradients the same to the rounding of those bf16 adds."""
  loss, grads, hlo = _update(monkeypatch, layers.fan_out_for_gemm_sums)
  want_loss, want, want_hlo = _update(monkeypatch, _plain_fan_out)
  # The first: the encoder output's gradient (the pooler's and the sequence output's), the
  # same in both; then each layer's input gradient, three adds.
  adds, want_adds = _input_gradient_adds(hlo), _input_gradient_adds(want_hlo)
  assert adds[0] == want_adds[0]
  assert [(first.startswith("Reshape_1"), op) for first, op in adds[1:]] == [(True, "AddV2")] * 6
  assert [op for _, op in want_adds[1:]] == ["AddN"] * 6
  assert [first.startswith("Reshape_5") for first, _ in want_adds[1::3]] == [True] * 2
  assert loss == want_loss
  assert grads.keys() == want.keys()
  query_bias = np.linalg.norm(want["bert/encoder/layer_0/attention/self/query/bias"])
  for name, got in grads.items():
    error = np.linalg.norm(got - want[name])
    if "/key/bias" in name:  # zero in exact arithmetic (softmax ignores a per-row shift)
      assert error <= 1e-2 * query_bias, name
    else:
      assert error <= 2e-3 * np.linalg.norm(want[name]), (name, error)


@pytest.mark.parametrize("case", ["no_gpu", "xla_attention"])
def test_elsewhere_the_input_is_used_as_it_is(monkeypatch, case):
  """No GPU, or an attention that projects q, k, v as one product: no fan-out."""
  calls = []
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", () if case == "no_gpu" else ((9, 0),))
  monkeypatch.setattr(layers, "fan_out_for_gemm_sums",
                      lambda x, n: calls.append(n) or [x] * n)
  config = BertConfig(vocab_size=50, hidden_size=N * D, num_hidden_layers=1,
                      num_attention_heads=N, intermediate_size=64,
                      attention_probs_dropout_prob=0.0,
                      attention_implementation="auto" if case == "no_gpu" else "xla")
  model = BertModel(config, dtype="mixed_bfloat16")
  ids = tf.constant(np.random.RandomState(0).randint(1, 50, [B, S]), tf.int32)
  tf.function(lambda: model({"input_word_ids": ids, "input_mask": tf.constant(MASK)},
                            training=True, output_attentions=False),
              jit_compile=True).get_concrete_function()
  assert calls == []
