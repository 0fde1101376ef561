"""bench/hlo_census.py: its HLO parser on a hand-written module, and the census of the real
XLA training step of a 1-layer model pinned to what the model's structure allows."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))

import hlo_census  # noqa: E402  pylint: disable=wrong-import-position

# B=2, N=3, S=4: a [2,3,4,4] transpose in layer_1 reached through its fusion's metadata, a
# bf16 [2,4,3,5] transpose of layer_0 whose fusion writes only a [2,4,1,5] slice, a dot of
# layer_0, a materialized f32 [6,4,4] ([B*N,S,S]) tensor and one in a fused computation (not
# materialized, not counted).
_MODULE = """HloModule m

%fused_computation (param_0: f32[2,3,4,4]) -> f32[2,3,4,4] {
  %param_0 = f32[2,3,4,4]{3,2,1,0} parameter(0)
  ROOT %transpose.1 = f32[2,3,4,4]{3,2,1,0} transpose(%param_0), dimensions={0,1,3,2}
}

%fused_computation.1 (param_0.1: bf16[2,3,4,5]) -> bf16[2,4,1,5] {
  %param_0.1 = bf16[2,3,4,5]{3,2,1,0} parameter(0)
  %transpose.2 = bf16[2,4,3,5]{3,2,1,0} transpose(%param_0.1), dimensions={0,2,1,3}
  %exp.1 = f32[2,3,4,4]{3,2,1,0} exponential(%param_0.1)
  ROOT %slice.1 = bf16[2,4,1,5]{3,2,1,0} slice(%transpose.2), slice={[0:2], [0:4], [0:1], [0:5]}
}

ENTRY %main (a: f32[2,3,4,4], b: bf16[2,3,4,5], c: f32[6,4,4]) -> f32[2,3,4,4] {
  %a = f32[2,3,4,4]{3,2,1,0} parameter(0)
  %b = bf16[2,3,4,5]{3,2,1,0} parameter(1)
  %c = f32[6,4,4]{2,1,0} parameter(2)
  %dot.1 = f32[6,4,4]{2,1,0} dot(%c, %c), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, metadata={op_type="Einsum" op_name="model/bert/layer_0/self/einsum"}
  %fusion.1 = bf16[2,4,1,5]{3,2,1,0} fusion(%b), kind=kLoop, calls=%fused_computation.1, metadata={op_name="gradient_tape/model/bert/layer_0_1/self/Reshape"}
  ROOT %fusion = f32[2,3,4,4]{3,2,1,0} fusion(%a), kind=kInput, calls=%fused_computation, metadata={op_type="AddV2" op_name="model/bert/layer_1/self/add"}
}
"""


def test_parser_counts_a_hand_written_module():
  counts = hlo_census.parse_hlo_text(_MODULE, (2, 3, 4))
  assert dict(counts["layer_0"]) == {"dots": 1, "fusions": 1, "transposes": 1,
                                     "transpose_bytes": 2 * 4 * 1 * 5 * 2, "f32_bnss": 1,
                                     "bnss_writes": 1, "bnss_bytes": 6 * 4 * 4 * 4}
  assert dict(counts["layer_1"]) == {"fusions": 1, "transposes": 1, "bnss_transposes": 1,
                                     "transpose_bytes": 2 * 3 * 4 * 4 * 4, "f32_bnss": 1,
                                     "bnss_writes": 1, "bnss_fusions": 1,
                                     "bnss_bytes": 2 * 3 * 4 * 4 * 4}
  assert not +counts["other"]  # parameters only: nothing counted


# B=2, S=4, H=6: a materialized f32 [B,S,H], a bf16 [B*S,H] and an f32 [B,S,H] member of a
# multi-output fusion's result count; a [B,S,H] inside a fused computation and a parameter do
# not.
_BSH_MODULE = """HloModule m

%fused_computation (p: f32[2,4,6]) -> (f32[2,4,6], bf16[2,4,6]) {
  %p = f32[2,4,6]{2,1,0} parameter(0)
  %n = f32[2,4,6]{2,1,0} negate(%p)
  %c = bf16[2,4,6]{2,1,0} convert(%n)
  ROOT %t = (f32[2,4,6]{2,1,0}, bf16[2,4,6]{2,1,0}) tuple(%n, %c)
}

ENTRY %main (a: f32[2,4,6]) -> bf16[8,6] {
  %a = f32[2,4,6]{2,1,0} parameter(0)
  %e = f32[2,4,6]{2,1,0} exponential(%a), metadata={op_name="model/bert/layer_0/add"}
  %fusion = (f32[2,4,6]{2,1,0}, bf16[2,4,6]{2,1,0}) fusion(%e), kind=kLoop, calls=%fused_computation, metadata={op_name="model/bert/layer_0/LayerNorm/add"}
  %g = bf16[2,4,6]{2,1,0} get-tuple-element(%fusion), index=1
  ROOT %r = bf16[8,6]{1,0} reshape(%g)
}
"""


def test_largest_kernels_name_result_and_operand_bytes():
  kernels = hlo_census.largest_kernels(_MODULE, n=5)
  # dot.1: f32[6,4,4] result (384 B) and two f32[6,4,4] operands; %fusion: f32[2,3,4,4] in
  # and out; %fusion.1: bf16[2,4,1,5] (80 B) from bf16[2,3,4,5] (240 B). Parameters and the
  # fused computations' instructions are not kernels.
  assert [(k["name"], k["bytes"], k["part"]) for k in kernels] == [
      ("dot.1", 3 * 384, "layer_0"), ("fusion", 2 * 384, "layer_1"),
      ("fusion.1", 80 + 240, "layer_0")]
  assert hlo_census.largest_kernels(_MODULE, n=1)[0]["op"] == "dot"


def test_parser_counts_residual_shaped_tensors():
  counts = hlo_census.parse_hlo_text(_BSH_MODULE, (2, 1, 4), (2, 4, 6))
  assert counts["layer_0"]["f32_bsh"] == 2  # %e and the fusion's f32 member
  # The fusion's bf16 member and %r ([B*S,H], named by its operand through the
  # get-tuple-element, which itself does not count).
  assert counts["layer_0"]["f16_bsh"] == 2
  assert not counts["other"]["f16_bsh"] and not counts["other"]["f32_bsh"]


# B=2, N=1, S=3: [B,N,S,S] results written: a dot's f32 [2,3,3] ([B*N,S,S]), a forward
# fusion's bf16 member and pred member (tuple result), a backward fusion; not the parameter,
# nor the get-tuple-element, nor the [2,3,3] inside the fused computation.
_BNSS_MODULE = """HloModule m

%fused_computation (p: f32[2,3,3]) -> (bf16[2,1,3,3], pred[2,1,3,3]) {
  %p = f32[2,3,3]{2,1,0} parameter(0)
  %e = f32[2,3,3]{2,1,0} exponential(%p)
  %c = bf16[2,1,3,3]{3,2,1,0} convert(%e)
  %k = pred[2,1,3,3]{3,2,1,0} compare(%c, %c), direction=GE
  ROOT %t = (bf16[2,1,3,3]{3,2,1,0}, pred[2,1,3,3]{3,2,1,0}) tuple(%c, %k)
}

%fused_computation.1 (q: bf16[2,1,3,3]) -> f32[2,1,3,3] {
  %q = bf16[2,1,3,3]{3,2,1,0} parameter(0)
  ROOT %r = f32[2,1,3,3]{3,2,1,0} convert(%q)
}

ENTRY %main (a: f32[2,3,3]) -> f32[2,1,3,3] {
  %a = f32[2,3,3]{2,1,0} parameter(0)
  %dot = f32[2,3,3]{2,1,0} dot(%a, %a), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, metadata={op_name="m/layer_0/self/einsum"}
  %fusion = (bf16[2,1,3,3]{3,2,1,0}, pred[2,1,3,3]{3,2,1,0}) fusion(%dot), kind=kLoop, calls=%fused_computation, metadata={op_name="m/layer_0/self/Softmax"}
  %g = bf16[2,1,3,3]{3,2,1,0} get-tuple-element(%fusion), index=0
  ROOT %fusion.1 = f32[2,1,3,3]{3,2,1,0} fusion(%g), kind=kLoop, calls=%fused_computation.1, metadata={op_name="gradient_tape/m/layer_0/self/Cast"}
}
"""


def test_parser_counts_attention_shaped_writes():
  layer = hlo_census.parse_hlo_text(_BNSS_MODULE, (2, 1, 3))["layer_0"]
  assert layer["bnss_writes"] == 4
  assert layer["bnss_fusions"] == 1 and layer["bnss_fusions_bwd"] == 1
  assert layer["bnss_bytes"] == 18 * (4 + 2 + 1 + 4)


def test_buffer_assignment_summary():
  # The two summary lines of an H200's buffer assignment dump (../shared/perf/gpu-hlo-...).
  text = ("allocation 0: size 125018112, parameter 9, shape |f32[30522,1024]|\n"
          "Total bytes used: 5120576292 (4.77GiB)\n\n"
          "  Stack trace breakdown for peak usage: 4 794 445 920 bytes\n")
  assert hlo_census.parse_buffer_assignment(text) == {"allocated_bytes": 5120576292,
                                                      "peak_bytes": 4794445920}
  assert hlo_census.parse_buffer_assignment("BufferAssignment:\n") == {}


_GPU_EXCERPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                            "gpu_hlo_excerpt.txt")


def test_parser_reads_a_gpu_module():
  """Whole lines of an H200's optimized HLO of a BERT-Large update (B=128, S=128, H=1024,
  N=16; ../shared/perf/gpu-hlo-2026-11-25, the module and ENTRY headers shortened): a Triton
  GEMM fusion (its dot and two operand fusions nested in it), three cuBLAS GEMM custom calls
  with tuple results (output, workspace) and a transpose fusion."""
  with open(_GPU_EXCERPT, encoding="utf-8") as f:
    counts = hlo_census.parse_hlo_text(f.read(), (128, 16, 128), (128, 128, 1024))
  layer = counts["layer_0"]
  # GEMMs: the scores einsum's dot inside gemm_fusion_dot.8, and cuBLAS's dense_1 forward,
  # dense_3's two gradient products.
  assert layer["dots"] == 1 + 3
  # The transpose of the residual gradient [B,S,H] -> [S,H,B] named by its own op_name (the
  # fusion calling it is named AddN_16: "other").
  assert layer["transposes"] == 1 and layer["transpose_bytes"] == 128 * 1024 * 128 * 2
  # Fusions: the GEMM fusion in the entry computation, not its two nested operand fusions;
  # the transpose fusion counts under "other".
  assert layer["fusions"] == 1 and counts["other"]["fusions"] == 1
  # cuBLAS results [B*S,H] in bf16: dense_1's output and dense_3's input gradient.
  assert layer["f16_bsh"] == 2
  assert not layer.get("fmha_calls")


@pytest.fixture(scope="module")
def census():
  # A 1-layer bf16 model whose shapes cannot be confused: B=3, N=2, S=20, D=32, P=5, V=1200.
  return hlo_census.census(layers=1, hidden=64, heads=2, batch=3, seq=20, predictions=5,
                           vocab=1200, dtype="bfloat16")


def test_training_step_census(census):
  layer = census["layers"]["layer_0"]
  # GEMMs: q/k/v (one product over the three kernels), scores, context, attention output,
  # intermediate, output: 6 forward, and two per GEMM backward (input and weight gradients).
  assert layer["dots"] == 6 + 2 * 6
  # Layout copies: the attention's four tensors cross between token-major [B,S,..] and
  # head-major [B,N,S,D] once forward (q, k, v: the CPU backend fuses the one [3,B,N,S,D]
  # transpose into each of the three slices; context back) and their gradients once
  # backward (context gradient into the two layouts its two GEMMs read: dprobs = dctx v^T,
  # dv = probs^T dctx; dq/dk/dv back to [B,S,3,N,D], fused into the two GEMMs that read it;
  # one re-layout of k's gradient): 9. Before (commit 530d76c): 16, of which 2 transposed
  # the [B,N,S,S] scores.
  assert layer["transposes"] <= 9
  assert layer.get("bnss_transposes", 0) == 0
  # The masked-LM logits [B*P,V] and their gradient need no layout copy (before: 4).
  assert census["layers"]["other"].get("transposes", 0) == 0
  # Forward, backward, global norm, clipping and the optimizer: one XLA computation
  # (before: 11, the update one module per variable shape).
  assert len(census["modules"]) == 1
  assert not any(op in census["non_xla_ops"] for op in ("L2Loss", "AssignVariableOp"))
  # Under mixed_bfloat16 the residual stream between the layers (each LayerNorm's output) is
  # bf16 (tests/modeling/test_hidden_stream.py checks the dtype): materialized 16-bit [B,S,H]
  # tensors 6 -> 12 in all (layer 4 -> 8), float32 ones 30 -> 26 (before: the float32
  # residual stream). With the 2-D stream CPU's XLA keeps each LayerNorm's float32 input
  # sum for the backward instead of some bf16 copies: 16-bit 12 -> 11 (layer 8 -> 5), float32
  # 26 -> 31; on a GPU's compile of BERT-Large the 2-D stream moves 0.4 GB less per layer
  # (BENCHMARKS.md, "Compiled for a GPU without one").
  assert layer["f16_bsh"] >= 5
  assert census["total"]["f32_bsh"] <= 31
