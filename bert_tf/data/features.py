"""The one pretraining feature spec: names, dtypes and shapes of a pretraining TFRecord.

These are the features Google's ``create_pretraining_data.py`` writes and ``run_pretraining.py``
reads; ``bert_tf.data.pretraining`` writes them, ``bert_tf.data.pipeline`` parses them, and the
training code imports the names from here.

Shape legend:
  L = max_seq_length (tokens per sequence, padded)
  P = max_predictions_per_seq (masked positions per sequence, padded)

  feature                 stored     parsed   shape  meaning
  input_ids               int64      int32    [L]    token ids, [CLS] A [SEP] B [SEP], 0-padded
  input_mask              int64      int32    [L]    1 for real tokens, 0 for padding
  segment_ids             int64      int32    [L]    0 for [CLS] A [SEP], 1 for B [SEP], 0 pad
  masked_lm_positions     int64      int32    [P]    positions of the masked tokens, 0-padded
  masked_lm_ids           int64      int32    [P]    original ids at those positions, 0-padded
  masked_lm_weights       float32    float32  [P]    1.0 for a real prediction, 0.0 for padding
  next_sentence_labels    int64      int32    [1]    0: B follows A, 1: B is a random sentence
"""

import collections

SEQ = "max_seq_length"
PRED = "max_predictions_per_seq"
ONE = "1"

# name -> (stored dtype name, length), in the order the original builds its tf.train.Example.
PRETRAINING_FEATURES = collections.OrderedDict([
    ("input_ids", ("int64", SEQ)),
    ("input_mask", ("int64", SEQ)),
    ("segment_ids", ("int64", SEQ)),
    ("masked_lm_positions", ("int64", PRED)),
    ("masked_lm_ids", ("int64", PRED)),
    ("masked_lm_weights", ("float32", PRED)),
    ("next_sentence_labels", ("int64", ONE)),
])

PRETRAINING_FEATURE_NAMES = tuple(PRETRAINING_FEATURES)


def feature_length(name, max_seq_length, max_predictions_per_seq):
  """The number of values feature ``name`` holds in every record (L, P or 1)."""
  _, length = PRETRAINING_FEATURES[name]
  return {SEQ: max_seq_length, PRED: max_predictions_per_seq, ONE: 1}[length]


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
  """``{name: tf.io.FixedLenFeature}`` for ``tf.io.parse_example`` of pretraining records.

  Example:
    >>> spec = pretraining_feature_spec(128, 20)
    >>> spec["masked_lm_weights"]
    FixedLenFeature(shape=[20], dtype=tf.float32, default_value=None)
  """
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return {
      name: tf.io.FixedLenFeature(
          [feature_length(name, max_seq_length, max_predictions_per_seq)], tf.as_dtype(dtype))
      for name, (dtype, _) in PRETRAINING_FEATURES.items()
  }


def cast_parsed_features(features):
  """int64 -> int32 for every integer feature (TPUs want int32); floats are kept."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
          for name, t in features.items()}
