"""HLO census of one training step: what XLA turns the BERT train step into, countable on CPU.

Compiles the real training step (``training.loop.Trainer`` with ``PretrainingTask`` and
Google's AdamWeightDecay, ``jit_compile=True``, one update per host call) with

  XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"

in a child process (XLA reads its flags once, at start), then reads the optimized HLO
(``*after_optimizations.txt``) and counts, per encoder layer and in total:

  transposes        ``transpose`` instructions (inside fusions too) and the bytes they move
                    (output size; a layout copy reads and writes that much);
  dots              GEMMs: ``dot`` instructions (CPU; on a GPU the dots XLA leaves inside
                    Triton ``gemm_fusion``s) and cuBLAS GEMM custom calls (a GPU's
                    ``__cublas$gemm`` / ``__cublas$lt$matmul``);
  fmha calls        cuDNN fused-attention custom calls (``__cudnn$fmha...``, forward and
                    backward; ``attention_implementation``);
  fusions           ``fusion`` instructions in the entry/loop computations (not those nested
                    in a fused computation, such as a Triton GEMM's operand fusions);
  f32 BNSS          float32 tensors of ``B*N*S*S`` elements (attention scores/probabilities
                    and their gradients kept in float32);
  BNSS writes       materialized ``[B,N,S,S]`` results of any dtype (the ``pred`` dropout
                    mask included): how many (``bnss_writes``), how many of them are fusions,
                    forward and backward (``bnss_fusions``, ``bnss_fusions_bwd``: op_name
                    under ``gradient_tape/``), and their bytes (``bnss_bytes``);
  peak bytes        XLA's buffer assignment of the module (``*buffer-assignment.txt``): the
                    peak of its live buffers and the total it allocates (``peak_bytes``,
                    ``allocated_bytes``; summed over the modules);
  f32/16-bit BSH    materialized tensors of ``[B,S,H]`` / ``[B*S,H]`` shape (the residual
                    stream, LayerNorm outputs, projections and their gradients) in float32 and
                    in bf16/f16;
  largest kernels   (--top N) the kernels that name the most bytes, result plus operands:
                    where an update's memory traffic goes;
  modules           XLA modules compiled for the step (1 = the whole update in one computation);
  TF ops outside    TensorFlow ops of the step's graph not inside an XLA cluster (counted on
                    the traced step's graph: ops of the outer function that are not the
                    compiled calls, the loop's own bookkeeping included).

An instruction belongs to encoder layer i when its ``op_name`` metadata names ``layer_i/``
(forward and gradient ops both carry it); the rest is "other" (embeddings, heads, loss,
optimizer). The CPU backend keeps bf16 dots in float32, so dtypes are CPU's; shapes and
transposes are what the GPU compile starts from too.

Shape legend: B = batch, S = sequence length, N = heads, P = masked positions, V = vocab.

Run (BERT-Base shapes cut to 2 layers, batch 8, seq 128, 20 masks, mixed_bfloat16; about a
minute on 2 CPU cores):

  .venv/bin/python bench/hlo_census.py
  .venv/bin/python bench/hlo_census.py --layers=1 --hidden=64 --heads=2 --seq=32  # tiny

or compile it for a GPU without one (bench/gpu_compile_deviceless.py; ``make gpu-compiler``):

  .venv/bin/python bench/hlo_census.py --gpu=h100 --layers=2 --hidden=1024 --heads=16 \
      --batch=128 --seq=128 --top=20

or read a dump made elsewhere (a GPU's ``--xla_dump_to``), naming its shapes:

  .venv/bin/python bench/hlo_census.py --from_dump=DIR --batch=128 --seq=128 --hidden=1024 \
      --heads=16
"""

import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A Python with jax[cuda12] (make gpu-compiler): compiles for a GPU without one (--gpu).
GPU_PYTHON = os.path.join(_ROOT, ".venv-gpu-compiler", "bin", "python")

BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "pred": 1,
         "s8": 1, "u8": 1, "f64": 8}

# `%name = f32[8,12,128,128]{3,2,1,0} transpose(...)`; tuple results are skipped.
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]"
    r"(?:\{[^}]*\})?\s+(?P<op>[\w\-]+)\(")
# `%name = (f32[8,128,768]{2,1,0}, bf16[8,128,768]{2,1,0}) fusion(...)`: a multi-output result.
_TUPLE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*\((?P<shapes>[^()]*)\)\s+"
                    r"(?P<op>[\w\-]+)\(")
_SHAPE = re.compile(r"(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_LAYER = re.compile(r"/layer_(\d+)(?:_\d+)?/")
_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_OPERANDS = re.compile(r"\s[\w\-]+\(([^)]*)\)")
_REF = re.compile(r"%([\w.\-]+)")
_CALLS = re.compile(r"(?:calls|to_apply)=([%\w.\-, ]+?)(?:,\s*\w+=|$)")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->.*\{\s*$")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
# Buffer assignment summaries: "Total bytes used: 5120576292 (4.77GiB)" and
# "Stack trace breakdown for peak usage: 4 794 445 920 bytes".
_ALLOCATED = re.compile(r"^Total bytes used: (\d+)", re.M)
_PEAK = re.compile(r"peak usage: ([\d ]+) bytes")
_NOT_WRITTEN = ("parameter", "get-tuple-element", "bitcast", "tuple", "while", "call",
                "conditional")
# A GPU's GEMMs that XLA hands to cuBLAS / cuBLASLt.
GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")
FMHA_PREFIX = "__cudnn$fmha"


def _by_computation(text):
  """(name of the computation it is in, line) for each line of HLO text that is not a
  computation's header (None before the first header)."""
  computation = None
  for line in text.splitlines():
    header = _COMPUTATION.match(line)
    if header:
      computation = header.group(1)
    else:
      yield computation, line


def _count_custom_call(line, counter):
  """A GEMM or fused-attention custom call adds to ``dots`` / ``fmha_calls``."""
  target = _TARGET.search(line)
  if not target:
    return
  if target.group(1) in GEMM_TARGETS:
    counter["dots"] += 1
  elif target.group(1).startswith(FMHA_PREFIX):
    counter["fmha_calls"] += 1


def _elements(dims):
  """Elements of a shape written ``8,128,768``."""
  n = 1
  for d in dims.split(","):
    if d:
      n *= int(d)
  return n


def _is_bnss(dims, bnss):
  """Whether ``dims`` (ints) is a [B,N,S,S] tensor in some order, or [B*N,S,S]."""
  b, n, s = bnss
  return sorted(dims) in (sorted([b, n, s, s]), sorted([b * n, s, s]))


def _is_bsh(dims, bsh):
  """Whether ``dims`` is a [B,S,H] tensor (in that order) or [B*S,H]."""
  b, s, h = bsh
  return list(dims) in ([b, s, h], [b * s, h])


def _count_bnss_write(counter, op, shapes, op_name, bnss):
  """A materialized result (``shapes``: [(dtype, dims)]) adds its [B,N,S,S] members to
  ``bnss_writes`` / ``bnss_bytes``, and a fusion to ``bnss_fusions`` (``_bwd`` when its
  op_name is a gradient's)."""
  if op in _NOT_WRITTEN:
    return
  members = [(dtype, dims) for dtype, dims in shapes if _is_bnss(dims, bnss)]
  if not members:
    return
  counter["bnss_writes"] += len(members)
  counter["bnss_bytes"] += sum(BYTES.get(dtype, 4) * _elements(",".join(map(str, dims)))
                               for dtype, dims in members)
  if op == "fusion":
    counter["bnss_fusions_bwd" if op_name.startswith("gradient_tape/") else "bnss_fusions"] += 1


def parse_hlo_text(text, bnss, bsh=None):
  """Counts in one optimized HLO module's text: {layer key: Counter}.

  ``bnss``: (B, N, S). Keys are ``"layer_0"``, ``"layer_1"``, ... and ``"other"``; each
  Counter has ``transposes``, ``transpose_bytes``, ``bnss_transposes`` (those of [B,N,S,S]
  tensors), ``dots``, ``fusions``, ``bnss_writes``/``bnss_fusions``/``bnss_fusions_bwd``/
  ``bnss_bytes`` (``_count_bnss_write``) and ``f32_bnss``
  (float32 results of shape [B,N,S,S] in any order, or [B*N,S,S], that are materialized:
  outside fused computations); with ``bsh`` = (B, S, H) also ``f32_bsh`` and ``f16_bsh``
  (materialized [B,S,H] or [B*S,H] results in float32 and in bf16/f16, members of a
  multi-output fusion's result included). An instruction without
  ``op_name`` metadata takes that of an operand (one naming a layer first), and inside fused
  computations that of the fusion that calls its computation. A transpose inside a fusion
  counts the bytes the fusion writes when they are fewer than its own (transpose then slice).
  """
  # Pass 1: each instruction's op_name, or (none in its metadata) its first operand's that
  # has one; then the op_name of the fusion (or call) that uses each computation.
  resolved, caller_op, fused, root_elements = {}, {}, set(), {}
  for computation, line in _by_computation(text):
    match = _DEFINITION.match(line)
    if not match:
      continue
    op_name = _OP_NAME.search(line)
    if op_name:
      resolved[match.group(1)] = op_name.group(1)
    else:
      operands = _OPERANDS.search(line)
      names = [resolved[r] for r in (_REF.findall(operands.group(1)) if operands else ())
               if resolved.get(r)]
      layered = [n for n in names if _LAYER.search(n)]
      if layered or names:
        resolved[match.group(1)] = (layered or names)[0]
    instruction = _INSTRUCTION.match(line)
    if instruction and line.lstrip().startswith("ROOT") and computation is not None:
      root_elements[computation] = _elements(instruction.group("dims"))
    calls = _CALLS.search(line)
    if calls:
      for callee in calls.group(1).split(","):
        callee = callee.strip().lstrip("%")
        if " fusion(" in line:
          fused.add(callee)
        if resolved.get(match.group(1)):
          caller_op.setdefault(callee, resolved[match.group(1)])
  counts = collections.defaultdict(collections.Counter)
  for computation, line in _by_computation(text):
    match = _INSTRUCTION.match(line)
    if not match:
      tuple_match = _TUPLE.match(line)
      if not tuple_match:
        continue
      op_name = resolved.get(tuple_match.group("name")) or caller_op.get(computation, "")
      layer = _LAYER.search(op_name)
      c = counts[f"layer_{layer.group(1)}" if layer else "other"]
      if tuple_match.group("op") == "custom-call":
        _count_custom_call(line, c)
      if computation not in fused:
        shapes = [(m.group("dtype"), [int(d) for d in m.group("dims").split(",") if d])
                  for m in _SHAPE.finditer(tuple_match.group("shapes"))]
        _count_bnss_write(c, tuple_match.group("op"), shapes, op_name, bnss)
      if bsh and computation not in fused and tuple_match.group("op") not in (
          "parameter", "tuple", "get-tuple-element", "while", "call", "conditional"):
        for shape in _SHAPE.finditer(tuple_match.group("shapes")):
          dims = [int(d) for d in shape.group("dims").split(",") if d]
          if _is_bsh(dims, bsh) and shape.group("dtype") in ("f32", "bf16", "f16"):
            c["f32_bsh" if shape.group("dtype") == "f32" else "f16_bsh"] += 1
      continue
    op_name = resolved.get(match.group("name")) or caller_op.get(computation, "")
    layer = _LAYER.search(op_name)
    key = f"layer_{layer.group(1)}" if layer else "other"
    op, dtype = match.group("op"), match.group("dtype")
    dims = [int(d) for d in match.group("dims").split(",") if d]
    elements = 1
    for d in dims:
      elements *= d
    c = counts[key]
    if op == "transpose":
      c["transposes"] += 1
      # Inside a fusion, only what the fusion writes is moved (a transpose followed by a
      # slice writes the slice).
      if computation in fused:
        elements = min(elements, root_elements.get(computation, elements))
      c["transpose_bytes"] += elements * BYTES.get(dtype, 4)
      if _is_bnss(dims, bnss):
        c["bnss_transposes"] += 1
    elif op == "dot":
      c["dots"] += 1
    elif op == "custom-call":
      _count_custom_call(line, c)
    elif op == "fusion" and computation not in fused:
      c["fusions"] += 1
    materialized = (computation not in fused
                    and op not in ("parameter", "get-tuple-element", "bitcast"))
    if computation not in fused:
      _count_bnss_write(c, op, [(dtype, dims)], op_name, bnss)
    if materialized and dtype == "f32" and _is_bnss(dims, bnss):
      c["f32_bnss"] += 1
    if materialized and bsh and _is_bsh(dims, bsh):
      if dtype == "f32":
        c["f32_bsh"] += 1
      elif dtype in ("bf16", "f16"):
        c["f16_bsh"] += 1
  return counts


_KERNEL = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\([^=]*?\)|\S+)\s+"
                     r"(?P<op>[\w\-]+)\((?P<operands>[^)]*)\)")
_NOT_KERNELS = ("parameter", "get-tuple-element", "bitcast", "tuple", "constant", "while",
                "call", "conditional", "opt-barrier")


def _shape_bytes(shape_text):
  return sum(_elements(m.group("dims")) * BYTES.get(m.group("dtype"), 4)
             for m in _SHAPE.finditer(shape_text))


def largest_kernels(text, n=20):
  """The ``n`` kernels of one optimized module that name the most bytes: each instruction of
  the entry (and other non-fused) computations that is not bookkeeping (parameters, tuples,
  bitcasts, ...), with its result's bytes plus its operands' (an upper bound on what it moves:
  a fusion may read only part of an operand). Returns [{"bytes", "name", "op", "shape",
  "part", "op_name"}], largest first; ``part`` is the layer key as in ``parse_hlo_text``."""
  sizes, fused, kernels = {}, set(), []
  for line in text.splitlines():
    calls = _CALLS.search(line)
    if calls and " fusion(" in line:
      fused.update(c.strip().lstrip("%") for c in calls.group(1).split(","))
  for computation, line in _by_computation(text):
    match = _KERNEL.match(line)
    if not match or computation in fused:
      continue
    sizes[match.group("name")] = _shape_bytes(match.group("shape"))
    if match.group("op") in _NOT_KERNELS:
      continue
    moved = sizes[match.group("name")] + sum(sizes.get(r, 0)
                                             for r in _REF.findall(match.group("operands")))
    op_name = _OP_NAME.search(line)
    op_name = op_name.group(1) if op_name else ""
    layer = _LAYER.search(op_name)
    kernels.append({"bytes": moved, "name": match.group("name"), "op": match.group("op"),
                    "shape": match.group("shape"), "op_name": op_name,
                    "part": f"layer_{layer.group(1)}" if layer else "other"})
  return sorted(kernels, key=lambda k: -k["bytes"])[:n]


def parse_dump(dump_dir, bnss, bsh=None, top=0):
  """Census of every ``*after_optimizations.txt`` module in ``dump_dir``.

  Returns {"modules": [module file names], "layers": {key: {count: n}}, "total": {count: n}},
  with ``top`` > 0 also "largest_kernels" (``largest_kernels`` over all the modules).
  """
  files = sorted(glob.glob(os.path.join(dump_dir, "*after_optimizations.txt")))
  layers = collections.defaultdict(collections.Counter)
  kernels = []
  for path in files:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    for key, counter in parse_hlo_text(text, bnss, bsh).items():
      layers[key].update(counter)
    if top:
      kernels = sorted(kernels + largest_kernels(text, top), key=lambda k: -k["bytes"])[:top]
  total = collections.Counter()
  for counter in layers.values():
    total.update(counter)
  memory = collections.Counter()
  for path in sorted(glob.glob(os.path.join(dump_dir, "*after_optimizations-buffer-assignment.txt"))):
    with open(path, encoding="utf-8") as f:
      memory.update(parse_buffer_assignment(f.read()))
  result = {"modules": [os.path.basename(p) for p in files],
            "layers": {k: dict(v) for k, v in sorted(layers.items())}, "total": dict(total),
            "memory": dict(memory)}
  if top:
    result["largest_kernels"] = kernels
  return result


def parse_buffer_assignment(text):
  """{"allocated_bytes", "peak_bytes"} of one module's buffer assignment dump (what XLA
  allocates for it, and the peak of its live buffers), those it states."""
  found = {}
  allocated = _ALLOCATED.search(text)
  if allocated:
    found["allocated_bytes"] = int(allocated.group(1))
  peak = _PEAK.search(text)
  if peak:
    found["peak_bytes"] = int(peak.group(1).replace(" ", ""))
  return found


def _count_non_xla_ops(concrete_fn):
  """Ops in the traced step that run as TensorFlow kernels (not in an XLA computation).

  Walks the step's graph and the functions it calls, stopping at functions compiled with
  ``_XlaMustCompile`` (their bodies are XLA's). Returns {op type: count}.
  """
  graph_def = concrete_fn.graph.as_graph_def()
  library = {f.signature.name: f for f in graph_def.library.function}
  counts = collections.Counter()

  def called(node_attr):
    names = []
    for key in ("f", "body", "cond", "then_branch", "else_branch"):
      if key in node_attr and node_attr[key].func.name:
        names.append(node_attr[key].func.name)
    return names

  def walk(nodes, seen):
    for node in nodes:
      if node.op in library:
        fn = library[node.op]
        if fn.attr.get("_XlaMustCompile") and fn.attr["_XlaMustCompile"].b:
          continue
        if node.op not in seen:
          seen.add(node.op)
          walk(fn.node_def, seen)
        continue
      names = called(node.attr)
      compiled = [n for n in names if n in library and library[n].attr.get("_XlaMustCompile")
                  and library[n].attr["_XlaMustCompile"].b]
      if compiled and node.op in ("PartitionedCall", "StatefulPartitionedCall"):
        continue
      if node.op not in ("NoOp", "Identity", "Const", "Placeholder", "_Arg", "_Retval"):
        counts[node.op] += 1
      for name in names:
        if name in library and name not in seen:
          seen.add(name)
          walk(library[name].node_def, seen)

  walk(graph_def.node, set())
  return dict(counts)


def run_step(args):
  """In the child: build the Trainer, run one update, print the non-XLA op count as JSON."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.path.insert(0, _ROOT)
  sys.path.insert(0, os.path.join(_ROOT, "bench"))
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  import _harness  # pylint: disable=import-outside-toplevel
  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig, placement  # pylint: disable=import-outside-toplevel
  from bert_tf.training import DTYPE_POLICIES, loop  # pylint: disable=import-outside-toplevel
  from bert_tf.training.pretraining import PretrainingTask  # noqa: E501 pylint: disable=import-outside-toplevel

  config_dict = dict(_harness.config_dict("base"), num_hidden_layers=args.layers,
                     hidden_size=args.hidden, num_attention_heads=args.heads,
                     intermediate_size=4 * args.hidden, vocab_size=args.vocab,
                     attention_implementation=args.attention_implementation)
  if args.attention_probs_dropout_prob is not None:
    config_dict["attention_probs_dropout_prob"] = args.attention_probs_dropout_prob
  config = BertConfig.from_dict(config_dict)
  batch = _harness.pretraining_batch(config_dict, args.batch, args.seq, args.predictions)
  task = PretrainingTask(config)
  if args.lower_to:
    # Lowered as a GPU sees it: `auto` takes cuDNN's fused attention where it applies, and
    # `cudnn` is not refused for want of a GPU (nothing here runs).
    placement._GPU_CAPABILITIES = ((9, 0),)  # pylint: disable=protected-access
  keras.utils.set_random_seed(0)
  strategy = tf.distribute.get_strategy()
  with strategy.scope():
    model = task.build_model(dtype=DTYPE_POLICIES[args.dtype])
    optimizer = optimization.create_optimizer(1e-4, num_train_steps=100, num_warmup_steps=10)
  trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=100, steps_per_loop=1, jit_compile=True))
  # What a GPU compiles: the whole update in one XLA computation (the CPU default keeps the
  # optimizer's per-variable computations, faster on CPU).
  trainer.whole_update = True
  train_loop = trainer.build_train_loop()
  if args.lower_to:
    # The update's HLO as TensorFlow hands it to XLA (not compiled, not run): for a GPU
    # compiler elsewhere (bench/gpu_compile_deviceless.py).
    features = {k: tf.constant(v) for k, v in batch.items()}
    denominators = trainer._global_denominators(features, lambda v: v)  # pylint: disable=protected-access
    update = trainer._compiled_update  # pylint: disable=protected-access
    with open(args.lower_to, "w", encoding="utf-8") as f:
      f.write(update.experimental_get_compiler_ir(features, denominators)(stage="hlo"))
    return
  iterator = iter(strategy.distribute_datasets_from_function(
      lambda ctx: tf.data.Dataset.from_tensors(batch).repeat()))
  n = tf.constant(1, tf.int32)
  loss = float(train_loop(iterator, n).numpy())
  concrete = train_loop.compiled.get_concrete_function(iterator, n)
  print("CENSUS " + json.dumps({"loss": loss, "non_xla_ops": _count_non_xla_ops(concrete)}),
        flush=True)


def gpu_compile_env(dump_dir, xla_flags=""):
  """The GPU compile's environment: ``xla_flags`` (the user's, as on the GPU) and the dump."""
  return dict(os.environ, XLA_FLAGS=" ".join(
      f for f in (xla_flags.strip(), f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text") if f))


def census(layers=2, hidden=768, heads=12, batch=8, seq=128, predictions=20, vocab=30522,
           dtype="bfloat16", dump_dir=None, python=sys.executable,
           attention_implementation="auto", gpu=None, gpu_python=GPU_PYTHON,
           attention_probs_dropout_prob=None, top=0, gpu_xla_flags=""):
  """Compiles the step in a child process and returns its census (see ``parse_dump``), plus
  ``non_xla_ops`` ({op type: count}), ``loss`` and ``shape`` (the arguments).

  ``gpu`` ("h100", "h200"): TensorFlow lowers the update as a GPU would see it and
  ``gpu_compile_deviceless.py`` compiles it for that GPU under ``gpu_python`` (no GPU
  needed); the census is of that GPU module, plus ``gpu_compile`` (its memory and cost).
  ``gpu_xla_flags``: XLA flags of that compile (what ``XLA_FLAGS`` would hold on the GPU;
  the Trainer's own on a Hopper GPU are added where not named), also the lowering's, which the model reads (``placement.cublaslt_enabled``): TensorFlow's
  XLA must know them too."""
  own_dir = dump_dir is None
  dump_dir = dump_dir or tempfile.mkdtemp(prefix="hlo_census_")
  os.makedirs(dump_dir, exist_ok=True)
  # The environment's XLA_FLAGS kept (on a GPU machine, e.g. where CUDA lives), the dump added.
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             XLA_FLAGS=" ".join(f for f in (os.environ.get("XLA_FLAGS", ""),
                                            f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text")
                                if f),
             PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  cmd = [python, os.path.abspath(__file__), "--child", f"--layers={layers}",
         f"--hidden={hidden}", f"--heads={heads}", f"--batch={batch}", f"--seq={seq}",
         f"--predictions={predictions}", f"--vocab={vocab}", f"--dtype={dtype}",
         f"--attention_implementation={attention_implementation}"]
  if attention_probs_dropout_prob is not None:
    cmd.append(f"--attention_probs_dropout_prob={attention_probs_dropout_prob}")
  lowered = os.path.join(dump_dir, "update.hlo.txt")
  if gpu:
    if not os.path.exists(gpu_python):
      raise RuntimeError(f"{gpu_python}: no Python with jax[cuda12] to compile for a GPU "
                         "(make gpu-compiler)")
    # The GPU's XLA_FLAGS: the user's and what the Trainer adds on a Hopper GPU, which both
    # targets are (placement.set_gpu_xla_flags). The lowering sees them too: the model reads
    # some of them (placement.cublaslt_enabled).
    sys.path.insert(0, _ROOT)
    from bert_tf.modeling import placement  # pylint: disable=import-outside-toplevel
    gpu_xla_flags = placement.with_gpu_xla_flags(gpu_xla_flags.strip())[0]
    env["XLA_FLAGS"] = gpu_xla_flags
    if not env["XLA_FLAGS"]:
      env.pop("XLA_FLAGS")
    cmd.append(f"--lower_to={lowered}")
  proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("CENSUS ")]
  if proc.returncode or (not lines and not gpu):
    raise RuntimeError(f"census child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
  child = json.loads(lines[-1][len("CENSUS "):]) if lines else {}
  if gpu:
    gpu_dir = os.path.join(dump_dir, gpu)
    proc = subprocess.run(
        [gpu_python, os.path.join(_ROOT, "bench", "gpu_compile_deviceless.py"), lowered,
         f"--target={gpu}"], capture_output=True, text=True, check=False,
        env=gpu_compile_env(gpu_dir, gpu_xla_flags))
    lines = [l for l in proc.stdout.splitlines() if l.startswith("GPU_COMPILE ")]
    if proc.returncode or not lines:
      raise RuntimeError(f"GPU compile failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    child["gpu_compile"] = json.loads(lines[-1][len("GPU_COMPILE "):])
    dump_dir_read = gpu_dir
  else:
    dump_dir_read = dump_dir
  result = parse_dump(dump_dir_read, (batch, heads, seq), (batch, seq, hidden), top=top)
  result.update(child, shape=dict(layers=layers, hidden=hidden, heads=heads, batch=batch,
                                  seq=seq, predictions=predictions, vocab=vocab, dtype=dtype,
                                  attention_implementation=attention_implementation))
  if own_dir:
    import shutil  # pylint: disable=import-outside-toplevel
    shutil.rmtree(dump_dir, ignore_errors=True)
  return result


COLUMNS = ("transposes", "transpose_bytes", "dots", "fmha_calls", "fusions", "f32_bnss",
           "f32_bsh", "f16_bsh", "bnss_writes", "bnss_fusions", "bnss_fusions_bwd",
           "bnss_bytes")


def table(result):
  """Markdown table: one row per layer key and a total row."""
  lines = ["| part | transposes | transpose MB | GEMMs | fused attention calls | fusions "
           "| f32 B·N·S·S tensors | f32 B·S·H tensors | 16-bit B·S·H tensors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
  rows = list(result["layers"].items()) + [("**total**", result["total"])]
  for key, c in rows:
    lines.append(f"| {key} | {c.get('transposes', 0)} | "
                 f"{c.get('transpose_bytes', 0) / 1e6:.2f} | {c.get('dots', 0)} | "
                 f"{c.get('fmha_calls', 0)} | {c.get('fusions', 0)} | {c.get('f32_bnss', 0)} | "
                 f"{c.get('f32_bsh', 0)} | {c.get('f16_bsh', 0)} |")
  lines += ["", "| part | B·N·S·S results written | of them fusions, forward / backward "
            "| B·N·S·S MB written |", "|---|---:|---:|---:|"]
  for key, c in rows:
    lines.append(f"| {key} | {c.get('bnss_writes', 0)} | {c.get('bnss_fusions', 0)} / "
                 f"{c.get('bnss_fusions_bwd', 0)} | {c.get('bnss_bytes', 0) / 1e6:.2f} |")
  lines.append("")
  memory = result.get("memory") or {}
  if memory:
    lines.append("XLA buffer assignment: " + ", ".join(
        f"{name} {memory[key] / 2**20:.1f} MiB" for key, name in
        (("peak_bytes", "peak"), ("allocated_bytes", "allocated")) if key in memory))
  if result.get("largest_kernels"):
    lines += ["| kernel | op | part | MB named (result + operands) | result shape | op_name |",
              "|---|---|---|---:|---|---|"]
    for k in result["largest_kernels"]:
      lines.append(f"| {k['name']} | {k['op']} | {k['part']} | {k['bytes'] / 1e6:.1f} | "
                   f"`{k['shape'][:60]}` | {k['op_name'][-70:]} |")
    lines.append("")
  gpu = result.get("gpu_compile")
  if gpu:
    lines.append(f"Compiled for {gpu['target']} without a GPU (jaxlib {gpu['jaxlib']}'s XLA): "
                 f"temporary memory {gpu['temp_bytes'] / 2**20:.1f} MiB, bytes accessed "
                 f"{gpu['bytes_accessed'] / 1e9:.2f} GB, {gpu['flops'] / 1e12:.2f} TFLOP")
  line = f"XLA modules: {len(result['modules'])}"
  if "non_xla_ops" in result:
    line += f"; TensorFlow ops outside XLA in the step: {sum(result['non_xla_ops'].values())}"
  lines.append(line)
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--layers", type=int, default=2)
  parser.add_argument("--hidden", type=int, default=768)
  parser.add_argument("--heads", type=int, default=12)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--vocab", type=int, default=30522)
  parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
  parser.add_argument("--attention_implementation", default="auto",
                      help="BertConfig.attention_implementation (xla_recompute: the attention "
                      "recomputed in the backward pass, layers.attention_recomputed).")
  parser.add_argument("--attention_probs_dropout_prob", type=float, default=None,
                      help="BertConfig's (default: BERT's 0.1; 0 lets `auto` take cuDNN's "
                      "fused attention on a GPU, --gpu).")
  parser.add_argument("--dump_dir", default=None, help="Keep the HLO dump here.")
  parser.add_argument("--from_dump", default=None,
                      help="Only read this existing dump (e.g. a GPU's) with the shapes given.")

  parser.add_argument("--gpu", default=None, choices=("h100", "h200"),
                      help="Census of the update compiled for this GPU, without one "
                      "(bench/gpu_compile_deviceless.py; make gpu-compiler).")
  parser.add_argument("--gpu_python", default=GPU_PYTHON,
                      help="A Python with jax[cuda12], for --gpu.")
  parser.add_argument("--gpu_xla_flags", default="",
                      help="XLA flags of the --gpu compile (as XLA_FLAGS would hold them on "
                      "the GPU), e.g. --xla_gpu_enable_command_buffer= (an unknown flag stops the "
                      "compile).")
  parser.add_argument("--top", type=int, default=0,
                      help="Also list the N kernels that name the most bytes (result + "
                      "operands) in the dump's modules.")
  parser.add_argument("--json", action="store_true", help="Print the census as JSON too.")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--lower_to", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    run_step(args)
    return
  if args.from_dump:
    result = parse_dump(args.from_dump, (args.batch, args.heads, args.seq),
                        (args.batch, args.seq, args.hidden), top=args.top)
    print(table(result))
    print("modules: " + ", ".join(result["modules"]))
    if args.json:
      print(json.dumps(result, sort_keys=True))
    return
  result = census(args.layers, args.hidden, args.heads, args.batch, args.seq,
                  args.predictions, args.vocab, args.dtype, args.dump_dir,
                  attention_implementation=args.attention_implementation, gpu=args.gpu,
                  gpu_python=args.gpu_python,
                  attention_probs_dropout_prob=args.attention_probs_dropout_prob,
                  top=args.top, gpu_xla_flags=args.gpu_xla_flags)
  print(table(result))
  print("modules: " + ", ".join(result["modules"]))
  if "non_xla_ops" in result:
    print("non-XLA ops: " + json.dumps(result["non_xla_ops"], sort_keys=True))
  if args.json:
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
  main()
