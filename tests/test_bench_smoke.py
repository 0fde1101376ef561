"""bench/bench_pretraining_gpu.py's measurement runs the real loop: tiny config, on CPU.

Checks what the benchmark's numbers rest on: the Trainer really ran the timed updates
in-graph (the optimizer's step counter), the loss is finite, sequences/s is the batches
over the timed loops' wall time, and the FLOPs per sequence are bert_tf.flops' count.
"""

import importlib.util
import math
import os

import pytest

from bert_tf import flops
from bert_tf.modeling import BertConfig

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def _load_bench():
  import sys  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, _BENCH)
  spec = importlib.util.spec_from_file_location(
      "bench_pretraining_gpu", os.path.join(_BENCH, "bench_pretraining_gpu.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize("task", ["phase1", "squad"])
def test_measure_row_runs_the_trainer(task):
  bench = _load_bench()
  result = bench.measure_row("tiny", task, "float32", False, batch_size=2, steps_per_loop=3,
                             loops=2, seq_length=16, num_predictions=3)
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
      "non-XLA": 0.015})
  assert profile["kernels"][0] == [pytest.approx(0.3), 1.0, "GEMM", kernels[1]]
  assert [k[3] for k in profile["kernels"]] == [kernels[1], kernels[2], kernels[3]]
  table = bench.profile_tables(profile)
  assert "| transpose | 0.10 | 20% |" in table
