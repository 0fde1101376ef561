"""cuDNN's fused (flash) attention on a GPU, reached from TensorFlow through XLA custom calls.

Shape legend: B = batch, N = heads, F = "from" (query) length, T = "to" (key) length,
D = head size (H / N).

JAX (``jax/_src/cudnn/fused_attention_stablehlo.py``) reaches cuDNN's flash attention by
emitting XLA custom calls named ``__cudnn$fmhaSoftmax`` / ``__cudnn$fmhaSoftmaxBackward`` with
a JSON ``cudnn_fmha_backend_config``; TensorFlow emits the same from inside ``jit_compile``
with ``custom_call_v2``. ``cudnn_attention`` does it: BNTH layout (q, k, v and every result in
XLA's default layout, which ``custom_call_v2`` assumes), cuDNN's PADDING mask from per-sequence
lengths, and ``tf.custom_gradient`` handing the forward call's softmax statistics ([B,N,F]
float32) to the backward call. The kernel never writes the ``[B,N,F,T]`` scores.

``attention_implementation`` (a ``BertConfig`` field, the training scripts' flag) chooses:

  ``xla``    the plain path: scores, float32 softmax, dropout, context as separate ops (the
             original's numbers; the probabilities and the mask kept for the backward pass).
  ``xla_recompute``  as ``xla``, except in training with attention dropout and the "hash"
             dropout masks (what the training loop picks under ``jit_compile``): the
             backward pass recomputes the attention (the q·kᵀ product, the softmax, the
             mask) instead of keeping its ``[B,N,F,T]`` tensors (``layers.
             attention_recomputed``; the same forward numbers, gradients equal to float32
             rounding). Opt-in, a trade of time for memory: on XLA's compile for an H100,
             BERT-Large phase 2 plans half the temporary memory (14.7 GiB instead of 29.4)
             for 12% more bytes moved (BENCHMARKS.md); its time is for a GPU to measure.
  ``cudnn``  the fused kernel on the [B,N,S,D] layout (q, k, v from one GEMM, transposed);
             a ``BertTfError`` where it cannot run (``fused_unavailable``).
  ``auto``   the fused kernel where it can run and nothing is lost, in ``cudnn_btnh``'s
             layout: a GPU of compute capability 8.0 or newer, inside an XLA computation
             (``jit_compile``), a 16-bit compute dtype, head size <= 128 and a multiple of 8,
             static shapes, attention probabilities not asked for, and no attention dropout in
             this call (inference, or training with ``attention_probs_dropout_prob`` 0).
             Elsewhere ``xla``.
  ``cudnn_btnh``  the kernel (a one-line error where it cannot run, as ``cudnn``), with q, k,
             v, the output and their gradients in the hidden stream's own [B,S,N,D] layout
             (``cudnn_attention_btnh``; the layer computes q, k and v as three GEMMs): no
             layout copies around the kernel. On an H100 (2026-11-28) its loss and gradients
             inside a 4-layer BERT matched the plain path's to bf16 rounding
             (bench/check_fused_attention.py --model=small --fused=cudnn_btnh) and a
             BERT-Large update spent 9.3 ms in transposes, 11.3 with ``cudnn``'s
             layout on earlier H100s.
  ``cudnn_dropout``  as ``cudnn``, also where attention dropout is on, with cuDNN's own
             dropout inside the kernel (``__cudnn$fmhaSoftmaxDropout``). Experimental: it
             crashed the process on both GPUs tried (H200, H100; README), its masks
             come from cuDNN's generator seeded by a constant, and nothing here has seen it run.

What the fused kernel changes from the plain path (both compute in the 16-bit dtype with
float32 softmax statistics, so the outputs agree to 16-bit rounding, not bit for bit):
  - the mask: keys at positions >= the sequence's length get probability 0 (the plain path
    adds -10000 to their scores, which underflows to the same 0 in float32). The length is
    the number of attended positions of the mask, so the kernel assumes each row of
    ``input_mask`` is a prefix of ones then zeros, as every bert_tf input pipeline writes it;
    a mask with holes (ones after a zero) is read as the prefix of the same length: use
    ``attention_implementation="xla"`` for such masks. A row of all zeros gives an output of
    zeros (the plain path: a uniform average over the keys).
  - query rows at padding positions are computed as in the plain path (every query attends to
    the valid keys), so padding positions of ``sequence_output`` keep their meaningless but
    finite values.
"""

import contextlib
import json
import math

import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.modeling.config import ATTENTION_IMPLEMENTATIONS as IMPLEMENTATIONS
from bert_tf.modeling.placement import gpu_capabilities, in_xla_computation

_FORWARD = "__cudnn$fmhaSoftmax"
_BACKWARD = "__cudnn$fmhaSoftmaxBackward"
_FORWARD_DROPOUT = "__cudnn$fmhaSoftmaxDropout"
_BACKWARD_DROPOUT = "__cudnn$fmhaSoftmaxDropoutBackward"
MAX_HEAD_SIZE = 128
# Seed of cuDNN's dropout generator (a compile-time constant of the backend config, as in JAX).
DROPOUT_SEED = 42
_ELEMENT_TYPES = {tf.bfloat16: "BF16", tf.float16: "F16"}


def _dot_dims(lhs_contracting, rhs_contracting, lhs_batch=(0, 1), rhs_batch=(0, 1)):
  """One GEMM of the kernel: its contracting and batch dimensions (B and N) on each side
  (BNTH operands: (0,1) on both; a BTNH operand: (0,2))."""
  return {"lhs_contracting_dimensions": [str(lhs_contracting)],
          "rhs_contracting_dimensions": [str(rhs_contracting)],
          "lhs_batch_dimensions": [str(d) for d in lhs_batch],
          "rhs_batch_dimensions": [str(d) for d in rhs_batch]}


# The kernel's GEMMs over q, k, v, out and d_out in either layout; P and dP are [B,N,F,T].
_DIMS = {
    "bnth": dict(bmm1_dot_dimension_numbers=_dot_dims(3, 3),  # q k^T -> scores [B,N,F,T]
                 bmm2_dot_dimension_numbers=_dot_dims(3, 2),  # P v -> out [B,N,F,D]
                 bmm1_grad_gemm1_dot_dimension_numbers=_dot_dims(2, 2),  # dP^T q -> dk
                 bmm1_grad_gemm2_dot_dimension_numbers=_dot_dims(3, 2),  # dP k -> dq
                 bmm2_grad_gemm1_dot_dimension_numbers=_dot_dims(2, 2),  # P^T dO -> dv
                 bmm2_grad_gemm2_dot_dimension_numbers=_dot_dims(3, 3)),  # dO v^T -> dP
    "btnh": dict(bmm1_dot_dimension_numbers=_dot_dims(3, 3, (0, 2), (0, 2)),
                 bmm2_dot_dimension_numbers=_dot_dims(3, 1, (0, 1), (0, 2)),
                 bmm1_grad_gemm1_dot_dimension_numbers=_dot_dims(2, 1, (0, 1), (0, 2)),
                 bmm1_grad_gemm2_dot_dimension_numbers=_dot_dims(3, 1, (0, 1), (0, 2)),
                 bmm2_grad_gemm1_dot_dimension_numbers=_dot_dims(2, 1, (0, 1), (0, 2)),
                 bmm2_grad_gemm2_dot_dimension_numbers=_dot_dims(3, 3, (0, 2), (0, 2))),
}
_FORWARD_DIMS = ("bmm1_dot_dimension_numbers", "bmm2_dot_dimension_numbers")


def backend_config(batch, heads, from_length, to_length, dtype, scale, dropout_rate,
                   backward, seed=DROPOUT_SEED, qkv_layout="bnth"):
  """The custom call's JSON backend config (``cudnn_fmha_backend_config``), as JAX writes it
  for a PADDING mask and the BNTH or BTNH ``qkv_layout`` of q, k, v (and of d_out, out)."""
  layout = {"dim_level_types": [], "dim_unique": [], "dim_ordered": [],
            "minor_to_major": ["3", "2", "1", "0"], "tiles": [], "element_size_in_bits": "0",
            "memory_space": "0", "index_primitive_type": "PRIMITIVE_TYPE_INVALID",
            "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID",
            "dynamic_shape_metadata_prefix_bytes": "0"}
  config = {
      "algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH",
                    "tuning_knobs": {"17": "1", "24": "0"}, "is_cudnn_frontend": True,
                    "workspace_size": "0"},
      "fmha_scale": float(scale),
      "dropout_rate": float(dropout_rate),
      # The [B,N,F,T] scores the kernel never writes.
      "intermediate_tensor_shape": {
          "element_type": _ELEMENT_TYPES[tf.as_dtype(dtype)],
          "dimensions": [str(batch), str(heads), str(from_length), str(to_length)],
          "tuple_shapes": [], "layout": layout, "is_dynamic_dimension": [False] * 4},
      "seed": int(seed),
      "is_flash_attention": True,
      "mask_type": "PADDING",
      "sliding_window_length": 0,
  }
  config.update({key: dims for key, dims in _DIMS[qkv_layout].items()
                 if (key in _FORWARD_DIMS) != backward})
  return json.dumps({"operation_queue_id": "0", "wait_on_operation_queues": [],
                     "cudnn_fmha_backend_config": config})


def cudnn_attention(q, k, v, key_lengths, dropout_rate=0.0):
  """softmax(q k^T / sqrt(D), keys < ``key_lengths``) v as cuDNN's fused kernel, with its
  gradient; call only inside an XLA computation on a GPU (``fused_unavailable``).

  Args:
    q: [B,N,F,D], k and v: [B,N,T,D], bfloat16 or float16, static shapes.
    key_lengths: [B] int32, attended keys of each sequence (a prefix of its T positions).
    dropout_rate: > 0 uses cuDNN's dropout inside the kernel (``cudnn_dropout``).
  Returns:
    [B,N,F,D] in q's dtype.
  """
  from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
  batch, heads, from_length, head_size = q.shape.as_list()
  to_length = k.shape[2]
  dtype = q.dtype
  scale = 1.0 / math.sqrt(float(head_size))
  forward_name, backward_name = ((_FORWARD_DROPOUT, _BACKWARD_DROPOUT) if dropout_rate
                                 else (_FORWARD, _BACKWARD))
  config = lambda backward: backend_config(  # noqa: E731
      batch, heads, from_length, to_length, dtype, scale, dropout_rate, backward)
  # Every query row is computed (as the plain path does); keys past the length are masked.
  query_lengths = tf.fill([batch], tf.constant(from_length, tf.int32))
  key_lengths = tf.cast(key_lengths, tf.int32)
  workspace = tf.TensorSpec([0], tf.uint8)

  # The backward call is traced outside this name scope; it re-enters it, so that its HLO
  # metadata names the layer (bench/hlo_census.py counts it there).
  scope = tf.get_current_name_scope()

  @tf.custom_gradient
  def attend(q, k, v):
    out, stats, _ = xla.custom_call_v2(
        forward_name, [q, k, v, query_lengths, key_lengths],
        [tf.TensorSpec(q.shape, dtype), tf.TensorSpec([batch, heads, from_length], tf.float32),
         workspace],
        backend_config=config(False))  # out [B,N,F,D], softmax statistics [B,N,F]

    def grad(d_out):
      with tf.name_scope(scope + "/") if scope else contextlib.nullcontext():
        dq, dk, dv, _ = xla.custom_call_v2(
            backward_name,
            [q, k, v, stats, tf.cast(d_out, dtype), out, query_lengths, key_lengths],
            [tf.TensorSpec(q.shape, dtype), tf.TensorSpec(k.shape, dtype),
             tf.TensorSpec(v.shape, dtype), workspace],
            backend_config=config(True))
      return dq, dk, dv

    return out, grad

  return attend(q, k, v)


# === The BTNH layout through XlaCallModule (attention_implementation="cudnn_btnh") ===
#
# ``custom_call_v2`` gives every result XLA's default layout, so q, k, v and every result are
# BNTH above and the layer transposes around the kernel (the GPU's module: 4-5 layout copies of
# [B,S,H] per layer). JAX reaches the kernel with q, k, v in the hidden stream's own BTNH
# layout ([B,S,N,D], a view of [B*S,H]): the GEMMs' batch dimensions say where B and N are,
# and the results are declared [B,N,F,D] with layout {3,1,2,0} (physically [B,F,N,D]), so the
# transpose back is a bitcast. TensorFlow sets result layouts only through ``XlaCallModule``,
# which takes a StableHLO module: ``_custom_call_module`` writes one around the call.

_MLIR_TYPES = {tf.bfloat16: "bf16", tf.float16: "f16", tf.float32: "f32", tf.int32: "i32",
               tf.uint8: "ui8"}
_BTNH_RESULT_LAYOUT = (3, 1, 2, 0)  # [B,N,F,D] stored as [B,F,N,D]


def _mlir_type(shape, dtype):
  return "tensor<" + "".join(f"{d}x" for d in shape) + _MLIR_TYPES[tf.as_dtype(dtype)] + ">"


def _mlir_layout(minor_to_major):
  return (f"dense<[{', '.join(str(d) for d in minor_to_major)}]> : "
          f"tensor<{len(minor_to_major)}xindex>")


def _default_layout(shape):
  return tuple(range(len(shape) - 1, -1, -1))


def _custom_call_module(target, operands, results, config, name):
  """StableHLO text of a module whose ``main`` calls the custom call ``target``.

  Args:
    operands: (shape, dtype) of each operand, in XLA's default layout.
    results: (shape, dtype, minor_to_major, returned) of each result: ``returned`` None
      drops it (the workspace), True returns it as it is, a permutation returns it transposed
      (a bitcast when the layout already stores it in that order).
    config: the JSON backend config. name: the call's HLO ``op_name`` (bench/hlo_census.py
      attributes kernels to layers by it).
  """
  types = [_mlir_type(shape, dtype) for shape, dtype in operands]
  call_types = [_mlir_type(shape, dtype) for shape, dtype, _, _ in results]
  args = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(types))
  escaped = config.replace("\\", "\\\\").replace('"', '\\"')
  lines = [
      f'    %0:{len(results)} = stablehlo.custom_call @"{target}"('
      + ", ".join(f"%arg{i}" for i in range(len(types))) + ") {api_version = 2 : i32, "
      f'backend_config = "{escaped}", operand_layouts = ['
      + ", ".join(_mlir_layout(_default_layout(shape)) for shape, _ in operands)
      + "], result_layouts = ["
      + ", ".join(_mlir_layout(layout) for _, _, layout, _ in results)
      + f"]}} : ({', '.join(types)}) -> ({', '.join(call_types)}) loc({json.dumps(name)})"]
  returned, returned_types = [], []
  for i, (shape, dtype, _, how) in enumerate(results):
    if how is None:
      continue
    if how is True:
      returned.append(f"%0#{i}")
      returned_types.append(call_types[i])
      continue
    out_type = _mlir_type([shape[d] for d in how], dtype)
    lines.append(f"    %t{i} = stablehlo.transpose %0#{i}, dims = [{', '.join(map(str, how))}]"
                 f" : ({call_types[i]}) -> {out_type}")
    returned.append(f"%t{i}")
    returned_types.append(out_type)
  lines.append(f"    return {', '.join(returned)} : {', '.join(returned_types)}")
  return ("module @cudnn_fmha attributes {mhlo.num_partitions = 1 : i32, "
          "mhlo.num_replicas = 1 : i32} {\n"
          f"  func.func public @main({args}) -> ({', '.join(returned_types)}) {{\n"
          + "\n".join(lines) + "\n  }\n}\n")


def _call_module(args, text, outputs):
  """Runs the module ``text`` on ``args`` inside the XLA computation being traced:
  ``outputs`` are the returned (shape, dtype)s."""
  from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
  return xla.call_module(
      args, version=9, module=text.encode(), Tout=[dtype for _, dtype in outputs],
      Sout=[tf.TensorShape(shape) for shape, _ in outputs], platforms=["CUDA"],
      # Traced for a GPU on any host (bench/hlo_census.py lowers on a CPU).
      disabled_checks=[xla.call_module_disable_check_platform()])


def cudnn_attention_btnh(q, k, v, key_lengths):
  """``cudnn_attention`` on the hidden stream's own layout, with no layout copy around it.

  Args:
    q: [B,F,N,D], k and v: [B,T,N,D] (views of [B*S,H]), bfloat16 or float16, static shapes.
    key_lengths: [B] int32.
  Returns:
    [B,F,N,D] in q's dtype (a view of [B*F,H]).
  """
  batch, from_length, heads, head_size = q.shape.as_list()
  to_length = k.shape[1]
  dtype = q.dtype
  config = lambda backward: backend_config(  # noqa: E731
      batch, heads, from_length, to_length, dtype, 1.0 / math.sqrt(float(head_size)), 0.0,
      backward, qkv_layout="btnh")
  query_lengths = tf.fill([batch], tf.constant(from_length, tf.int32))
  key_lengths = tf.cast(key_lengths, tf.int32)
  q_shape, kv_shape = [batch, from_length, heads, head_size], [batch, to_length, heads, head_size]
  lengths = [([batch], tf.int32)] * 2
  stored = lambda shape: [shape[0], shape[2], shape[1], shape[3]]  # noqa: E731
  to_btnh = (0, 2, 1, 3)
  workspace = ([0], tf.uint8, (0,), None)
  scope = tf.get_current_name_scope()

  @tf.custom_gradient
  def attend(q, k, v):
    text = _custom_call_module(
        _FORWARD, [(q_shape, dtype), (kv_shape, dtype), (kv_shape, dtype)] + lengths,
        [(stored(q_shape), dtype, _BTNH_RESULT_LAYOUT, to_btnh),
         ([batch, heads, from_length], tf.float32, (2, 1, 0), True), workspace],
        config(False), f"{scope}/fmha")
    out, stats = _call_module([q, k, v, query_lengths, key_lengths], text,
                              [(q_shape, dtype), ([batch, heads, from_length], tf.float32)])

    def grad(d_out):
      with tf.name_scope(scope + "/") if scope else contextlib.nullcontext():
        text = _custom_call_module(
            _BACKWARD,
            [(q_shape, dtype), (kv_shape, dtype), (kv_shape, dtype),
             ([batch, heads, from_length], tf.float32), (q_shape, dtype), (q_shape, dtype)]
            + lengths,
            [(stored(q_shape), dtype, _BTNH_RESULT_LAYOUT, to_btnh),
             (stored(kv_shape), dtype, _BTNH_RESULT_LAYOUT, to_btnh),
             (stored(kv_shape), dtype, _BTNH_RESULT_LAYOUT, to_btnh), workspace],
            config(True), f"{scope}/fmha_backward")
        dq, dk, dv = _call_module(
            [q, k, v, stats, tf.cast(d_out, dtype), out, query_lengths, key_lengths], text,
            [(q_shape, dtype), (kv_shape, dtype), (kv_shape, dtype)])
      return dq, dk, dv

    return out, grad

  return attend(q, k, v)


def key_lengths_from_adder(attention_adder):
  """``[B,1,1,T]`` adder (0 attended, -10000 padding) -> ``[B]`` int32 attended keys."""
  attended = tf.cast(attention_adder[:, 0, 0, :] > -5000.0, tf.int32)  # [B,T]
  return tf.reduce_sum(attended, axis=-1)


# === Where the kernel can run ===

def gpu_supports_fused_attention():
  """Whether this process sees a GPU on which cuDNN's flash attention runs (compute
  capability 8.0 or newer: Ampere, Hopper, ...)."""
  return any(capability >= (8, 0) for capability in gpu_capabilities())


def fused_unavailable(implementation, *, dtype, head_size, dropout_rate, shapes_static=True,
                      want_probs=False, xla=None):
  """Why the fused kernel cannot serve this attention call under ``implementation``
  (a sentence), or None when it can. ``dropout_rate``: the attention dropout of this call
  (0 when not training); ``xla``: whether it runs in an XLA computation (None: the one being
  traced, ``in_xla_computation``)."""
  if not gpu_supports_fused_attention():
    return "no GPU of compute capability 8.0 or newer is visible"
  if not (in_xla_computation() if xla is None else xla):
    return "the model does not run inside an XLA computation (jit_compile)"
  if tf.as_dtype(dtype) not in _ELEMENT_TYPES:
    return f"the compute dtype is {tf.as_dtype(dtype).name}, not bfloat16 or float16"
  if head_size > MAX_HEAD_SIZE or head_size % 8:
    return f"head size {head_size} is not a multiple of 8 up to {MAX_HEAD_SIZE}"
  if not shapes_static:
    return "the batch size or sequence length is not known when the model is traced"
  if want_probs:
    return "attention probabilities were asked for (the kernel never forms them)"
  if dropout_rate and implementation != "cudnn_dropout":
    return (f"attention dropout is on ({dropout_rate}); set attention_probs_dropout_prob to 0 "
            "or use attention_implementation=cudnn_dropout (experimental)")
  return None


def use_fused(implementation, **conditions):
  """Whether an attention call takes the fused kernel: never for ``xla``/``xla_recompute``;
  where it can run for ``auto``; always for ``cudnn``/``cudnn_btnh``/``cudnn_dropout``, which
  raise a ``BertTfError`` naming the reason where it cannot. ``conditions``: those of
  ``fused_unavailable``."""
  if implementation not in IMPLEMENTATIONS:
    raise BertTfError(f"attention_implementation must be one of {', '.join(IMPLEMENTATIONS)}, "
                      f"got {implementation!r}")
  if implementation in ("xla", "xla_recompute"):
    return False
  reason = fused_unavailable(implementation, **conditions)
  if reason is None:
    return True
  if implementation == "auto":
    return False
  raise BertTfError(f"attention_implementation={implementation}: cuDNN's fused attention "
                    f"cannot run here: {reason}")


def check_training(config, compute_dtype, jit_compile):
  """Before a training step is traced: a one-line ``BertTfError`` where a forced
  ``attention_implementation`` (``cudnn``, ``cudnn_btnh``, ``cudnn_dropout``) of ``config``
  cannot serve it.
  (The same check inside the traced model reaches the user wrapped in tracing context.)"""
  implementation = getattr(config, "attention_implementation", "auto")
  if implementation not in ("cudnn", "cudnn_btnh", "cudnn_dropout"):
    return
  reason = fused_unavailable(implementation, dtype=compute_dtype, head_size=config.head_size,
                             dropout_rate=config.attention_probs_dropout_prob,
                             xla=bool(jit_compile))
  if reason:
    if "jit_compile" in reason:
      reason = "the train step is not XLA-compiled (--nojit_compile)"
    raise BertTfError(f"--attention_implementation={implementation}: cuDNN's fused attention "
                      f"cannot run the training step: {reason}")
