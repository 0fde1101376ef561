"""The train step's Python trace (what a run does before XLA compiles its first update), here
and at another commit side by side in one run: seconds to trace the Trainer's train loop
(``get_concrete_function``: TensorFlow builds the graph of the step, its gradients and the
optimizer's updates; nothing is compiled or run). Every run and every resume pays it first;
on a GPU it precedes the XLA compile.

  .venv/bin/python bench/bench_trace.py --configs=tiny,base,large --baseline=HEAD~1

``--baseline=REV``: the same measurement from a temporary ``git worktree`` of REV (removed at
the end), interleaved with this checkout's, each in a fresh process. ``--paths``: ``inline``
(the CPU default: a step per loop iteration, per-variable XLA updates) and/or
``device_loop`` (the GPU default: the whole update as one XLA computation in XLA's while).
Prints one markdown table (median of ``--repeats`` processes per cell).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(config_name, path, root):
  """In a fresh process of the checkout ``root``: build the Trainer, time the trace."""
  sys.path.insert(0, root)
  sys.path.insert(0, os.path.join(ROOT, "bench"))
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  import _harness  # pylint: disable=import-outside-toplevel
  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  from bert_tf.training.pretraining import PretrainingTask  # noqa: E501 pylint: disable=import-outside-toplevel

  config = _harness.config_dict(config_name)
  batch = _harness.pretraining_batch(config, 8, 128, 20)
  keras.utils.set_random_seed(0)
  task = PretrainingTask(BertConfig.from_dict(config))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-4, num_train_steps=100, num_warmup_steps=10)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=tempfile.mkdtemp(), num_train_steps=100, steps_per_loop=10, jit_compile=True))
  if path == "device_loop":
    trainer.whole_update, trainer.device_loop = True, True
  train_loop = trainer.build_train_loop()
  iterator = trainer.make_iterator(
      lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
  start = time.perf_counter()
  train_loop.compiled.get_concrete_function(iterator, tf.constant(10))
  seconds = time.perf_counter() - start
  import bert_tf  # pylint: disable=import-outside-toplevel
  print("TRACE " + json.dumps({"seconds": seconds, "bert_tf": bert_tf.__file__}), flush=True)


def measure(config_name, path, root):
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", config_name,
                         path, root], capture_output=True, text=True, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("TRACE ")]
  if proc.returncode or not lines:
    raise RuntimeError(f"{root}: {config_name} {path} failed:\n{proc.stderr[-3000:]}")
  result = json.loads(lines[-1][len("TRACE "):])
  if not result["bert_tf"].startswith(os.path.join(root, "")):
    raise RuntimeError(f"{root}: the child imported {result['bert_tf']}")
  return result["seconds"]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--configs", default="tiny,base,large")
  parser.add_argument("--paths", default="inline,device_loop")
  parser.add_argument("--baseline", default=None, help="A git revision to compare with.")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    child(*args.child)
    return
  roots = [("this checkout", ROOT)]
  worktree = None
  if args.baseline:
    worktree = tempfile.mkdtemp(prefix="bench_trace_")
    os.rmdir(worktree)
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", worktree, args.baseline],
                   check=True, capture_output=True)
    roots.insert(0, (f"baseline {args.baseline}", worktree))
  try:
    head = [name for name, _ in roots]
    print("| config | path | " + " | ".join(f"{name} (s)" for name in head) +
          (" | ratio |" if worktree else " |"))
    print("|---|---|" + "---:|" * (len(head) + (1 if worktree else 0)))
    for config_name in args.configs.split(","):
      for path in args.paths.split(","):
        times = {name: [] for name in head}
        for _ in range(args.repeats):  # interleaved: load drifts alike on both sides
          for name, root in roots:
            times[name].append(measure(config_name, path, root))
        medians = [statistics.median(times[name]) for name in head]
        cells = " | ".join(f"{m:.2f}" for m in medians)
        ratio = f" | {medians[-1] / medians[0]:.2f}x |" if worktree else " |"
        print(f"| {config_name} | {path} | {cells}{ratio}", flush=True)
  finally:
    if worktree:
      subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", worktree],
                     check=False, capture_output=True)
      shutil.rmtree(worktree, ignore_errors=True)


if __name__ == "__main__":
  main()
