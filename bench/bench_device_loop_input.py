"""The device loop's input: host call time with and without tf.data keeping the next call's
batches ready (``Trainer.input_dataset_fn``), on CPU with an input pipeline made slow on
purpose (a sleep per batch, no CPU used) beside updates that take CPU time.

With the device loop each host call first takes its ``steps_per_loop`` batches, then runs
their updates. Without a buffer of that many batches tf.data makes them while the host waits
(the device idle); with it, while the device runs the previous call's updates.

  .venv/bin/python bench/bench_device_loop_input.py [--sleep_ms=20] [--steps_per_loop=10]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf import optimization  # noqa: E402
from bert_tf.modeling import BertConfig  # noqa: E402
from bert_tf.training import loop  # noqa: E402
from bert_tf.training.pretraining import PretrainingTask  # noqa: E402
from tests.reference import google_models  # noqa: E402


def run(buffered, sleep_ms, steps_per_loop, calls, batch=16, seq=64):
  config = dict(google_models.tiny_config_dict(), hidden_size=256, intermediate_size=1024,
                num_attention_heads=4, num_hidden_layers=2)
  features = google_models.random_pretraining_features(
      config, batch_size=batch, seq_length=seq, num_predictions=8, seed=3)

  def slow(x):
    time.sleep(sleep_ms / 1000)
    return x

  def dataset_fn(ctx):
    ds = tf.data.Dataset.from_tensors(features).repeat()
    # The pipeline's own small buffer, as pipeline.pretraining_dataset ends.
    return ds.map(lambda f: dict(f, input_ids=tf.py_function(
        slow, [f["input_ids"]], tf.int32))).map(
            lambda f: dict(f, input_ids=tf.ensure_shape(f["input_ids"], [batch, seq]))
        ).prefetch(2)

  keras.utils.set_random_seed(0)
  task = PretrainingTask(BertConfig.from_dict(config))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-4, num_train_steps=10**6, num_warmup_steps=10)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=10**6, steps_per_loop=steps_per_loop,
      jit_compile=True))
  trainer.whole_update, trainer.device_loop = True, True
  if not buffered:
    trainer.input_dataset_fn = lambda fn: fn
  iterator = trainer.make_iterator(dataset_fn)
  train_loop = trainer.build_train_loop()
  n = tf.constant(steps_per_loop)
  train_loop(iterator, n).numpy()  # compile
  start = time.perf_counter()
  for _ in range(calls):
    train_loop(iterator, n).numpy()
  return (time.perf_counter() - start) / calls


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sleep_ms", type=float, default=20)
  parser.add_argument("--steps_per_loop", type=int, default=10)
  parser.add_argument("--calls", type=int, default=5)
  args = parser.parse_args()
  for buffered in (False, True):
    t = run(buffered, args.sleep_ms, args.steps_per_loop, args.calls)
    print(f"buffer of steps_per_loop batches: {buffered!s:5}  host call {t * 1000:7.1f} ms "
          f"({args.steps_per_loop} updates; the input alone: "
          f"{args.steps_per_loop * args.sleep_ms:.0f} ms)")


if __name__ == "__main__":
  main()
