"""bench/bench_pretraining_gpu.py's measurement runs the real loop: tiny config, on CPU.

Checks what the benchmark's numbers rest on: the Trainer really ran the timed updates
in-graph (the optimizer's step counter), the loss is finite, sequences/s is the batches
over the timed loops' wall time, and the FLOPs per sequence are bert_tf.flops' count.
"""

import importlib.util
import json
import math
import os
import re
import sys

import pytest

from bert_tf import flops
from bert_tf.modeling import BertConfig

from tests import warm

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def _load_bench():
  sys.path.insert(0, _BENCH)
  spec = importlib.util.spec_from_file_location(
      "bench_pretraining_gpu", os.path.join(_BENCH, "bench_pretraining_gpu.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module



def _run_bench(*args, timeout=300):
  """bench/bench_pretraining_gpu.py run as a script with ``args``: the finished process."""
  return warm.run([sys.executable, os.path.join(_BENCH, "bench_pretraining_gpu.py"),
                   *args], capture_output=True, text=True, check=False, timeout=timeout)


_ROW = dict(batch_size=2, steps_per_loop=3, loops=2, seq_length=16, num_predictions=3)


@pytest.fixture(scope="module")
def phase1_default():
  """The tiny phase-1 row under the default strategy (shared by two tests)."""
  return _load_bench().measure_row("tiny", "phase1", "float32", False, **_ROW)


@pytest.mark.parametrize("task", ["phase1", "squad"])
def test_measure_row_runs_the_trainer(task, request):
  bench = _load_bench()
  result = (request.getfixturevalue("phase1_default") if task == "phase1" else
            bench.measure_row("tiny", task, "float32", False, **_ROW))
  assert result["steps_done"] == 3 * 3  # one warm-up call + 2 timed calls of 3 updates
  assert math.isfinite(result["loss"])
  assert result["sequences_per_second"] == pytest.approx(2 * 3 * 2 / sum(result["loop_times_s"]))
  config = BertConfig.from_dict(bench._harness.config_dict("tiny"))  # pylint: disable=protected-access
  expected = (flops.train_flops_per_sequence(config, 16, 3) if task == "phase1" else
              flops.train_flops_per_sequence(config, 16, None, next_sentence=False))
  assert result["train_flops_per_sequence"] == expected
  if result["peak_flops"] is None:  # a CPU (or an unknown GPU): no peak to divide by
    assert result["mfu"] is None
  else:
    assert result["mfu"] == pytest.approx(
        expected * result["sequences_per_second"] / result["peak_flops"])


def test_kernel_profile_table_from_a_trace(tmp_path):
  """--profile reads the profiler's XSpace: per-update GPU kernel time by kind and by kernel,
  from the CUDA stream lines only (the derived lines repeat the same time)."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  bench = _load_bench()
  space = xplane_pb2.XSpace()
  gpu = space.planes.add(name="/device:GPU:0")
  kernels = {1: "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 2: "input_transpose_fusion_387",
             3: "input_reduce_fusion_254", 4: "loop_add_subtract_fusion",
             5: "void cub::DeviceReduceKernel<squareHalf>",
             6: "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"}
  for i, name in kernels.items():
    gpu.event_metadata[i].name = name
  stream = gpu.lines.add(name="Stream #13(Compute)")
  # (kernel, microseconds) over 2 updates.
  for kernel, us in [(1, 300), (1, 300), (2, 200), (3, 100), (4, 50), (5, 30), (6, 20)]:
    stream.events.add(metadata_id=kernel, duration_ps=us * 1_000_000)
  derived = gpu.lines.add(name="XLA Ops")
  derived.events.add(metadata_id=1, duration_ps=10**12)
  space.planes.add(name="/host:CPU").lines.add(name="TF ops").events.add(duration_ps=10**12)
  (tmp_path / "plugins" / "profile" / "run").mkdir(parents=True)
  (tmp_path / "plugins" / "profile" / "run" / "host.xplane.pb").write_bytes(
      space.SerializeToString())

  profile = bench.kernel_profile(str(tmp_path), updates=2, top=3)
  assert profile["total_ms"] == pytest.approx(1.0 / 2 * 1.0)  # 1000 us over 2 updates
  assert profile["by_kind"] == pytest.approx({
      "GEMM": 0.3, "attention": 0.01, "transpose": 0.1, "reduce": 0.05, "elementwise": 0.025,
      "non-XLA": 0.015, "memcpy": 0.0})
  assert profile["kernels"][0] == [pytest.approx(0.3), 1.0, "GEMM", kernels[1]]
  assert [k[3] for k in profile["kernels"]] == [kernels[1], kernels[2], kernels[3]]
  table = bench.profile_tables(profile)
  assert "| transpose | 0.10 | 20% |" in table


def _space_with_gpu(kernel_names):
  """A profiler XSpace with a GPU plane whose event metadata names ``kernel_names``."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  space = xplane_pb2.XSpace()
  gpu = space.planes.add(name="/device:GPU:0")
  for i, name in kernel_names.items():
    gpu.event_metadata[i].name = name
  return space, gpu


def test_kernel_profile_idle_gaps_from_a_timeline(tmp_path):
  """--profile's idle time: the GPU's span minus the time any stream ran something, and the
  idle stretches binned by length, on a hand-made two-stream timeline (microseconds):
  compute [1,101] [106,156] [401,501], copies [140,170] [2000,2010]."""
  bench = _load_bench()
  space, gpu = _space_with_gpu({1: "loop_add_fusion", 2: "MemcpyH2D", 3: "Memset"})
  us = 1_000_000  # picoseconds
  compute = gpu.lines.add(name="Stream #7(Compute)", timestamp_ns=1_000)
  for offset, duration in [(0, 100), (105, 50), (400, 100)]:
    compute.events.add(metadata_id=1, offset_ps=offset * us, duration_ps=duration * us)
  copies = gpu.lines.add(name="Stream #9(MemcpyH2D)", timestamp_ns=0)
  copies.events.add(metadata_id=2, offset_ps=140 * us, duration_ps=30 * us)
  copies.events.add(metadata_id=3, offset_ps=2000 * us, duration_ps=10 * us)
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "host.xplane.pb").write_bytes(space.SerializeToString())

  profile = bench.kernel_profile(str(tmp_path), updates=1)
  assert profile["launches"] == 5
  assert profile["span_ms"] == pytest.approx(2.009)  # 1 us to 2010 us
  assert profile["busy_ms"] == pytest.approx(0.274)  # 100 + (106..170) 64 + 100 + 10
  assert profile["idle_ms"] == pytest.approx(2.009 - 0.274)
  assert profile["gaps"] == {"< 10 us": [1, pytest.approx(0.005)], "10-100 us": [0, 0],
                             "0.1-1 ms": [1, pytest.approx(0.231)],
                             ">= 1 ms": [1, pytest.approx(1.499)]}
  assert profile["by_kind"]["memcpy"] == pytest.approx(0.04)
  assert profile["by_kind"]["elementwise"] == pytest.approx(0.25)
  assert "idle 1.74 ms" in bench.profile_tables(profile)


def test_kernel_profile_names_what_the_long_stalls_waited_for(tmp_path):
  """The idle stretches of 1 ms or more: the GPU event that ended each, and the host events
  running during them by overlap; of 10 us to 1 ms: the event that ended each; on a hand-made
  timeline (microseconds): compute [0,100] [1600,1700] [1750,1800] [3000,3100]: stretches
  [100,1600] and [1800,3000], and [1700,1750] of 50 us (before loop_add_fusion); host thread 1
  runs IteratorGetNext [50,600] (500 us inside the first) and XlaLaunch [1500,1900] (100 +
  100), thread 2 an op [1650,1750] wholly between them (not counted)."""
  bench = _load_bench()
  space, gpu = _space_with_gpu({1: "loop_add_fusion", 2: "nvjet_first_gemm"})
  us = 1_000_000  # picoseconds
  compute = gpu.lines.add(name="Stream #7(Compute)", timestamp_ns=0)
  for kernel, offset, duration in [(1, 0, 100), (2, 1600, 100), (1, 1750, 50), (2, 3000, 100)]:
    compute.events.add(metadata_id=kernel, offset_ps=offset * us, duration_ps=duration * us)
  host = space.planes.add(name="/host:CPU")
  for i, name in {1: "IteratorGetNext", 2: "XlaLaunch", 3: "AddV2"}.items():
    host.event_metadata[i].name = name
  first = host.lines.add(name="tid 1", timestamp_ns=0)
  first.events.add(metadata_id=1, offset_ps=50 * us, duration_ps=550 * us)
  first.events.add(metadata_id=2, offset_ps=1500 * us, duration_ps=400 * us)
  second = host.lines.add(name="tid 2", timestamp_ns=1_000_000)  # a line's own origin: 1 ms
  second.events.add(metadata_id=3, offset_ps=650 * us, duration_ps=100 * us)
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "host.xplane.pb").write_bytes(space.SerializeToString())

  profile = bench.kernel_profile(str(tmp_path), updates=2)
  assert profile["gaps"][">= 1 ms"] == [1.0, pytest.approx(1.35)]  # (1500 + 1200) / 2 us
  assert profile["stalls"]["next"] == [[1.0, "nvjet_first_gemm"]]  # both, per update: 2 / 2
  assert profile["stalls"]["next_medium"] == [[0.5, pytest.approx(0.025), "loop_add_fusion"]]
  assert profile["stalls"]["host"] == [[pytest.approx(0.25), "IteratorGetNext"],
                                       [pytest.approx(0.1), "XlaLaunch"]]
  table = bench.profile_tables(profile)
  assert "| 1.0 | GPU event that ended it | `nvjet_first_gemm` |" in table
  assert "| 0.25 ms | host event running | `IteratorGetNext` |" in table
  assert "| 0.5 | 0.03 | `loop_add_fusion` |" in table


def test_xla_flags_are_appended():
  bench = _load_bench()
  assert bench.xla_flags_env({}, "--a=1") == "--a=1"
  assert bench.xla_flags_env({"XLA_FLAGS": "--dump"}, "--a=1") == "--dump --a=1"
  assert bench.xla_flags_env({"XLA_FLAGS": "--dump"}, None) == "--dump"


def test_one_device_strategy_trains_the_same_numbers(phase1_default):
  """--distribution_strategies=one_device (the input fetched to the device ahead of the
  loop) trains exactly what the default strategy (run_pretraining.py's default) does."""
  one_device = _load_bench().measure_row("tiny", "phase1", "float32", False,
                                         distribution_strategy="one_device", **_ROW)
  assert one_device["distribution_strategy"] == "one_device"
  assert one_device["steps_done"] == phase1_default["steps_done"] == 9
  assert one_device["loss"] == phase1_default["loss"]


def test_prefetch_rows_and_a_bad_value():
  """A row run with --prefetch_to_device=true records it; a bad value is a one-line flag
  error."""
  bench = _load_bench()
  result = bench.measure_row("tiny", "phase1", "float32", True, prefetch_to_device="true",
                             **_ROW)
  assert result["prefetch_to_device"] == "true"
  # On a CPU the whole update is not one XLA computation, so nothing is prefetched.
  assert result["prefetched"] is False
  inline = bench.measure_row("tiny", "phase1", "float32", True, prefetch_to_device="false",
                             **_ROW)
  assert inline["prefetch_to_device"] == "false" and inline["prefetched"] is False
  assert inline["loss"] == result["loss"]
  looped = bench.measure_row("tiny", "phase1", "float32", True, device_loop="true", **_ROW)
  assert looped["device_loop"] == "true" and looped["device_looped"] is False  # CPU: off
  assert looped["loss"] == result["loss"]
  proc = _run_bench("--smoke", "--prefetch_to_device=prefetch", timeout=120)
  assert proc.returncode != 0
  assert "--prefetch_to_device takes auto, true and/or false" in proc.stderr
  proc = _run_bench("--smoke", "--device_loop=maybe", timeout=120)
  assert proc.returncode != 0
  assert "--device_loop takes auto, true and/or false" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_a_failed_row_with_profile_is_reported_and_the_bench_goes_on():
  """--profile on a row that fails (here: cuDNN's kernel asked for on a CPU) prints the row as
  failed and goes on to the summary table, not a traceback."""
  proc = _run_bench("--smoke", "--phases=1", "--squad=false", "--xla=true",
                    "--attention_implementations=cudnn", "--profile")
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  assert "| tiny | phase1 | | float32 | True | 4 | failed |" in proc.stdout


@pytest.fixture(scope="module")
def stub_peer_run(tmp_path_factory):
  """One XLA smoke row with --compile_timers, --xla_cache_dir (a new folder) and --torch_python:
  a stub peer interpreter that records its arguments (torch is no dependency). Returns
  (stdout, the peer's arguments, the bench's arguments); run again with the same arguments by
  the XLA cache's test."""
  tmp_path = tmp_path_factory.mktemp("peer")
  record = tmp_path / "peer_args.json"
  stub = tmp_path / "peer_python"
  stub.write_text(
      f"#!{sys.executable}\n"
      "import json, sys\n"
      f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
      "flags = dict(a[2:].split('=', 1) for a in sys.argv[2:] if '=' in a)\n"
      # Three timed calls, one slow: the median call (0.2 s) is not the mean (0.5 s).
      "print('RESULT ' + json.dumps({'times_s': [0.2, 1.1, 0.2], 'median_s': 0.2,\n"
      "    'steps_per_call': int(flags['steps_per_sync']), 'peak_gpu_memory_gb': 1.5,\n"
      "    'attention_probs_dropout_prob': float(flags['attention_probs_dropout_prob'])}))\n")
  stub.chmod(0o755)
  args = ("--smoke", "--phases=1", "--squad=false", "--xla=true", "--compile_timers",
          "--attention_probs_dropout_prob=0", f"--torch_python={stub}",
          f"--xla_cache_dir={tmp_path / 'xla_cache'}")
  proc = _run_bench(*args)
  assert proc.returncode == 0, proc.stderr[-2000:]
  return proc.stdout, json.loads(record.read_text()), args


def test_the_peer_runs_with_the_rows_attention_dropout(stub_peer_run):
  """--torch_python: the peer is called with the row's shapes, its attention dropout (0
  where bert_tf's row takes the fused kernel) and its timing (calls of steps_per_loop
  updates), and the side-by-side table shows both sides' over their whole timed calls."""
  stdout, args, _ = stub_peer_run
  assert args[0] == os.path.join(_BENCH, "_torch_peer.py")
  # Timed as the smoke row is (--smoke: 1 call of 2 updates), the GPU waited for once a call.
  assert {"--config=tiny", "--batch_size=4", "--seq_length=32", "--num_predictions=5",
          "--mode=train", "--attention_probs_dropout_prob=0.0", "--steps_per_sync=2",
          "--min_repeats=1", "--max_repeats=1"} <= set(args[1:])
  assert "| tiny | phase1 | float32 | yes | 4 | 0.0 / 0.0 |" in stdout
  # The stub's 3 calls of 2 updates of 4 sequences in 1.5 s: 16 seq/s, over the whole time as
  # bert_tf's rows are (its median call would say 40).
  assert "| 16 | n/a | 1.5 |" in stdout


def test_compile_timers_say_where_the_warm_up_went(stub_peer_run):
  """--compile_timers: the row's warm-up line names the Python trace and TensorFlow's own
  timer of its XLA compiles (one per compiled function of the CPU path), read from the
  worker's log."""
  stdout, _, _ = stub_peer_run
  line = next(l for l in stdout.splitlines() if l.startswith("  warm-up "))
  match = re.match(r"  warm-up ([\d.]+) s: Python trace ([\d.]+) s; (.*)$", line)
  assert match, line
  warmup, trace = float(match.group(1)), float(match.group(2))
  assert 0 < trace < warmup
  compiles = re.search(r"Compilation of XLA executable ([\d.]+) s \((\d+)x\)", match.group(3))
  assert compiles, line
  assert 0 < float(compiles.group(1)) < warmup and int(compiles.group(2)) >= 1
  assert "Compiling for CPU using JIT" in line


def test_compile_timer_lines_are_summed_by_label():
  """The parser on XLA's GPU timer lines (labels as in TensorFlow 2.21's XLA) and the CPU's:
  the module a label names is dropped, equal labels are summed and counted, largest first."""
  bench = _load_bench()
  log = "\n".join([
      "I0000 00:00:1.0 1 gpu_compiler.cc:1] GpuCompiler::RunHloPasses for a_inference_update_7 "
      "time: 1.50 min (90000000 us) (cumulative: 1.50 min, max: 1.50 min, #called: 1)",
      "I0000 00:00:1.0 1 nvptx_compiler.cc:2] NVPTXCompiler::CompileTargetBinary - PtxToCubin "
      "for a_inference_update_7 time: 20.0 s (20000000 us) (cumulative: 20.0 s)",
      "I0000 00:00:1.0 1 nvptx_compiler.cc:2] NVPTXCompiler::CompileTargetBinary - PtxToCubin "
      "for a_inference_update_7 time: 5.0 s (5000000 us) (cumulative: 25.0 s)",
      "W0000 00:00:1.0 1 something.cc:3] unrelated time: 9 s",
      "I0000 00:00:1.0 1 cpu_compiler.cc:4] Compiling [a_inference_x__1] for CPU using JIT "
      "time: 34.2 ms (34242 us) (cumulative: 34.2 ms, max: 34.2 ms, #called: 1)",
      "I0000 00:00:1.0 1 device_compiler.h:5] Compilation of XLA executable time: 2.00 min "
      "(120000000 us) (cumulative: 2.00 min)",
  ])
  assert bench.compile_timers(log) == [
      ["Compilation of XLA executable", 120.0, 1],
      ["GpuCompiler::RunHloPasses", 90.0, 1],
      ["NVPTXCompiler::CompileTargetBinary - PtxToCubin", 25.0, 2],
      ["Compiling for CPU using JIT", pytest.approx(0.034242), 1]]
  assert bench.compile_timers(log, top=1) == [["Compilation of XLA executable", 120.0, 1]]


def test_a_repeated_row_loads_its_programs_from_the_xla_cache(stub_peer_run):
  """--xla_cache_dir: the second run of the same row compiles nothing (every program loaded
  from the folder the first run wrote), and its warm-up line says so. The first run is the
  module's stub-peer row."""
  first_stdout, _, args = stub_peer_run
  cache = next(a for a in args if a.startswith("--xla_cache_dir=")).split("=", 1)[1]
  proc = _run_bench(*args, timeout=200)
  assert proc.returncode == 0, proc.stderr[-2000:]
  first, second = (next(l for l in stdout.splitlines() if l.startswith("  warm-up "))
                   for stdout in (first_stdout, proc.stdout))
  for stdout in (first_stdout, proc.stdout):
    assert f"xla_cache_dir={cache}" in stdout
  assert "Compiling for CPU using JIT" in first and "Serializing and saving cache entry" in first
  assert "Compiling for CPU using JIT" not in second, second
  assert "Try loading serialized cache entry" in second
  assert os.listdir(cache)


def test_resume_skip_bench_runs_and_both_ways_give_the_same_batch():
  # The bench asserts itself that both ways give the same next batch (before printing a row).
  result = warm.run([sys.executable, os.path.join(_BENCH, "bench_resume_skip.py"),
                     "--skip_batches=20", "--batch_size=4", "--seq=64"],
                    capture_output=True, text=True, check=False, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  rows = [line for line in result.stdout.splitlines() if line.startswith(("| stored",
                                                                         "| dynamic"))]
  assert len(rows) == 2, result.stdout
