"""Configs, synthetic batches and the timing loop shared by the model benchmarks (no TF).

Imported by the TensorFlow benchmarks and by the PyTorch peer (``bench/_torch_peer.py``, run
with another interpreter that has no TensorFlow), so that every framework gets the same
shapes and the same numbers. Shape legend: B = batch, S = sequence length, P = masked
positions per sequence.
"""

import json
import resource
import statistics
import time

import numpy as np

# Google's released BERT sizes (bert_config.json fields), vocab of bert-base-uncased.
CONFIGS = {
    # BERT-Tiny/Small/Base/Large of google-research/bert's README (L, H, A; I = 4H).
    "tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                 intermediate_size=512),
    "small": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                  intermediate_size=1024),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                 intermediate_size=3072),
    "large": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16,
                  intermediate_size=4096),
}
_COMMON = dict(vocab_size=30522, hidden_act="gelu", hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1, max_position_embeddings=512,
               type_vocab_size=2, initializer_range=0.02)


def config_dict(name):
  """A ``bert_config.json`` dict for one of ``CONFIGS``."""
  return dict(_COMMON, **CONFIGS[name])


def pretraining_batch(config, batch_size, seq_length, num_predictions, seed=0):
  """A full-length pretraining batch (no padding, every prediction real), int32/float32.

  Keys are the original's feature names: ``input_ids``, ``input_mask``, ``segment_ids`` [B,S];
  ``masked_lm_positions``, ``masked_lm_ids``, ``masked_lm_weights`` [B,P];
  ``next_sentence_labels`` [B,1]. Positions are sorted and avoid [CLS] (0) and the last [SEP].
  """
  rng = np.random.RandomState(seed)
  vocab = config["vocab_size"]
  input_ids = rng.randint(1000, vocab, size=(batch_size, seq_length)).astype(np.int32)
  segment_ids = (np.arange(seq_length)[None, :] >= seq_length // 2).astype(np.int32)
  segment_ids = np.repeat(segment_ids, batch_size, axis=0)
  positions = np.stack([
      np.sort(rng.choice(np.arange(1, seq_length - 1), num_predictions, replace=False))
      for _ in range(batch_size)]).astype(np.int32)
  return {
      "input_ids": input_ids,
      "input_mask": np.ones((batch_size, seq_length), np.int32),
      "segment_ids": segment_ids,
      "masked_lm_positions": positions,
      "masked_lm_ids": rng.randint(1000, vocab, size=(batch_size, num_predictions)).astype(
          np.int32),
      "masked_lm_weights": np.ones((batch_size, num_predictions), np.float32),
      "next_sentence_labels": rng.randint(0, 2, size=(batch_size, 1)).astype(np.int32),
  }


def squad_batch(config, batch_size, seq_length, seed=0):
  """A SQuAD training batch: encoder inputs + ``start_positions``/``end_positions`` [B]."""
  features = pretraining_batch(config, batch_size, seq_length, 1, seed)
  rng = np.random.RandomState(seed + 1)
  start = rng.randint(1, seq_length - 8, size=batch_size).astype(np.int32)
  return {
      "input_ids": features["input_ids"], "input_mask": features["input_mask"],
      "segment_ids": features["segment_ids"],
      "start_positions": start, "end_positions": start + rng.randint(0, 8, size=batch_size).astype(
          np.int32),
  }


def measure(step, min_repeats=3, max_repeats=20, budget_s=20.0, warmup=2, before_timed=None):
  """Times ``step()`` (which must block until its result is ready): returns a dict.

  ``first_call_s`` is the first call (tracing / XLA compilation / allocator warm-up
  included); then ``warmup - 1`` more untimed calls; then ``before_timed()`` if given (e.g.
  to reset a peak-memory counter); then timed calls until ``max_repeats``,
  or ``budget_s`` seconds once ``min_repeats`` are done. ``median_s`` is their median wall
  time, ``median_cpu_s`` the median CPU time of the process (all its threads) per call.
  """
  start = time.perf_counter()
  step()
  first = time.perf_counter() - start
  for _ in range(warmup - 1):
    step()
  if before_timed is not None:
    before_timed()
  times, cpu_times = [], []
  begin = time.perf_counter()
  while len(times) < max_repeats:
    if len(times) >= min_repeats and time.perf_counter() - begin > budget_s:
      break
    start, cpu_start = time.perf_counter(), time.process_time()
    step()
    times.append(time.perf_counter() - start)
    cpu_times.append(time.process_time() - cpu_start)
  return {"first_call_s": first, "times_s": times, "median_s": statistics.median(times),
          "cpu_times_s": cpu_times, "median_cpu_s": statistics.median(cpu_times)}


def peak_rss_mb():
  """This process's peak resident memory (``ru_maxrss``, KiB on Linux) in MiB."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


RESULT_PREFIX = "RESULT "


def emit(result):
  """Prints one worker's result as the line the driver reads."""
  print(RESULT_PREFIX + json.dumps(result), flush=True)
