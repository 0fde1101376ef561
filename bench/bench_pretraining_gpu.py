"""Pretraining and SQuAD fine-tuning throughput and MFU on a GPU, through bert_tf's real loop.

Every measurement runs ``training.loop.Trainer`` (``steps_per_loop`` updates in-graph per
host call, Google's AdamWeightDecay with global-norm clipping, dropout on) on a synthetic
batch repeated forever, so the numbers are the model's and the loop's, not the input
pipeline's:

  pretraining  ``PretrainingTask`` (MLM on the masked positions + NSP):
                 phase 1: seq 128, 20 predictions;  phase 2: seq 512, 80 predictions
  squad        ``training.squad.SquadTask`` (start/end spans), seq 384

for BERT-Base and BERT-Large, float32 and bfloat16 (``mixed_bfloat16``: bf16 matmuls,
float32 variables, LayerNorm and softmax), with and without XLA (``jit_compile``: the
forward and backward pass compiled as one XLA cluster). Each combination runs in its own
process (clean GPU memory, one dtype policy per process); a batch that does not fit is
halved (``--oom_retries``) and the batch used is reported.

Throughput is sequences per second over ``--loops`` timed host calls of ``--steps_per_loop``
updates each, after one untimed call (tracing, XLA compilation, autotuning). MFU is
``bert_tf.flops.train_flops_per_sequence`` (6 x non-embedding matmul parameters x tokens +
attention, the MLM head on the masked positions only; 3 x the forward FLOPs) times sequences
per second, divided by the GPU's dense bf16 peak (``bert_tf.flops.peak_flops_for_device``;
also for float32 runs, so the rows compare against the same roof).

Run on one GPU (each of the full plan's 24 rows takes 0.5-2 minutes, most of it XLA
compilation; pick rows with the flags to stay within a time limit):

  .venv/bin/python bench/bench_pretraining_gpu.py --output_json=/tmp/pretraining_gpu.json
  .venv/bin/python bench/bench_pretraining_gpu.py --models=large --phases=1,2 \\
      --dtypes=bfloat16 --xla=true                              # the MFU goal rows

Side by side with the Hugging Face peer on the same GPU (torch.compile, bf16 autocast, fused
AdamW; ``bench/_torch_peer.py --device=cuda --compile``, run by an interpreter with torch),
plus the per-kernel profile of each bert_tf row (``--profile``: the TensorFlow profiler's trace
of one more host call, GPU kernel time per update by kind and the largest kernels):

  .venv/bin/python bench/bench_pretraining_gpu.py --models=large --phases=1,2 --squad=false \\
      --dtypes=bfloat16 --xla=true --profile --torch_python=/path/to/torchvenv/bin/python

GPU memory is the peak of bytes in use over the timed calls (``get_memory_info``, reset after
the warm-up; the peer's ``torch.cuda.max_memory_allocated`` is reset the same way); the
whole process's peak is reported beside it. ``--profile`` also prints the device events per
update and where the GPU idled between them. ``--distribution_strategies=default,one_device``
compares the input copied to the GPU inside the loop with the input fetched ahead;
``--xla_flags`` adds XLA flags (e.g. command buffers, i.e. CUDA graphs) to every row.

Check it runs (CPU, tiny config, a few seconds per row):

  .venv/bin/python bench/bench_pretraining_gpu.py --smoke
"""

import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import _harness  # noqa: E402

# (seq_length, max_predictions_per_seq) of the original's two pretraining phases.
PHASES = {"1": (128, 20), "2": (512, 80)}
# --prefetch_to_device's and --device_loop's values -> the Trainer's attributes.
AUTO_BOOL = {"auto": None, "true": True, "false": False}
# --compile_timers: the compile timers TensorFlow's XLA launcher and XLA's compilers log at
# VLOG 1 (tsl's ScopedLoggingTimer lines: "<label> time: 1.2 s (1234567 us) (cumulative...").
COMPILE_TIMER_VMODULE = ("device_compiler=1,gpu_compiler=1,nvptx_compiler=1,cpu_compiler=1,"
                         "device_executable_persistor=1")
_TIMER_LINE = re.compile(r"\] (?P<label>.+?) time: [^(\n]*\((?P<us>\d+) us\)")
_INFO_LINE = re.compile(r"^I\d{4} ")
SQUAD_SEQ_LENGTH = 384
# Per-GPU batch sizes to try first (halved on OOM), by (model, task); sized for 80 GB.
DEFAULT_BATCH = {
    ("base", "phase1"): 256, ("base", "phase2"): 64, ("base", "squad"): 64,
    ("large", "phase1"): 128, ("large", "phase2"): 32, ("large", "squad"): 32,
    ("tiny", "phase1"): 4, ("tiny", "phase2"): 4, ("tiny", "squad"): 4,
}


def _define_auto_bool_list(name, values_help):
  """A flag of Trainer attribute ``name``'s values to run side by side (``AUTO_BOOL``)."""
  flags.DEFINE_list(name, ["auto"], f"Rows side by side: auto (the Trainer's default), "
                    f"{values_help} (Trainer.{name}).")
  flags.register_validator(name, lambda values: all(v.lower() in AUTO_BOOL for v in values),
                           message=f"--{name} takes auto, true and/or false")


def define_flags():
  """The command line (defined only when run as a script, so that importing is free)."""
  flags.DEFINE_list("models", ["base", "large"], "Configs of bench/_harness.py.")
  flags.DEFINE_list("phases", ["1", "2"], "Pretraining phases: 1 (seq 128), 2 (seq 512).")
  flags.DEFINE_bool("squad", True, "Also SQuAD fine-tuning (seq 384).")
  flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "float32 and/or bfloat16.")
  flags.DEFINE_list("xla", ["false", "true"], "jit_compile values to run.")
  flags.DEFINE_list("attention_implementations", ["auto"],
                    "attention_implementation values to run side by side (auto, xla, cudnn, "
                    "cudnn_dropout; modeling/fused_attention.py).")
  flags.DEFINE_float("attention_probs_dropout_prob", None,
                     "Override the config's attention dropout (0: the fused kernel applies "
                     "to training; default: the config's 0.1, the original recipe).")
  flags.DEFINE_list("distribution_strategies", ["default"],
                    "Strategies to run side by side (bert_tf.training.distribution): default "
                    "(run_pretraining.py's default; the batch is copied to the GPU inside the "
                    "loop, one copy per update) and/or one_device (OneDeviceStrategy fetches "
                    "the input to the GPU ahead of the loop).")
  _define_auto_bool_list(
      "prefetch_to_device", "true (tf.data copies the batches to the GPU in its own thread, "
      "two ahead of the loop), false (each update takes its batch from the host as it comes)")
  _define_auto_bool_list(
      "device_loop", "true (each host call's updates as one XLA computation, a while loop "
      "on the GPU over the call's batches, copied once), false")
  flags.DEFINE_integer("batch_size", None, "Per-GPU batch for every row (default: a table).")
  flags.DEFINE_integer("steps_per_loop", 20, "Updates per host call (in-graph loop).")
  flags.DEFINE_integer("loops", 3, "Timed host calls per row (after one warm-up call).")
  flags.DEFINE_integer("oom_retries", 2, "Halve the batch this many times on out-of-memory.")
  flags.DEFINE_bool("smoke", False, "Tiny config on whatever device there is, 2 steps per "
                    "loop, 1 loop, short sequences: checks that everything runs.")
  flags.DEFINE_bool("in_process", False, "Run the rows in this process (smoke tests).")
  flags.DEFINE_string("output_json", None, "Write every result here too.")
  flags.DEFINE_bool("profile", False, "After timing, trace one more host call with the "
                    "TensorFlow profiler and print its top GPU kernels per update, grouped by "
                    "kind (GEMM, attention, transpose, reduce, elementwise, non-XLA).")
  flags.DEFINE_integer("profile_top", 30, "Kernels listed in the --profile table.")
  flags.DEFINE_string("torch_python", None, "An interpreter with torch (CUDA) and transformers: "
                      "also run the Hugging Face peer (bench/_torch_peer.py --device=cuda "
                      "--compile) on every pretraining row and print the side-by-side table.")
  flags.DEFINE_bool("compile_timers", False, "Report where each row's warm-up went: the "
                    "Python trace, and the compile timers TensorFlow's XLA launcher and XLA's "
                    "compilers log (HLO passes with autotuning, LLVM, PTX to cubin).")
  flags.DEFINE_string("xla_flags", None, "Appended to XLA_FLAGS for every row (and recorded "
                      "in its result), e.g. --xla_gpu_enable_command_buffer=FUSION,CUBLAS,"
                      "CUBLASLT,CUSTOM_CALL (CUDA graphs) or --xla_gpu_enable_command_buffer= "
                      "(none). Rows run in-process see it only if set before the first compile.")
  flags.DEFINE_string("xla_cache_dir", None, "Every row keeps its compiled XLA programs in "
                      "this folder and loads them from there when a later row or run compiles "
                      "the same one (TensorFlow's persistent XLA cache, "
                      "bert_tf.training.xla_cache): a repeated row's warm-up without XLA's "
                      "compile.")
  flags.DEFINE_string("worker", None, "Internal: one row as JSON; prints a RESULT line.")


FLAGS = flags.FLAGS


# === One measurement ===

def measure_row(model, task, dtype, xla, batch_size, steps_per_loop, loops, seq_length=None,
                num_predictions=None, profile=False, profile_top=30,
                attention_implementation="auto", attention_probs_dropout_prob=None,
                distribution_strategy="default", prefetch_to_device="auto", device_loop="auto"):
  """Trains ``loops + 1`` host calls of ``steps_per_loop`` updates; returns a result dict.

  ``task``: "phase1", "phase2" or "squad". ``seq_length``/``num_predictions`` override the
  phase's (for --smoke). ``profile``: trace one more host call and add ``profile`` (see
  ``kernel_profile``) to the result. ``distribution_strategy``: a name of
  ``bert_tf.training.distribution.get_strategy``. ``prefetch_to_device``: "auto", "true" or
  "false" (``Trainer.prefetch_to_device``: None, True, False); ``device_loop`` likewise
  (``Trainer.device_loop``).
  """
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from bert_tf import flops, optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  from bert_tf.training import DTYPE_POLICIES, distribution, loop  # noqa: E501 pylint: disable=import-outside-toplevel
  from bert_tf.training.pretraining import PretrainingTask  # noqa: E501 pylint: disable=import-outside-toplevel
  from bert_tf.training.squad import SquadTask  # pylint: disable=import-outside-toplevel

  config_dict = _harness.config_dict(model)
  if attention_probs_dropout_prob is not None:
    config_dict["attention_probs_dropout_prob"] = attention_probs_dropout_prob
  config = BertConfig.from_dict(dict(config_dict,
                                     attention_implementation=attention_implementation))
  if task == "squad":
    seq_length = seq_length or SQUAD_SEQ_LENGTH
    num_predictions = None
    batch = _harness.squad_batch(config_dict, batch_size, seq_length)
    bert_task = SquadTask(config)
    flops_per_sequence = flops.train_flops_per_sequence(config, seq_length, None,
                                                        next_sentence=False)
  else:
    default_seq, default_predictions = PHASES[task[-1]]
    seq_length = seq_length or default_seq
    num_predictions = num_predictions or default_predictions
    batch = _harness.pretraining_batch(config_dict, batch_size, seq_length, num_predictions)
    bert_task = PretrainingTask(config)
    flops_per_sequence = flops.train_flops_per_sequence(config, seq_length, num_predictions)

  keras.utils.set_random_seed(0)
  strategy = distribution.get_strategy(distribution_strategy)
  with strategy.scope():
    bert_model = bert_task.build_model(dtype=DTYPE_POLICIES[dtype])
    optimizer = optimization.create_optimizer(1e-4, num_train_steps=100000,
                                              num_warmup_steps=1000)
  trainer = loop.Trainer(strategy, bert_task, bert_model, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=100000, steps_per_loop=steps_per_loop,
      jit_compile=xla))
  trainer.prefetch_to_device = AUTO_BOOL[prefetch_to_device]
  trainer.device_loop = AUTO_BOOL[device_loop]
  train_loop = trainer.build_train_loop()
  iterator = trainer.make_iterator(lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
  n = tf.constant(steps_per_loop, tf.int32)

  gpu = bool(tf.config.list_physical_devices("GPU"))
  start = time.perf_counter()
  try:  # the Python trace alone (the model, its gradient); a nicety: never fail the row on it
    train_loop.compiled.get_concrete_function(iterator, n)
    trace_s = time.perf_counter() - start
  except Exception:  # pylint: disable=broad-except
    trace_s = None
  loss = float(train_loop(iterator, n).numpy())  # + compilation, autotuning, one call
  warmup_s = time.perf_counter() - start
  if gpu:
    # The warm-up's peak includes XLA's autotuning scratch; the timed calls' peak is what
    # training holds (the PyTorch peer resets its peak after its warm-up the same way).
    warmup_peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    tf.config.experimental.reset_memory_stats("GPU:0")
  times = []
  for _ in range(loops):
    start = time.perf_counter()
    loss = float(train_loop(iterator, n).numpy())
    times.append(time.perf_counter() - start)
  total = sum(times)
  sequences_per_second = batch_size * steps_per_loop * loops / total
  device = device_description()
  peak = flops.peak_flops_for_device(device)
  result = {
      "model": model, "task": task, "dtype": dtype, "xla": xla, "batch_size": batch_size,
      "attention_implementation": attention_implementation,
      "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
      "distribution_strategy": distribution_strategy, "prefetch_to_device": prefetch_to_device,
      "prefetched": trainer._prefetches(),  # pylint: disable=protected-access
      "device_loop": device_loop,
      "device_looped": trainer._device_loops(),  # pylint: disable=protected-access
      # What XLA read: the environment's, the bench's --xla_flags and the Trainer's own
      # (placement.set_gpu_xla_flags on a Hopper GPU).
      "xla_flags_in_effect": os.environ.get("XLA_FLAGS", ""),
      "seq_length": seq_length, "num_predictions": num_predictions,
      "steps_per_loop": steps_per_loop, "loops": loops, "loop_times_s": times,
      "warmup_s": warmup_s, "trace_s": trace_s, "sequences_per_second": sequences_per_second,
      "tokens_per_second": sequences_per_second * seq_length,
      "train_flops_per_sequence": flops_per_sequence,
      "model_tflops_per_second": flops_per_sequence * sequences_per_second / 1e12,
      "peak_flops": peak,
      "mfu": flops.mfu(flops_per_sequence, sequences_per_second, peak) if peak else None,
      "loss": loss, "steps_done": int(optimizer.iterations.numpy()),
      "device": device,
  }
  if gpu:
    # Bytes in use by TensorFlow's allocator (which XLA's buffers come from too), the same
    # measure as torch.cuda.max_memory_allocated; not what the allocator reserved (memory
    # growth is on in the worker; without it TensorFlow reserves nearly the whole GPU, which
    # get_memory_info does not count either).
    info = tf.config.experimental.get_memory_info("GPU:0")
    result["peak_gpu_memory_gb"] = info["peak"] / 1e9  # over the timed calls
    result["peak_gpu_memory_gb_with_warmup"] = max(info["peak"], warmup_peak) / 1e9
    result["gpu_memory_in_use_gb"] = info["current"] / 1e9  # between calls: weights, slots
  if profile:
    logdir = tempfile.mkdtemp(prefix="bench_profile_")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    train_loop(iterator, n).numpy()
    traced_s = time.perf_counter() - start
    tf.profiler.experimental.stop()
    result["profile"] = kernel_profile(logdir, steps_per_loop, profile_top)
    # The traced call's wall time per update (the profiler slows the host a little).
    result["profile"]["wall_ms"] = traced_s * 1e3 / steps_per_loop
  return result


# === --profile: the device kernels of one traced host call ===

KINDS = ("GEMM", "attention", "transpose", "reduce", "elementwise", "non-XLA", "memcpy")
# Idle stretches between device events, by length (microseconds): (upper bound, label).
GAP_BINS = ((10, "< 10 us"), (100, "10-100 us"), (1000, "0.1-1 ms"), (float("inf"), ">= 1 ms"))


def kernel_kind(name):
  """The kind of a GPU kernel by its name: XLA names its fusions after their roots
  (``input_transpose_fusion``, ``input_reduce_fusion``, ``loop_add_fusion``,
  ``gemm_fusion_dot``); cuBLAS/cuDNN kernels are GEMMs (``nvjet``, ``cutlass``, ``gemm``) or
  fused attention (``fmha``, ``sdpa``, ``flash``); TensorFlow's own kernels (Eigen, cub,
  ``tensorflow::``) ran outside XLA; the profiler's ``MemcpyH2D``/``Memset`` events are
  copies, not kernels."""
  low = name.lower()
  if low.startswith(("memcpy", "memset")):
    return "memcpy"
  if any(k in low for k in ("fmha", "sdpa", "flash")):
    return "attention"
  if any(k in name for k in ("Eigen::", "tensorflow::", "cub::", "BlockReduceKernel",
                             "DeviceReduce", "functor::")):
    return "non-XLA"
  if any(k in low for k in ("gemm", "nvjet", "cutlass", "cublas", "matmul", "xmma", "wgmma",
                            "_dot")):
    return "GEMM"
  if "transpose" in low:
    return "transpose"
  if "reduce" in low or "reduction" in low:
    return "reduce"
  return "elementwise"


def _busy_and_gaps(intervals):
  """Merges [start, end) intervals (ps): (time covered, [idle gaps between them])."""
  busy, gaps, end = 0, [], None
  for start, stop in sorted(intervals):
    if end is None or start > end:
      if end is not None:
        gaps.append(start - end)
      busy += stop - start
      end = stop
    elif stop > end:
      busy += stop - end
      end = stop
  return busy, gaps


def _stalls(intervals, named, host_events, updates, top=8):
  """What the GPU's idle stretches waited for. Of 1 ms or more: the device event that ended
  each ({"next": [[stretches per update, event name], ...]}) and the host events (TensorFlow
  ops, the executor's and XLA's trace scopes, by thread) that ran during them, by the time
  they overlap the stretches ({"host": [[ms per update, name], ...]}; nested scopes each
  count). Of 10 us to 1 ms (a kernel's own host work, e.g. cuDNN's or cuBLAS's): the event
  that ended each ({"next_medium": [[stretches per update, ms per update, name], ...]})."""
  import bisect  # pylint: disable=import-outside-toplevel
  import collections  # pylint: disable=import-outside-toplevel
  long, medium, end = [], [], None
  for start, stop in sorted(intervals):
    if end is not None and start - end >= 1e9:  # ps: 1 ms
      long.append((end, start))
    elif end is not None and start - end >= 1e7:  # 10 us
      medium.append((end, start))
    end = stop if end is None else max(end, stop)
  starts = sorted(named)

  def following(stretches):
    counts, ps = collections.Counter(), collections.Counter()
    for gap_begin, gap_end in stretches:
      i = bisect.bisect_left(starts, (gap_end, ""))
      if i < len(starts):
        counts[starts[i][1]] += 1
        ps[starts[i][1]] += gap_end - gap_begin
    return counts, ps

  host = collections.Counter()
  for begin, stop, name in host_events:
    for gap_begin, gap_end in long:
      overlap = min(stop, gap_end) - max(begin, gap_begin)
      if overlap > 0:
        host[name] += overlap
  long_next, _ = following(long)
  medium_next, medium_ps = following(medium)
  return {"next": [[count / updates, name] for name, count in long_next.most_common(top)],
          "host": [[ps / 1e9 / updates, name] for name, ps in host.most_common(top)],
          "next_medium": [[medium_next[name] / updates, ps / 1e9 / updates, name]
                          for name, ps in medium_ps.most_common(top)]}


def kernel_profile(logdir, updates, top=30):
  """Reads the ``*.xplane.pb`` the profiler wrote under ``logdir``: GPU time per update.

  Returns {"updates", "total_ms" (kernel and copy time, summed), "launches" (device events
  per update), "span_ms" (first event's start to the last one's end, per update), "busy_ms"
  (time at least one event ran, per update), "idle_ms" (span - busy: the GPU waited),
  "gaps": {bin label: [idle stretches per update, ms per update]} (``GAP_BINS``), "stalls"
  (what the stretches of 1 ms or more waited for: ``_stalls``),
  "by_kind": {kind: ms per update}, "kernels": [[ms per update, launches per update, kind,
  name], ...] (largest first, ``top`` of them)}.
  """
  import glob  # pylint: disable=import-outside-toplevel
  import collections  # pylint: disable=import-outside-toplevel
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E501 pylint: disable=import-outside-toplevel

  time_ps, launches = collections.Counter(), collections.Counter()
  intervals, named, host_events = [], [], []
  for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
    for plane in space.planes:
      names = {i: m.name for i, m in plane.event_metadata.items()}
      if plane.name.startswith("/host:"):  # what the host ran, thread by thread (and the
        # CUDA API calls where the profiler puts them on a host plane of their own)
        for line in plane.lines:
          for event in line.events:
            begin = line.timestamp_ns * 1000 + event.offset_ps
            host_events.append((begin, begin + event.duration_ps,
                                names.get(event.metadata_id, "?")))
        continue
      if not plane.name.startswith("/device:GPU"):
        continue
      for line in plane.lines:
        # One timeline per CUDA stream; the derived lines (XLA ops, TF ops, steps) repeat the
        # same time under other names.
        if not line.name.startswith("Stream"):
          continue
        for event in line.events:
          name = names.get(event.metadata_id, "?")
          time_ps[name] += event.duration_ps
          launches[name] += 1
          begin = line.timestamp_ns * 1000 + event.offset_ps
          intervals.append((begin, begin + event.duration_ps))
          named.append((begin, name))
  by_kind = collections.Counter()
  for name, ps in time_ps.items():
    by_kind[kernel_kind(name)] += ps / 1e9 / updates
  kernels = [[ps / 1e9 / updates, launches[name] / updates, kernel_kind(name), name]
             for name, ps in time_ps.most_common(top)]
  busy, gaps = _busy_and_gaps(intervals)
  span = (max(e for _, e in intervals) - min(b for b, _ in intervals)) if intervals else 0
  binned = {label: [0.0, 0.0] for _, label in GAP_BINS}
  for gap in gaps:
    label = next(label for bound, label in GAP_BINS if gap < bound * 1e6)
    binned[label][0] += 1 / updates
    binned[label][1] += gap / 1e9 / updates
  return {"updates": updates, "total_ms": sum(time_ps.values()) / 1e9 / updates,
          "launches": sum(launches.values()) / updates, "span_ms": span / 1e9 / updates,
          "busy_ms": busy / 1e9 / updates, "idle_ms": (span - busy) / 1e9 / updates,
          "gaps": binned, "stalls": _stalls(intervals, named, host_events, updates),
          "by_kind": {k: by_kind.get(k, 0.0) for k in KINDS}, "kernels": kernels}


def profile_tables(profile):
  """Markdown: GPU time per update by kind, where the GPU idled, then the largest kernels."""
  total = profile["total_ms"]
  if not total:
    return "no GPU kernels in the trace (no GPU, or the profiler saw none)"
  lines = ["| kind | ms/update | share |", "|---|---:|---:|"]
  for kind in KINDS:
    ms = profile["by_kind"][kind]
    lines.append(f"| {kind} | {ms:.2f} | {100 * ms / total:.0f}% |")
  lines.append(f"| **total** | {total:.2f} | 100% |")
  lines += ["", f"Per update: {profile['launches']:,.0f} device events (kernels and copies), "
            f"span {profile['span_ms']:.2f} ms, busy {profile['busy_ms']:.2f} ms, "
            f"idle {profile['idle_ms']:.2f} ms", "",
            # TensorFlow 2.21's XLA runs its command buffers (CUDA graphs) thunk by thunk
            # while a profiler session is active, with no flag to keep them: the traced call
            # launches every kernel on its own, the timed calls do not (BENCHMARKS.md).
            "Traced without XLA's CUDA graphs (off under the profiler): the short idle "
            "stretches are those of kernel-by-kernel launches.", "",
            "| idle stretch | count/update | ms/update |", "|---|---:|---:|"]
  for _, label in GAP_BINS:
    count, ms = profile["gaps"][label]
    lines.append(f"| {label} | {count:,.1f} | {ms:.2f} |")
  stalls = profile.get("stalls") or {}
  if stalls.get("next") or stalls.get("host"):
    lines += ["", "During the idle stretches of 1 ms or more:", "",
              "| per update | what | name |", "|---:|---|---|"]
    lines += [f"| {count:.1f} | GPU event that ended it | `{name[:90]}` |"
              for count, name in stalls["next"]]
    lines += [f"| {ms:.2f} ms | host event running | `{name[:90]}` |"
              for ms, name in stalls["host"]]
  if stalls.get("next_medium"):
    lines += ["", "The GPU events that ended the idle stretches of 10 us to 1 ms:", "",
              "| stretches/update | ms/update | next event |", "|---:|---:|---|"]
    lines += [f"| {count:.1f} | {ms:.2f} | `{name[:90]}` |"
              for count, ms, name in stalls["next_medium"]]
  lines += ["", "| ms/update | launches/update | kind | kernel |", "|---:|---:|---|---|"]
  for ms, count, kind, name in profile["kernels"]:
    lines.append(f"| {ms:.2f} | {count:g} | {kind} | `{name[:90]}` |")
  return "\n".join(lines)


def device_description():
  """The GPU's name as TensorFlow reports it (e.g. "NVIDIA H100 80GB HBM3"), else the CPU."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU")
  return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def run_worker():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  row = json.loads(FLAGS.worker)
  for gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)
  try:
    result = measure_row(**row)
  except tf.errors.ResourceExhaustedError as error:
    result = dict(row, oom=True, error=str(error).splitlines()[0][:300])
  _harness.emit(result)


# === Driver ===

def _rows():
  rows = []
  models = ["tiny"] if FLAGS.smoke else FLAGS.models
  tasks = [f"phase{p}" for p in FLAGS.phases] + (["squad"] if FLAGS.squad else [])
  dtypes = ["float32"] if FLAGS.smoke else FLAGS.dtypes
  xlas = [x.lower() in ("true", "1", "yes") for x in FLAGS.xla]
  for model in models:
    for task in tasks:
      for dtype in dtypes:
        for xla, attention, strategy, prefetch, device_loop in itertools.product(
            xlas, FLAGS.attention_implementations, FLAGS.distribution_strategies,
            [a.lower() for a in FLAGS.prefetch_to_device],
            [d.lower() for d in FLAGS.device_loop]):
          row = {"model": model, "task": task, "dtype": dtype, "xla": xla,
                 "attention_implementation": attention, "distribution_strategy": strategy,
                 "prefetch_to_device": prefetch, "device_loop": device_loop,
                 "attention_probs_dropout_prob": FLAGS.attention_probs_dropout_prob,
                 "batch_size": FLAGS.batch_size or DEFAULT_BATCH[(model, task)],
                 "steps_per_loop": 2 if FLAGS.smoke else FLAGS.steps_per_loop,
                 "loops": 1 if FLAGS.smoke else FLAGS.loops}
          if FLAGS.smoke:
            row.update(seq_length=32 if task != "phase2" else 64,
                       num_predictions=None if task == "squad" else 5)
          rows.append(row)
  return rows


def xla_flags_env(environ, extra):
  """``environ``'s XLA_FLAGS with ``extra`` appended (later flags win in XLA's parser)."""
  return " ".join(f for f in (environ.get("XLA_FLAGS", ""), extra or "") if f).strip()


def compile_timers(log_text, top=8):
  """The ``top`` largest compile timers in a worker's log (``--compile_timers``), summed by
  label: ``[[label, seconds, count], ...]``. A label loses the module it names
  ("GpuCompiler::RunHloPasses for a_inference_update_1" -> "GpuCompiler::RunHloPasses",
  "Compiling [a_inference_update_1] for CPU using JIT" -> "Compiling for CPU using JIT")."""
  totals = {}
  for match in _TIMER_LINE.finditer(log_text):
    label = re.sub(r"\s*\[[^\]]*\]", "", match.group("label"))
    label = re.sub(r" for \S+$", "", label)
    # The persistent XLA cache's timers name the function after a colon.
    label = re.sub(r"(cache entry):.*$", r"\1", label).strip()
    seconds, count = totals.get(label, (0.0, 0))
    totals[label] = (seconds + int(match.group("us")) / 1e6, count + 1)
  return [[label, seconds, count] for label, (seconds, count)
          in sorted(totals.items(), key=lambda item: -item[1][0])[:top]]


def _run_subprocess(row):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  if FLAGS.compile_timers:
    env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE=COMPILE_TIMER_VMODULE)
  if FLAGS.xla_flags:
    env["XLA_FLAGS"] = xla_flags_env(os.environ, FLAGS.xla_flags)
  if FLAGS.xla_cache_dir:
    from bert_tf.training import xla_cache  # pylint: disable=import-outside-toplevel
    env["TF_XLA_FLAGS"] = xla_cache.tf_xla_flags_with(FLAGS.xla_cache_dir, os.environ)
  proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                         "--worker=" + json.dumps(row)],
                        capture_output=True, text=True, env=env, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith(_harness.RESULT_PREFIX)]
  if not lines:
    tail = [l for l in (proc.stderr or proc.stdout).strip().splitlines()
            if not _INFO_LINE.match(l)][-8:]
    return dict(row, failed=True, error="\n".join(tail))
  result = json.loads(lines[-1][len(_harness.RESULT_PREFIX):])
  if FLAGS.compile_timers:
    result["compile_timers"] = compile_timers(proc.stderr)
  return result


def run_row(row):
  """One row, halving the batch on out-of-memory up to ``--oom_retries`` times."""
  if FLAGS.profile:
    row = dict(row, profile=True, profile_top=FLAGS.profile_top)
  for _ in range(FLAGS.oom_retries + 1):
    result = measure_row(**row) if FLAGS.in_process else _run_subprocess(row)
    if FLAGS.xla_flags:
      result["xla_flags"] = FLAGS.xla_flags
    if FLAGS.xla_cache_dir:
      result["xla_cache_dir"] = FLAGS.xla_cache_dir
    if not result.get("oom") or row["batch_size"] == 1:
      return result
    print(f"  out of memory at batch {row['batch_size']}; halving", flush=True)
    row = dict(row, batch_size=row["batch_size"] // 2)
  return result


def _format(result):
  name = (f"{result['model']:5s} {result['task']:6s} {result['dtype']:8s} "
          f"xla={str(result['xla']):5s} b{result['batch_size']:<4d}")
  if result.get("attention_implementation", "auto") != "auto":
    name += f" attention={result['attention_implementation']}"
  if result.get("distribution_strategy", "default") != "default":
    name += f" strategy={result['distribution_strategy']}"
  if result.get("prefetch_to_device", "auto") != "auto":
    name += f" prefetch_to_device={result['prefetch_to_device']}"
  if result.get("device_loop", "auto") != "auto":
    name += f" device_loop={result['device_loop']}"
  if result.get("xla_flags"):
    name += f" XLA_FLAGS+={result['xla_flags']}"
  if result.get("xla_cache_dir"):
    name += f" xla_cache_dir={result['xla_cache_dir']}"
  if result.get("failed") or result.get("oom"):
    return f"{name} FAILED: {result.get('error', '')}"
  mfu = f"MFU {100 * result['mfu']:5.1f}%" if result.get("mfu") is not None else "MFU n/a"
  return (f"{name} {result['sequences_per_second']:9.1f} seq/s "
          f"{result['model_tflops_per_second']:7.1f} TFLOP/s {mfu}  loss {result['loss']:.3f}"
          f"  warm-up {result['warmup_s']:.0f} s" + _memory(result))


def _memory(result):
  if result.get("peak_gpu_memory_gb") is None:
    return ""
  return (f"  GPU memory peak {result['peak_gpu_memory_gb']:.1f} GB "
          f"({result.get('peak_gpu_memory_gb_with_warmup', float('nan')):.1f} with warm-up)")


def table(results):
  """Markdown table of the results."""
  lines = ["| model | task | seq | dtype | XLA | batch | sequences/s | model TFLOP/s | MFU |",
           "|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    if r.get("failed") or r.get("oom"):
      lines.append(f"| {r['model']} | {r['task']} | | {r['dtype']} | {r['xla']} | "
                   f"{r['batch_size']} | failed | | |")
      continue
    mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
    lines.append(f"| {r['model']} | {r['task']} | {r['seq_length']} | {r['dtype']} | "
                 f"{'yes' if r['xla'] else 'no'} | {r['batch_size']} | "
                 f"{r['sequences_per_second']:.1f} | {r['model_tflops_per_second']:.1f} | "
                 f"{mfu} |")
  return "\n".join(lines)


def run_torch_peer(result):
  """The Hugging Face peer on the same GPU, shapes, batch and attention dropout as a bert_tf
  pretraining ``result`` (torch.compile, bf16 autocast when the row is bfloat16): a result
  dict with ``sequences_per_second`` and ``mfu`` computed as bert_tf's."""
  from bert_tf import flops  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  cmd = [FLAGS.torch_python, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "_torch_peer.py"),
         "--device=cuda", "--compile", "--mode=train", f"--config={result['model']}",
         f"--batch_size={result['batch_size']}", f"--seq_length={result['seq_length']}",
         f"--num_predictions={result['num_predictions']}", f"--dtype={result['dtype']}",
         # Timed as the row is: loops calls of steps_per_loop updates, the GPU waited for
         # once per call.
         f"--steps_per_sync={result['steps_per_loop']}",
         f"--min_repeats={result['loops']}", f"--max_repeats={result['loops']}",
         # The row's attention dropout (0 where bert_tf's row takes the fused kernel): the
         # same work on both sides.
         f"--attention_probs_dropout_prob={result['attention_probs_dropout_prob']}"]
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith(_harness.RESULT_PREFIX)]
  if not lines:
    return {"failed": True, "error": "\n".join((proc.stderr or proc.stdout).splitlines()[-8:])}
  peer = json.loads(lines[-1][len(_harness.RESULT_PREFIX):])
  config = BertConfig.from_dict(_harness.config_dict(result["model"]))
  flops_per_sequence = flops.train_flops_per_sequence(config, result["seq_length"],
                                                      result["num_predictions"])
  # Sequences over the whole timed calls, the statistic of bert_tf's rows (not a median).
  peer["sequences_per_second"] = (result["batch_size"] * peer["steps_per_call"]
                                  * len(peer["times_s"]) / sum(peer["times_s"]))
  peer["mfu"] = (flops.mfu(flops_per_sequence, peer["sequences_per_second"],
                           result["peak_flops"]) if result.get("peak_flops") else None)
  return peer


def side_by_side(pairs):
  """Markdown: bert_tf against the PyTorch peer, row by row (with each side's attention
  dropout: equal work only where they match)."""
  lines = ["| model | task | dtype | XLA | batch | attention dropout | bert_tf seq/s | MFU | GB | "
           "HF torch.compile seq/s | MFU | GB | bert_tf / peer |",
           "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
  def pct(x):
    return f"{100 * x:.1f}%" if x is not None else "n/a"
  for r, p in pairs:
    dropout = f"{r.get('attention_probs_dropout_prob')} / {p.get('attention_probs_dropout_prob')}"
    if r.get("failed") or r.get("oom") or p.get("failed"):
      lines.append(f"| {r['model']} | {r['task']} | {r['dtype']} | {r['xla']} | "
                   f"{r['batch_size']} | {dropout} | failed | | | failed | | | |")
      continue
    lines.append(
        f"| {r['model']} | {r['task']} | {r['dtype']} | {'yes' if r['xla'] else 'no'} | "
        f"{r['batch_size']} | {dropout} | {r['sequences_per_second']:,.0f} | "
        f"{pct(r.get('mfu'))} | {r.get('peak_gpu_memory_gb', float('nan')):.1f} | "
        f"{p['sequences_per_second']:,.0f} | {pct(p.get('mfu'))} | "
        f"{p.get('peak_gpu_memory_gb', float('nan')):.1f} | "
        f"{r['sequences_per_second'] / p['sequences_per_second']:.2f}x |")
  return "\n".join(lines)


def _nvidia_smi():
  try:
    return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                           "--format=csv,noheader"], capture_output=True, text=True,
                          timeout=30, check=False).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return None


def run_driver():
  if FLAGS.xla_flags and FLAGS.in_process:
    os.environ["XLA_FLAGS"] = xla_flags_env(os.environ, FLAGS.xla_flags)
  if FLAGS.xla_cache_dir and FLAGS.in_process:
    from bert_tf.training import xla_cache  # pylint: disable=import-outside-toplevel
    os.environ["TF_XLA_FLAGS"] = xla_cache.tf_xla_flags_with(FLAGS.xla_cache_dir)
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  header = {"date": time.strftime("%Y-%m-%d"), "nvidia_smi": _nvidia_smi(),
            "tensorflow": tf.__version__, "keras": keras.__version__,
            "cuda_build": tf.sysconfig.get_build_info().get("cuda_version"),
            "cudnn_build": tf.sysconfig.get_build_info().get("cudnn_version")}
  print(json.dumps(header), flush=True)
  results, pairs = [], []
  for row in _rows():
    result = run_row(row)
    results.append(result)
    print(_format(result), flush=True)
    if result.get("compile_timers") is not None:
      trace = f"{result['trace_s']:.1f} s" if result.get("trace_s") is not None else "n/a"
      print(f"  warm-up {result['warmup_s']:.1f} s: Python trace {trace}; "
            + "; ".join(f"{label} {seconds:.1f} s ({count}x)"
                        for label, seconds, count in result["compile_timers"]), flush=True)
    if isinstance(result.get("profile"), dict):  # a failed row keeps its row's profile=True
      print(profile_tables(result["profile"]), flush=True)
    if (FLAGS.torch_python and result["task"] != "squad" and not result.get("failed")
        and not result.get("oom")):
      peer = run_torch_peer(result)
      result["torch_peer"] = peer
      pairs.append((result, peer))
  print()
  print(table(results))
  if pairs:
    print()
    print(side_by_side(pairs))
  if FLAGS.output_json:
    from bert_tf import fileio  # pylint: disable=import-outside-toplevel
    with fileio.atomic_write(FLAGS.output_json) as f:
      json.dump(dict(header, results=results), f, indent=1)
  return results


def main(argv):
  del argv
  if FLAGS.worker:
    run_worker()
  else:
    run_driver()


if __name__ == "__main__":
  define_flags()
  app.run(main)
