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
