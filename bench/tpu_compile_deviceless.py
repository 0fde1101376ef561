"""What one Cloud TPU core needs to train BERT, from XLA's TPU compiler, without a TPU.

TensorFlow lowers the pretraining micro-batch's loss and gradients (``Trainer``'s XLA
gradients function, the TPU path: no GPU, bfloat16, hash dropout masks) to HLO text; the TPU
compiler in ``libtpu`` (PyPI, through ``jax[tpu]``; ``make tpu-compiler`` makes
``.venv-tpu-compiler``) compiles it for one core of the TPU generation given, on this CPU
(``jax.experimental.topologies``: a compile-only client) and reports XLA's buffer assignment:

  make tpu-compiler
  .venv/bin/python bench/tpu_compile_deviceless.py --model=large --batch=4 --seq=512 \\
      --predictions=80 --tpu=v2 --gradient_accumulation_steps=8
  .venv/bin/python bench/tpu_compile_deviceless.py \\
      --flagfile=tpu_configs/bert_large_phase2_v2-8.flags     # the same, read from the file

``--batch`` is one core's micro-batch: ``train_batch_size / devices / gradient_accumulation_steps``
of a ``tpu_configs/*.flags`` file (``--flagfile`` reads them from one). Printed: the compile's
temporary bytes (activations kept for the backward pass, bf16 copies of the weights,
scratch), its arguments (the float32 weights), outputs (the float32 gradients) and code; and an
estimate of the whole step on the core: those, plus the two Adam slots (2 x the weights) and,
with gradient accumulation, one float32 accumulator per weight, against the core's HBM.

An estimate, not a measurement. The training step's whole program (micro-batches, the
cross-replica sum, the optimizer's update) is lowered by TensorFlow's TPU bridge only on a
TPU; compiled alone, the gradients module does not show the compiler the optimizer's state
beside it. XLA's TPU compiler plans a module for the core's memory and may recompute
activations to fit it (BERT-Large phase 2 kept 0.27 GiB of temporaries per sequence on a v2
core, 0.44 on a v3 core), so the whole program may fit with more recomputation where this
estimate is tight, or need more for the optimizer's and the runtime's own buffers.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPU_PYTHON = os.path.join(_ROOT, ".venv-tpu-compiler", "bin", "python")
# One core as XLA sees it (a v4 or v5e chip is one device): topology for
# jax.experimental.topologies, HBM in GiB per device (Cloud TPU documentation).
TPUS = {"v2": ("v2:2x2", 8), "v3": ("v3:2x2", 16), "v4": ("v4:2x2x1", 32),
        "v5e": ("v5e:2x2", 16)}
GIB = 2 ** 30


def _accelerators():
  """tpu_configs/make_configs.py's table: slice -> (devices as TensorFlow's replicas, the
  per-replica batches of its files)."""
  sys.path.insert(0, os.path.join(_ROOT, "tpu_configs"))
  import make_configs  # pylint: disable=import-outside-toplevel,import-error
  return make_configs.ACCELERATORS


def shapes_of_flagfile(path):
  """``tpu_configs/bert_<model>_phase<N>_<slice>.flags`` -> the arguments of one core's
  micro-batch (model, seq, predictions, batch, tpu, gradient_accumulation_steps)."""
  flags = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.startswith("--") and "=" in line:
        key, value = line[2:].strip().split("=", 1)
        flags[key] = value
  accelerators = _accelerators()
  match = re.fullmatch(r"bert_(base|large)_phase\d_(v\w+-\d+)\.flags", os.path.basename(path))
  if not match or match.group(2) not in accelerators:
    raise ValueError("not a pretraining file of tpu_configs/ (bert_<base|large>_phase<N>_"
                     f"<{'|'.join(accelerators)}>.flags)")
  model, slice_name = match.groups()
  for key in ("train_batch_size", "max_seq_length", "max_predictions_per_seq"):
    if key not in flags:
      raise ValueError(f"no --{key}")
  accumulation = int(flags.get("gradient_accumulation_steps", 1))
  batch, devices = int(flags["train_batch_size"]), accelerators[slice_name][0]
  if batch % (devices * accumulation):
    raise ValueError(f"train_batch_size {batch} is not a multiple of {devices} "
                     f"devices x {accumulation} accumulation steps")
  return {"model": model, "seq": int(flags["max_seq_length"]),
          "predictions": int(flags["max_predictions_per_seq"]),
          "batch": batch // (devices * accumulation), "tpu": slice_name.split("-")[0],
          "gradient_accumulation_steps": accumulation}


def lower(model, batch, seq, predictions, out):
  """In a TensorFlow process: the micro-batch gradients' HLO text to ``out``; returns the
  number of trainable weights."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.path.insert(0, _ROOT)
  sys.path.insert(0, os.path.join(_ROOT, "bench"))
  # pylint: disable=import-outside-toplevel
  import keras
  import tensorflow as tf

  import _harness
  from bert_tf import optimization
  from bert_tf.modeling import BertConfig
  from bert_tf.training import DTYPE_POLICIES, loop
  from bert_tf.training.pretraining import PretrainingTask

  config_dict = _harness.config_dict(model)
  features = {k: tf.constant(v) for k, v in
              _harness.pretraining_batch(config_dict, batch, seq, predictions).items()}
  task = PretrainingTask(BertConfig.from_dict(config_dict))
  keras.utils.set_random_seed(0)
  bert = task.build_model(dtype=DTYPE_POLICIES["bfloat16"])
  optimizer = optimization.create_optimizer(1e-4, num_train_steps=100, num_warmup_steps=10)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, bert, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=100, steps_per_loop=1, jit_compile=True))
  trainer.whole_update = False  # as under TPUStrategy: gradients, then the optimizer
  trainer.build_train_loop()
  denominators = trainer._global_denominators(features, lambda v: v)  # pylint: disable=protected-access
  gradients = trainer._compiled_gradients  # pylint: disable=protected-access
  with open(out, "w", encoding="utf-8") as f:
    f.write(gradients.experimental_get_compiler_ir(features, denominators)(stage="hlo"))
  return sum(int(tf.size(v)) for v in bert.trainable_variables)


def compile_for_tpu(path, tpu):
  """In a Python with ``jax[tpu]``: compiles HLO text at ``path`` for one core of ``tpu``."""
  os.environ.setdefault("JAX_PLATFORMS", "cpu")  # no TPU client: compile-only
  sys.path.insert(0, os.path.join(_ROOT, "bench"))
  # pylint: disable=import-outside-toplevel,import-error
  from jax._src.interpreters import mlir as jax_mlir
  from jax._src.lib import _jax, xla_client
  from jax._src.lib.mlir import ir
  from jax.experimental import topologies

  from gpu_compile_deviceless import stablehlo_ready

  device = topologies.get_topology_desc(TPUS[tpu][0], "tpu").devices[0]
  with open(path, encoding="utf-8") as f:
    module = _jax.hlo_module_from_text(stablehlo_ready(f.read()))
  bytecode = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
  with jax_mlir.make_ir_context():
    executable = device.client.compile(
        ir.Module.parse(bytecode), executable_devices=_jax.DeviceList((device,)),
        compile_options=xla_client.CompileOptions())
  memory = executable.get_compiled_memory_stats()
  return {"device_kind": device.device_kind, "temp_bytes": memory.temp_size_in_bytes,
          "argument_bytes": memory.argument_size_in_bytes,
          "output_bytes": memory.output_size_in_bytes,
          "code_bytes": memory.generated_code_size_in_bytes}


def estimate(stats, params, accumulation):
  """The step's need on one core (bytes), by the parts named in the module's docstring."""
  weights = 4 * params
  return (stats["temp_bytes"] + stats["argument_bytes"] + stats["output_bytes"]
          + stats["code_bytes"] + 2 * weights + (weights if accumulation > 1 else 0))


def _last_json(stdout, prefix):
  lines = [l for l in stdout.splitlines() if l.startswith(prefix)]
  return json.loads(lines[-1][len(prefix):]) if lines else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", default="large", help="bench/_harness.py's config name.")
  parser.add_argument("--batch", type=int, default=4, help="One core's micro-batch.")
  parser.add_argument("--seq", type=int, default=512)
  parser.add_argument("--predictions", type=int, default=80)
  parser.add_argument("--tpu", default="v2", choices=sorted(TPUS))
  parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
  parser.add_argument("--flagfile", help="A tpu_configs/*.flags pretraining file: its model, "
                      "sequence length, predictions, TPU and one core's micro-batch.")
  parser.add_argument("--tpu_python", default=TPU_PYTHON,
                      help="A Python with jax[tpu] (make tpu-compiler).")
  parser.add_argument("--lower_to", help=argparse.SUPPRESS)
  parser.add_argument("--compile", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.flagfile:
    try:
      vars(args).update(shapes_of_flagfile(args.flagfile))
    except (OSError, ValueError) as e:
      sys.exit(f"error: --flagfile={args.flagfile}: {e}")
  if args.lower_to:
    params = lower(args.model, args.batch, args.seq, args.predictions, args.lower_to)
    print("LOWERED " + json.dumps({"params": params}), flush=True)
    return
  if args.compile:
    print("TPU_COMPILE " + json.dumps(compile_for_tpu(args.compile, args.tpu)), flush=True)
    return
  if not os.path.exists(args.tpu_python):
    sys.exit(f"error: {args.tpu_python}: no Python with jax[tpu] (make tpu-compiler)")
  with tempfile.TemporaryDirectory() as folder:
    hlo = os.path.join(folder, "gradients.hlo.txt")
    shape = [f"--model={args.model}", f"--batch={args.batch}", f"--seq={args.seq}",
             f"--predictions={args.predictions}", f"--tpu={args.tpu}"]
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *shape,
                           f"--lower_to={hlo}"], capture_output=True, text=True, check=False)
    lowered = _last_json(proc.stdout, "LOWERED ")
    if proc.returncode or lowered is None:
      sys.exit(f"error: lowering failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    proc = subprocess.run([args.tpu_python, os.path.abspath(__file__), *shape,
                           f"--compile={hlo}"], capture_output=True, text=True, check=False)
    stats = _last_json(proc.stdout, "TPU_COMPILE ")
    if proc.returncode or stats is None:
      sys.exit(f"error: TPU compile failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
  need = estimate(stats, lowered["params"], args.gradient_accumulation_steps)
  hbm = TPUS[args.tpu][1]
  print(f"{args.model} seq {args.seq} micro-batch {args.batch} on one {stats['device_kind']} "
        f"core ({hbm} GiB): compiled gradients temp {stats['temp_bytes'] / GIB:.2f} GiB, "
        f"weights {stats['argument_bytes'] / GIB:.2f}, gradients "
        f"{stats['output_bytes'] / GIB:.2f}, code {stats['code_bytes'] / GIB:.2f}; step "
        f"estimate {need / GIB:.2f} GiB of {hbm} "
        f"(Adam slots{' and accumulators' if args.gradient_accumulation_steps > 1 else ''} "
        "added: an estimate)")
  print("TPU_ESTIMATE " + json.dumps(dict(stats, params=lowered["params"], need_bytes=need,
                                          hbm_gib=hbm, **vars(args))), flush=True)


if __name__ == "__main__":
  main()
