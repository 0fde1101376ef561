"""attention_implementation: the cuDNN fused-attention custom calls in the model's HLO (on CPU,
from ``experimental_get_compiler_ir``, which lowers without running), where ``auto`` takes them
and where it falls back to the plain path, and the one-line errors of a forced ``cudnn``.

The backend config is checked against JAX's ``fused_attention_stablehlo.py`` (BNTH layout,
PADDING mask), which these custom calls copy; the kernel itself runs only on a GPU
(``bench/check_fused_attention.py``)."""

import dataclasses
import json
import math
import os
import re
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, BertModel, fused_attention, placement
from bert_tf.modeling.layers import set_dropout_rng

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))
import hlo_census  # noqa: E402  pylint: disable=wrong-import-position

B, S, N, D, L = 2, 8, 2, 16, 1
MASK = [[1] * 8, [1] * 5 + [0] * 3]

# JAX's dot dimension numbers for BNTH, ((lhs_contracting, rhs_contracting), batch (0,1)).
_JAX_FORWARD = {"bmm1_dot_dimension_numbers": (3, 3), "bmm2_dot_dimension_numbers": (3, 2)}
_JAX_BACKWARD = {"bmm1_grad_gemm1_dot_dimension_numbers": (2, 2),
                 "bmm1_grad_gemm2_dot_dimension_numbers": (3, 2),
                 "bmm2_grad_gemm1_dot_dimension_numbers": (2, 2),
                 "bmm2_grad_gemm2_dot_dimension_numbers": (3, 3)}


def _config(**kwargs):
  values = dict(vocab_size=50, hidden_size=N * D, num_hidden_layers=L, num_attention_heads=N,
                intermediate_size=64, attention_probs_dropout_prob=0.0)
  values.update(kwargs)
  return BertConfig(**values)


@pytest.fixture
def fake_gpu(monkeypatch):
  """The one condition a CPU cannot meet: a GPU of compute capability >= 8.0."""
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((9, 0),))


def _inputs():
  ids = tf.constant(np.random.RandomState(0).randint(1, 50, [B, S]), tf.int32)
  return ids, tf.constant(MASK, tf.int32)


def _step(model, training=True, output_attentions=False):
  @tf.function(jit_compile=True)
  def step(ids, mask):
    with tf.GradientTape() as tape:
      out = model({"input_word_ids": ids, "input_mask": mask}, training=training,
                  output_attentions=output_attentions)
      loss = tf.reduce_sum(out["sequence_output"] ** 2)
    return loss, tape.gradient(loss, model.trainable_variables)
  return step


def _hlo(config, dtype="mixed_bfloat16", **kwargs):
  keras.utils.set_random_seed(0)
  model = BertModel(config, dtype=dtype)
  return _step(model, **kwargs).experimental_get_compiler_ir(*_inputs())(stage="hlo")


def _custom_calls(hlo):
  """[(target, result shapes, operand shapes, backend config dict)] of the module."""
  calls = []
  for line in hlo.splitlines():
    match = re.search(r"= \((.*?)\) custom-call\((.*?)\), custom_call_target=\"([^\"]+)\"",
                      line)
    if not match:
      continue
    shapes = lambda text: re.findall(r"(\w+\[[\d,]*\])", text)  # noqa: E731
    config = json.loads(re.search(r"backend_config=(\{.*\})\s*$", line).group(1))
    calls.append((match.group(3), shapes(match.group(1)), shapes(match.group(2)), config))
  return calls


def test_fused_path_emits_cudnn_forward_and_backward_calls(fake_gpu):
  hlo = _hlo(_config(attention_implementation="cudnn"))
  calls = _custom_calls(hlo)
  # bench/hlo_census.py counts them per layer.
  assert hlo_census.parse_hlo_text(hlo, (B, N, S))["layer_0"]["fmha_calls"] == 2
  forward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmax"]
  backward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmaxBackward"]
  assert len(forward) == L and len(backward) == L and len(calls) == 2 * L
  bnsd = f"bf16[{B},{N},{S},{D}]"
  for _, results, operands, config in forward:
    # q, k, v, query lengths, key lengths -> out, softmax statistics, workspace.
    assert operands == [bnsd] * 3 + [f"s32[{B}]"] * 2
    assert results == [bnsd, f"f32[{B},{N},{S}]", "u8[0]"]
  for _, results, operands, config in backward:
    # q, k, v, statistics, d_out, out, lengths -> dq, dk, dv, workspace.
    assert operands == [bnsd] * 3 + [f"f32[{B},{N},{S}]", bnsd, bnsd] + [f"s32[{B}]"] * 2
    assert results == [bnsd] * 3 + ["u8[0]"]
  for target, _, _, config in calls:
    fmha = config["cudnn_fmha_backend_config"]
    assert fmha["fmha_scale"] == pytest.approx(1 / math.sqrt(D))
    assert fmha["mask_type"] == "PADDING" and fmha["dropout_rate"] == 0.0
    assert fmha["is_flash_attention"] is True
    shape = fmha["intermediate_tensor_shape"]
    assert shape["element_type"] == "BF16" and shape["dimensions"] == [str(x) for x in
                                                                        (B, N, S, S)]
    expected = _JAX_BACKWARD if target.endswith("Backward") else _JAX_FORWARD
    assert {k: (int(v["lhs_contracting_dimensions"][0]), int(v["rhs_contracting_dimensions"][0]))
            for k, v in fmha.items() if k.endswith("dot_dimension_numbers")} == expected
    for key in expected:
      assert fmha[key]["lhs_batch_dimensions"] == fmha[key]["rhs_batch_dimensions"] == ["0", "1"]


# JAX's dot dimension numbers for BTNH: (lhs_contracting, rhs_contracting, lhs_batch, rhs_batch).
_JAX_BTNH = {"bmm1_dot_dimension_numbers": (3, 3, [0, 2], [0, 2]),  # BTNH,BSNH->BNTS
             "bmm2_dot_dimension_numbers": (3, 1, [0, 1], [0, 2]),  # BNTS,BSNH->BTNH
             "bmm1_grad_gemm1_dot_dimension_numbers": (2, 1, [0, 1], [0, 2]),
             "bmm1_grad_gemm2_dot_dimension_numbers": (3, 1, [0, 1], [0, 2]),
             "bmm2_grad_gemm1_dot_dimension_numbers": (2, 1, [0, 1], [0, 2]),
             "bmm2_grad_gemm2_dot_dimension_numbers": (3, 3, [0, 2], [0, 2])}


def _custom_calls_with_layouts(hlo):
  """[(target, result shapes with layouts, operand shapes with layouts, config)]."""
  calls = []
  for line in hlo.splitlines():
    match = re.search(r"= \((.*?)\) custom-call\((.*?)\), custom_call_target=\"([^\"]+)\"",
                      line)
    if match:
      shapes = lambda text: re.findall(r"(\w+\[[\d,]*\]\{[\d,]*\})", text)  # noqa: E731
      config = json.loads(re.search(r"backend_config=(\{.*\})\s*$", line).group(1))
      calls.append((match.group(3), shapes(match.group(1)), shapes(match.group(2)), config))
  return calls


def test_btnh_layout_reads_and_writes_the_hidden_streams_layout(fake_gpu):
  """cudnn_btnh: q, k, v, d_out and out go in as [B,S,N,D] (default layout: views of the
  [B*S,H] stream), every result comes out as [B,N,S,D] stored {3,1,2,0} (physically
  [B,S,N,D]), and the only transposes are those of the results, which that layout makes
  bitcasts: no layout copy around the kernel."""
  hlo = _hlo(_config(attention_implementation="cudnn_btnh"))
  calls = _custom_calls_with_layouts(hlo)
  btnh, stored = f"bf16[{B},{S},{N},{D}]{{3,2,1,0}}", f"bf16[{B},{N},{S},{D}]{{3,1,2,0}}"
  stats, lengths = f"f32[{B},{N},{S}]{{2,1,0}}", f"s32[{B}]{{0}}"
  forward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmax"]
  backward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmaxBackward"]
  assert len(forward) == L and len(backward) == L and len(calls) == 2 * L
  assert forward[0][2] == [btnh] * 3 + [lengths] * 2
  assert forward[0][1] == [stored, stats, "u8[0]{0}"]
  assert backward[0][2] == [btnh] * 3 + [stats, btnh, btnh] + [lengths] * 2
  assert backward[0][1] == [stored] * 3 + ["u8[0]{0}"]
  for target, _, _, config in calls:
    fmha = config["cudnn_fmha_backend_config"]
    assert fmha["mask_type"] == "PADDING" and fmha["dropout_rate"] == 0.0
    assert fmha["fmha_scale"] == pytest.approx(1 / math.sqrt(D))
    assert fmha["intermediate_tensor_shape"]["dimensions"] == [str(x) for x in (B, N, S, S)]
    got = {k: (int(v["lhs_contracting_dimensions"][0]), int(v["rhs_contracting_dimensions"][0]),
               [int(d) for d in v["lhs_batch_dimensions"]],
               [int(d) for d in v["rhs_batch_dimensions"]])
           for k, v in fmha.items() if k.endswith("dot_dimension_numbers")}
    assert got == {k: v for k, v in _JAX_BTNH.items()
                   if ("grad" in k) == target.endswith("Backward")}
  # Every 4-D transpose in the update (the others are the 2-D weights' in the GEMMs'
  # gradients) reads a custom call's result through its layout.
  transposes = [l for l in hlo.splitlines()
                if re.search(r"= \w+\[\d+,\d+,\d+,\d+\]\S* transpose\(", l)]
  assert len(transposes) == 4 * L  # out; dq, dk, dv
  for line in transposes:
    assert re.search(rf"transpose\(bf16\[{B},{N},{S},{D}\]\{{3,1,2,0\}}", line), line
    assert "dimensions={0,2,1,3}" in line
  # bench/hlo_census.py finds both calls in their layer (the module's op_name).
  assert hlo_census.parse_hlo_text(hlo, (B, N, S))["layer_0"]["fmha_calls"] == 2


def test_btnh_without_a_gpu_is_a_one_line_error():
  config = _config(attention_implementation="cudnn_btnh")
  with pytest.raises(BertTfError, match="cudnn_btnh: cuDNN's fused attention cannot run here"):
    _hlo(config)


def test_float16_config_names_f16(fake_gpu):
  calls = _custom_calls(_hlo(_config(attention_implementation="cudnn"), dtype="mixed_float16"))
  assert calls and all(c[3]["cudnn_fmha_backend_config"]["intermediate_tensor_shape"]
                       ["element_type"] == "F16" for c in calls)


def test_key_lengths_are_the_masks_attended_positions():
  from bert_tf.modeling.layers import attention_adder_from_mask
  mask = tf.constant([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]])
  lengths = fused_attention.key_lengths_from_adder(attention_adder_from_mask(mask))
  assert lengths.numpy().tolist() == [3, 1, 4]


def test_dropout_variant_only_when_asked(fake_gpu):
  calls = _custom_calls(_hlo(_config(attention_implementation="cudnn_dropout",
                                     attention_probs_dropout_prob=0.1)))
  assert sorted({c[0] for c in calls}) == ["__cudnn$fmhaSoftmaxDropout",
                                           "__cudnn$fmhaSoftmaxDropoutBackward"]
  assert all(c[3]["cudnn_fmha_backend_config"]["dropout_rate"] == 0.1 for c in calls)


@pytest.mark.parametrize("case", ["dropout", "float32", "probs", "head_size", "no_gpu"])
def test_auto_falls_back_where_the_kernel_does_not_apply(monkeypatch, case):
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", () if case == "no_gpu" else ((9, 0),))
  config = dict(dropout=_config(attention_probs_dropout_prob=0.1),
                head_size=BertConfig(vocab_size=50, hidden_size=N * 12, num_hidden_layers=1,
                                     num_attention_heads=N, intermediate_size=64,
                                     attention_probs_dropout_prob=0.0)).get(case, _config())
  hlo = _hlo(config, dtype="float32" if case == "float32" else "mixed_bfloat16",
             output_attentions=case == "probs")
  assert "custom-call" not in hlo
  assert "fmha" not in hlo


def test_auto_falls_back_outside_xla_and_for_shapes_known_only_when_run(fake_gpu):
  """The kernel is an XLA custom call with static shapes: with a GPU, ``auto`` still runs the
  plain path eagerly, in a tf.function that XLA does not compile, and under XLA where the
  batch size or sequence length is unknown when the model is traced."""
  ids, mask = _inputs()
  keras.utils.set_random_seed(0)
  auto = BertModel(_config(), dtype="mixed_bfloat16")
  plain = BertModel(_config(attention_implementation="xla"), dtype="mixed_bfloat16")
  plain.set_weights(auto.get_weights())
  run = lambda model, ids, mask: model({"input_word_ids": ids,  # noqa: E731
                                        "input_mask": mask})["sequence_output"]
  want = run(plain, ids, mask).numpy()
  np.testing.assert_array_equal(run(auto, ids, mask), want)
  np.testing.assert_array_equal(tf.function(lambda i, m: run(auto, i, m))(ids, mask), want)
  unknown = [tf.TensorSpec([None, None], tf.int32)] * 2
  for signature, fused in ((unknown, False), (None, True)):
    step = tf.function(lambda i, m: run(auto, i, m), jit_compile=True,
                       input_signature=signature)
    hlo = step.experimental_get_compiler_ir(ids, mask)(stage="hlo")
    assert ("__cudnn$fmhaSoftmax" in hlo) is fused, signature


@pytest.mark.parametrize("head_size,fused", [(8, True), (64, True), (128, True), (12, False),
                                             (136, False), (256, False)])
def test_auto_takes_head_sizes_that_are_multiples_of_8_up_to_128(fake_gpu, head_size, fused):
  reason = fused_attention.fused_unavailable("auto", dtype="bfloat16", head_size=head_size,
                                             dropout_rate=0.0, xla=True)
  assert (reason is None) is fused, reason
  if not fused:
    assert reason == f"head size {head_size} is not a multiple of 8 up to 128"


def test_auto_takes_the_kernel_where_it_applies(fake_gpu):
  # Training with attention dropout 0, and inference whatever the config's dropout.
  calls = _custom_calls_with_layouts(_hlo(_config()))
  assert len(calls) == 2 * L
  # In cudnn_btnh's layout (checked on an H100, fewer transposes than cudnn's).
  assert calls == _custom_calls_with_layouts(_hlo(_config(attention_implementation="cudnn_btnh")))
  assert calls != _custom_calls_with_layouts(_hlo(_config(attention_implementation="cudnn")))
  hlo = _hlo(_config(attention_probs_dropout_prob=0.1), training=False)
  assert len([c for c in _custom_calls(hlo) if c[0] == "__cudnn$fmhaSoftmax"]) == L


def test_auto_on_cpu_is_the_plain_path_bit_for_bit():
  ids, mask = _inputs()
  results = []
  for implementation in ("auto", "xla"):
    keras.utils.set_random_seed(0)
    model = BertModel(_config(attention_implementation=implementation,
                              attention_probs_dropout_prob=0.1), dtype="mixed_bfloat16")
    set_dropout_rng(model, "hash")  # what the training loop picks under XLA (fast on CPU)
    loss, grads = _step(model)(ids, mask)
    results.append([loss.numpy()] + [tf.convert_to_tensor(g).numpy() for g in grads
                                      if g is not None])
  for a, b in zip(*results):
    np.testing.assert_array_equal(a, b)


def test_forced_cudnn_without_gpu_is_a_one_line_error():
  with pytest.raises(Exception, match="no GPU of compute capability 8.0"):
    _hlo(_config(attention_implementation="cudnn"))
  config = _config(attention_implementation="cudnn")
  with pytest.raises(BertTfError, match=r"^--attention_implementation=cudnn: .*no GPU[^\n]*$"):
    fused_attention.check_training(config, "bfloat16", True)


def test_a_gpu_older_than_ampere_is_visible_but_gets_no_fused_kernel(monkeypatch):
  """cuDNN's flash attention needs compute capability 8.0 or newer: a T4 (7.5) is a GPU for
  the model's other GPU-only choices, not for the kernel; one Ampere among them is enough."""
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((7, 5),))
  assert placement.gpu_visible() and not fused_attention.gpu_supports_fused_attention()
  assert fused_attention.fused_unavailable("auto", dtype="bfloat16", head_size=64,
                                           dropout_rate=0.0, xla=True) == (
      "no GPU of compute capability 8.0 or newer is visible")
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ((7, 5), (8, 0)))
  assert fused_attention.fused_unavailable("auto", dtype="bfloat16", head_size=64,
                                           dropout_rate=0.0, xla=True) is None
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", ())
  assert not placement.gpu_visible() and not fused_attention.gpu_supports_fused_attention()
  # Read from TensorFlow's devices where not set: one (major, minor) per GPU.
  monkeypatch.setattr(placement, "_GPU_CAPABILITIES", None)
  assert len(placement.gpu_capabilities()) == len(tf.config.list_physical_devices("GPU"))
  assert all(len(capability) == 2 for capability in placement.gpu_capabilities())


@pytest.mark.parametrize("config,dtype,jit,reason", [
    (dict(), "float32", True, "the compute dtype is float32"),
    (dict(), "bfloat16", False, r"not XLA-compiled \(--nojit_compile\)"),
    (dict(attention_probs_dropout_prob=0.1), "bfloat16", True,
     "attention dropout is on .0.1.; set attention_probs_dropout_prob to 0"),
    (dict(hidden_size=N * 12), "bfloat16", True, "head size 12 is not a multiple of 8"),
])
def test_forced_cudnn_errors_before_training(fake_gpu, config, dtype, jit, reason):
  c = _config(attention_implementation="cudnn", **config)
  with pytest.raises(BertTfError, match=reason):
    fused_attention.check_training(c, dtype, jit)
  fused_attention.check_training(dataclasses.replace(c, attention_implementation="auto"), dtype,
                                 jit)  # auto falls back silently


def test_config_field_is_validated_and_never_written(tmp_path):
  with pytest.raises(BertTfError, match="attention_implementation must be one of"):
    _config(attention_implementation="flash")
  path = tmp_path / "bert_config.json"
  _config(attention_implementation="cudnn").to_json_file(str(path))
  plain = tmp_path / "plain.json"
  _config().to_json_file(str(plain))
  assert path.read_bytes() == plain.read_bytes()
  assert "attention_implementation" not in json.loads(path.read_text())
