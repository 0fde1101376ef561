"""Pretraining TFRecords checked against the model before training: one line, not a crash.

``check_pretraining_inputs`` (run_pretraining, before the model is built):
  - the records' token ids (``input_ids``, ``masked_lm_ids``) are below the config's
    ``vocab_size`` and their ``segment_ids`` below ``type_vocab_size``: an id past the
    embedding table is a gather error on GPU/TPU (or, on some devices, silently a zero row),
    deep in the first step. Checked on the first records of every file (``SAMPLE`` from the
    first file, the first record of each other), or on every record with ``full``;
  - with ``full`` (``--check_input_files``), every record's framing and CRCs first
    (``record_check``: file, byte offset and record number of the first damage).
The records' shapes are checked by ``pipeline.check_pretraining_files`` (every pipeline).
"""

import contextlib
import re

import numpy as np
import tensorflow as tf

from bert_tf.data import record_check
from bert_tf.errors import BertTfError

SAMPLE = 64  # records of the first file whose ids are checked when not checking fully
_ID_FEATURES = (("input_ids", "vocab_size"), ("masked_lm_ids", "vocab_size"),
                ("segment_ids", "type_vocab_size"))


def _max_ids(path, compression, count=None, lengths=None):
  """{feature: (max id, index of the first record holding it)} over the first ``count``
  records of ``path`` (all with None), parsed in batches by TensorFlow. With ``lengths``
  ({feature: values each record must have}), a record with another number of values is a
  one-line ``BertTfError`` (a file of another shape appended to this one)."""
  spec = {name: tf.io.RaggedFeature(tf.int64) for name, _ in _ID_FEATURES}
  dataset = tf.data.TFRecordDataset(path, compression_type=compression)
  if count is not None:
    dataset = dataset.take(count)
  best = {}
  start = 0
  with record_check.naming_damaged_records([path]):
    for batch in dataset.batch(4096):
      parsed = tf.io.parse_example(batch, spec)
      for name, _ in _ID_FEATURES:
        ragged = parsed[name]
        rows = ragged.row_lengths().numpy()
        expected = (lengths or {}).get(name)
        if expected is not None and (rows != expected).any():
          bad = int(np.argmax(rows != expected))
          # (Record 0 of every file was checked by pipeline.check_pretraining_files.)
          raise BertTfError(
              f"{path}: record {start + bad} has {rows[bad]} {name}, the records before it "
              f"{expected} (data of another --max_seq_length/--max_predictions_per_seq "
              "appended to this file?)")
        if not rows.sum():
          continue
        row_max = tf.reduce_max(ragged, axis=1).numpy()   # [records in batch]
        row_max = np.where(rows > 0, row_max, -1)
        i = int(np.argmax(row_max))
        if name not in best or row_max[i] > best[name][0]:
          best[name] = (int(row_max[i]), start + i)
      start += int(batch.shape[0])
  return best


def check_pretraining_inputs(files, config, max_seq_length, max_predictions_per_seq,
                             full=False, progress=None, config_file=None):
  """Raises a one-line ``BertTfError`` when the pretraining TFRecords ``files`` do not fit:
  records of other shapes (``pipeline.check_pretraining_files``), or ids past ``config``'s
  ``vocab_size``/``type_vocab_size`` (naming the file, record and id); with ``full``, every
  record of every file is checked, its CRCs first. ``config_file`` (optional) is named."""
  from bert_tf.data import pipeline  # pylint: disable=import-outside-toplevel
  if full:
    record_check.check_files(files, progress=progress)
  compression = pipeline._compression(files)  # pylint: disable=protected-access
  pipeline.check_pretraining_files(files, max_seq_length, max_predictions_per_seq, compression)
  sizes = {"vocab_size": config.vocab_size, "type_vocab_size": config.type_vocab_size}
  where = f" of {config_file}" if config_file else ""
  for i, path in enumerate(files):
    maxima = _max_ids(path, compression, None if full else (SAMPLE if i == 0 else 1),
                      lengths={"input_ids": max_seq_length, "segment_ids": max_seq_length,
                               "masked_lm_ids": max_predictions_per_seq})
    for name, limit_name in _ID_FEATURES:
      found = maxima.get(name)
      if found is not None and found[0] >= sizes[limit_name]:
        raise BertTfError(
            f"{path}: record {found[1]} has {name} {found[0]}, but the config{where} has "
            f"{limit_name} {sizes[limit_name]} (the data was made with another vocab, or "
            "another --bert_config_file is needed)")


_PARSE_ERROR = re.compile(r"Key: (\w+)\.\s+Can't parse serialized Example")
_GATHER_ERROR = re.compile(r"indices\[[^\]]*\] = (-?\d+) is not in \[0, (\d+)\)")


def describe_bad_record(message, files, config, max_seq_length, max_predictions_per_seq):
  """The one line for TensorFlow's error ``message`` met while training or evaluating on
  ``files``, when it says a record does not fit (a record of another shape, past the first
  ones ``check_pretraining_files`` reads; an id past the embedding table, past the sample
  ``check_pretraining_inputs`` reads); else None."""
  names = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
  advice = "--check_input_files names the file and record"
  parse = _PARSE_ERROR.search(message or "")
  if parse:
    return (f"a record in --input_file ({names}) does not parse as pretraining data of "
            f"--max_seq_length {max_seq_length}, --max_predictions_per_seq "
            f"{max_predictions_per_seq} (its {parse.group(1)}): data of another shape in a "
            f"file? {advice}")
  gather = _GATHER_ERROR.search(message or "")
  if gather:
    limit = int(gather.group(2))
    table = {config.vocab_size: "vocab_size", config.type_vocab_size: "type_vocab_size",
             config.max_position_embeddings: "max_position_embeddings"}.get(limit)
    if table:
      return (f"an id {gather.group(1)} in --input_file ({names}) is not below the config's "
              f"{table} {limit} (data made with another vocab?): {advice}")
  return None


@contextlib.contextmanager
def naming_bad_records(files, config, max_seq_length, max_predictions_per_seq):
  """``record_check.naming_damaged_records``, and records that do not fit the model
  (``describe_bad_record``) as one-line ``BertTfError``s."""
  with record_check.naming_damaged_records(files):
    try:
      yield
    except tf.errors.InvalidArgumentError as e:
      line = describe_bad_record(e.message, list(files), config, max_seq_length,
                                 max_predictions_per_seq)
      if line is None:
        raise
      raise BertTfError(line) from None
