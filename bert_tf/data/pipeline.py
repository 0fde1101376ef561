"""tf.data input pipelines for pretraining TFRecords (Google's or bert_tf's).

Shape legend: B = per-replica batch, L = max_seq_length, P = max_predictions_per_seq.

``pretraining_dataset`` yields dicts of int32 (``masked_lm_weights`` float32) tensors with
static shapes ``[B, L]`` / ``[B, P]`` / ``[B, 1]``, batches always whole
(``drop_remainder``), as TPUs need. Training reads files interleaved and shuffled, repeats
forever; eval reads the records in order, once, or (``repeat``) over and over as the original's
eval input did: ``max_eval_steps`` batches exactly, an eval set smaller than that wrapping
around (its first records count again). Several input pipelines (multi-worker,
``tf.distribute.InputContext``) shard by record after the seeded ordering (``shard_records``),
so N workers train on the same global batches as one process.

Dynamic masking (RoBERTa style, optional): every time a sequence is read its masked positions
are drawn anew in the graph with the original's rule: candidates are all real tokens but the
special ones; ``num_to_predict = min(P, max(1, round(len * masked_lm_prob)))`` positions; each
becomes [MASK] with probability 0.8, stays with 0.1, becomes a random vocab id with 0.1.
"""

import os
import re

import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.data import features as feature_spec
from bert_tf.errors import BertTfError

_SHUFFLE_RECORDS = 100  # the original's record-level shuffle buffer after interleaving


def expand_file_patterns(file_patterns, flag="--input_file"):
  """Comma-separated string or list of files/globs -> sorted list of files (error if none,
  naming ``flag``).

  A glob leaves out ``fileio.temp_name`` files (``<name>.tmp-<pid>-<8 hex>``): the half
  written output of a data preparation still running or killed, never an input.
  """
  if isinstance(file_patterns, str):
    file_patterns = [p for p in file_patterns.split(",") if p.strip()]
  files = []
  for pattern in file_patterns:
    matched = tf.io.gfile.glob(pattern.strip())
    temps = []
    if fileio.glob_chars(pattern):
      temps = [f for f in matched if fileio.temp_target(os.path.basename(f)) is not None]
      matched = [f for f in matched if f not in temps]
    if not matched:
      if link := fileio.dangling_link(pattern.strip()):
        raise BertTfError(f"{flag}: {link}")
      why = (f" (only {temps[0]!r}, the temporary file of a write that is running or was "
             "stopped)" if temps else "")
      raise BertTfError(f"no input files match {pattern.strip()!r} ({flag}){why}")
    files.extend(sorted(matched))
  return files


def _compression(files):
  """GZIP when every file is named .gz, None when none is; a mix is one line (one pipeline
  reads its files one way: the .gz ones were read as plain and called damaged)."""
  gzipped = [f for f in files if f.endswith(".gz")]
  if gzipped and len(gzipped) < len(files):
    plain = next(f for f in files if not f.endswith(".gz"))
    raise BertTfError(f"--input_file mixes GZIP files (named .gz: {gzipped[0]}) and plain "
                      f"ones ({plain}): give files of one kind")
  return "GZIP" if gzipped else None


def _first_record(path, compression):
  """The first serialized record of a TFRecord file, or None when it has none."""
  try:
    for record in tf.data.TFRecordDataset(path, compression_type=compression).take(1):
      return record.numpy()
  except tf.errors.OpError as e:
    if isinstance(e, tf.errors.DataLossError):  # a damaged first record: file and offset
      from bert_tf.data import record_check  # pylint: disable=import-outside-toplevel
      line = record_check.describe_data_loss([path], e.message)
      if line is not None:
        raise BertTfError(line) from None
    # TF's message without its "{{function_node ...}}" prefix and " [Op:...]" suffix.
    first = re.sub(r"^\{\{.*?\}\}\s*|\s*\[Op:.*$", "", (e.message or "").strip().split("\n")[0])
    raise BertTfError(f"{path}: not a readable TFRecord file"
                      f"{' (GZIP)' if compression else ''}: {first}") from None
  return None


def _shape(example):
  """(max_seq_length, max_predictions_per_seq) of a pretraining record (None: no feature)."""
  def length(name):
    feature = example.features.feature.get(name)
    return None if feature is None else len(feature.int64_list.value)
  return length("input_ids"), length("masked_lm_ids")


def check_pretraining_files(files, max_seq_length, max_predictions_per_seq, compression=None):
  """Host-side check before a pipeline is built, so that bad input is one line, not a hang.

  Reads the first record of every file (one read each) and checks them against the feature
  spec. Raises ``BertTfError`` when no file has a record (a training input of empty files
  would repeat nothing forever), when two files hold records of different shapes (shards of
  another max_seq_length or max_predictions_per_seq mixed in one --input_file: both named),
  or when the records lack a feature or hold another number of values (files written for
  another max_seq_length or max_predictions_per_seq: TensorFlow's own error is a traceback
  from inside the pipeline). Only first records are checked: a file is written with one
  setting.
  """
  first = None
  for path in files:
    record = _first_record(path, compression)
    if record is None:
      continue
    example = tf.train.Example.FromString(record)
    if first is None:
      first = (path, record, example)
    elif _shape(example) != _shape(first[2]):
      (seq_a, pred_a), (seq_b, pred_b) = _shape(first[2]), _shape(example)
      raise BertTfError(
          f"--input_file mixes records of two shapes: {first[0]} has max_seq_length {seq_a}, "
          f"max_predictions_per_seq {pred_a}; {path} has {seq_b}, {pred_b} (data made with "
          "other --max_seq_length/--max_predictions_per_seq): give files of one shape")
  if first is None:
    names = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    raise BertTfError(f"no records in the input file(s): {names}")
  path, record, example = first
  for name, (dtype, _) in feature_spec.PRETRAINING_FEATURES.items():
    expected = feature_spec.feature_length(name, max_seq_length, max_predictions_per_seq)
    if name not in example.features.feature:
      raise BertTfError(f"{path}: the records have no feature {name!r} (not pretraining "
                        "data?)")
    feature = example.features.feature[name]
    values = feature.float_list.value if dtype == "float32" else feature.int64_list.value
    if len(values) != expected:
      flag = {feature_spec.SEQ: "--max_seq_length", feature_spec.PRED:
              "--max_predictions_per_seq"}.get(feature_spec.PRETRAINING_FEATURES[name][1])
      raise BertTfError(f"{path}: feature {name} has {len(values)} values, expected "
                        f"{expected}" + (f" ({flag} {expected}): the file was written for "
                                         f"{flag} {len(values)}" if flag else ""))


def dynamic_mask(features, max_predictions_per_seq, vocab_size, mask_id, special_ids,
                 masked_lm_prob=0.15, seed=(0, 0)):
  """Re-draws ``masked_lm_*`` for one (unbatched) example, in the graph.

  ``seed``: a shape-[2] int seed for this example's stateless random draws (the pipeline
  gives every example its own from ``tf.data.Dataset.random``).
  ``input_ids`` are first restored from the stored masks (the original ids sit in
  ``masked_lm_ids``), so records made with static masks can be re-masked.
  """
  ids = features["input_ids"]  # [L]
  seq_length = ids.shape[0]
  positions = features["masked_lm_positions"]
  weights = features["masked_lm_weights"]
  real = tf.cast(weights > 0, tf.int32)
  restore = tf.scatter_nd(positions[:, None], (features["masked_lm_ids"] - tf.gather(
      ids, positions)) * real, [seq_length])
  ids = ids + restore  # the unmasked sequence
  candidate = tf.cast(features["input_mask"], tf.bool)
  for special in special_ids:
    candidate &= tf.not_equal(ids, special)
  num_tokens = tf.reduce_sum(features["input_mask"])
  num_to_predict = tf.minimum(
      max_predictions_per_seq,
      tf.maximum(1, tf.cast(tf.round(tf.cast(num_tokens, tf.float32) * masked_lm_prob),
                            tf.int32)))
  num_to_predict = tf.minimum(num_to_predict, tf.reduce_sum(tf.cast(candidate, tf.int32)))
  # A random order of the candidates: random keys, non-candidates pushed to the end.
  # Three independent stateless streams from the example's seed.
  seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)
  keys = tf.random.stateless_uniform([seq_length], seed=seeds[0])
  keys = tf.where(candidate, keys, 2.0)
  order = tf.argsort(keys)  # [L]: shuffled candidates first
  # The first num_to_predict candidates, sorted; unused slots get L (sorted last).
  picked = tf.sort(tf.where(tf.range(max_predictions_per_seq) < num_to_predict,
                            order[:max_predictions_per_seq], seq_length))  # [P]
  valid = picked < seq_length
  picked = tf.where(valid, picked, 0)
  original = tf.gather(ids, picked)
  draw = tf.random.stateless_uniform([max_predictions_per_seq], seed=seeds[1])
  random_ids = tf.random.stateless_uniform([max_predictions_per_seq], seed=seeds[2], minval=0,
                                           maxval=vocab_size, dtype=tf.int32)
  replacement = tf.where(draw < 0.8, mask_id, tf.where(draw < 0.9, original, random_ids))
  updates = tf.where(valid, replacement - original, 0)
  masked = ids + tf.scatter_nd(picked[:, None], updates, [seq_length])
  out = dict(features)
  out["input_ids"] = masked
  out["masked_lm_positions"] = picked
  out["masked_lm_ids"] = tf.where(valid, original, 0)
  out["masked_lm_weights"] = tf.cast(valid, tf.float32)
  return out


def shard_records(dataset, input_context, num_files=None):
  """Input pipeline ``i`` of ``n`` keeps records ``i, i + n, i + 2n, ...`` of ``dataset``.

  Every pipeline reads the same ordered (seeded) stream of serialized records, so with a
  per-replica batch ``b`` pipeline ``i``'s k-th batches hold, between them, exactly the rows of
  the k-th global batch of one process reading the stream alone: the same examples in every
  update whatever the number of workers (the losses are normalised over the global batch,
  ``training.loop``). Each worker reads every record but parses only its own; reading is cheap
  beside a BERT step, and no worker needs a file of its own (one file serves any number).
  """
  if not input_context or input_context.num_input_pipelines <= 1:
    return dataset
  n = input_context.num_input_pipelines
  if input_context.input_pipeline_id == 0:
    logging.info("input: %s file(s) read in the same order by each of %d input pipelines, "
                 "sharded by record (pipeline i keeps records i, i+%d, ...)",
                 "?" if num_files is None else num_files, n, n)
  return dataset.shard(n, input_context.input_pipeline_id)


def pretraining_dataset(file_patterns, batch_size, max_seq_length, max_predictions_per_seq,
                        is_training, input_context=None, seed=None, dynamic_masking=None,
                        use_next_sentence=True, cycle_length=None, deterministic=None,
                        repeat=None, skip_batches=0):
  """Batches of pretraining features from TFRecords (plain or ``.gz``).

  Args:
    file_patterns: comma-separated string or list of files/globs.
    batch_size: per-replica batch size (use ``input_context.get_per_replica_batch_size``).
    is_training: shuffle, interleave files and repeat; else read in order.
    repeat: eval: read the files in order over and over (the original's eval input, which
      repeated so that ``max_eval_steps`` batches always come; the reader must stop); default:
      ``is_training``. Training always repeats.
    input_context: ``tf.distribute.InputContext``; records are sharded across input pipelines
      after the global (seeded) ordering (``shard_records``).
    seed: makes shuffling (and dynamic masking) deterministic; None = nondeterministic.
    dynamic_masking: None, or dict(vocab_size=, mask_id=, special_ids=, masked_lm_prob=).
    use_next_sentence: False drops ``next_sentence_labels`` (MLM-only training).
    deterministic: tf.data determinism; default: deterministic when ``seed`` is given, and
      always for evaluation (``is_training=False`` reads in file order: with ``repeat`` and a
      number of eval steps, which records are evaluated depends on it).
    skip_batches: leave out this pipeline's first batches (a resumed run's, read before its
      checkpoint): the same batches as ``.skip(skip_batches)`` of the result, but their
      records are skipped before parsing and masking, which would take most of the time.
  """
  files = expand_file_patterns(file_patterns)
  spec = feature_spec.pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
  compression = _compression(files)
  check_pretraining_files(files, max_seq_length, max_predictions_per_seq, compression)
  if deterministic is None:
    deterministic = seed is not None or not is_training
  options = tf.data.Options()
  options.deterministic = deterministic
  if is_training:
    dataset = tf.data.Dataset.from_tensor_slices(files)
    dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    cycle = min(cycle_length or 4, len(files))
    dataset = dataset.interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
        cycle_length=cycle, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    dataset = dataset.shuffle(_SHUFFLE_RECORDS, seed=seed)
  else:
    dataset = tf.data.TFRecordDataset(files, compression_type=compression)
    if repeat:
      dataset = dataset.repeat()

  if dynamic_masking:
    # One stateless seed pair per example: reproducible with ``seed``, fresh on every read.
    # Zipped before sharding, so that an example's mask does not depend on the pipeline count.
    seeds = tf.data.Dataset.random(seed=seed).batch(2, drop_remainder=True)
    dataset = tf.data.Dataset.zip((dataset, seeds))
  dataset = shard_records(dataset, input_context, len(files))
  if skip_batches:
    # Parsing and masking are one-to-one and keep the order, and the batches drop no
    # remainder of a stream that goes on: batch k starts at record k * batch_size.
    dataset = dataset.skip(skip_batches * batch_size)

  def parse(record, example_seed=None):
    example = feature_spec.cast_parsed_features(tf.io.parse_single_example(record, spec))
    if dynamic_masking:
      example = dynamic_mask(example, max_predictions_per_seq, seed=example_seed,
                             **dynamic_masking)
    if not use_next_sentence:
      example.pop("next_sentence_labels")
    return example

  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=deterministic)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
