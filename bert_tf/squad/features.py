"""``SquadExample``s -> fixed-length ``InputFeatures`` (doc spans), TFRecords and tf.data.

As the original ``convert_examples_to_features`` (REFERENCE.md "Fine-tuning: SQuAD"):

  - the question is WordPiece-tokenized and cut to ``max_query_length`` tokens;
  - every context word is WordPiece-tokenized; ``tok_to_orig_index`` maps sub-tokens back to
    words (``SquadExample.doc_tokens``);
  - a context longer than ``max_tokens_for_doc = max_seq_length - len(query) - 3`` is cut into
    overlapping doc spans of that many tokens, each starting ``min(length, doc_stride)`` after
    the previous one; every span becomes one feature
    ``[CLS] query [SEP] span [SEP]`` (segment ids 0 ... 0 1 ... 1), zero-padded;
  - a sub-token in several spans is "max context" only in the span where
    ``min(left, right) + 0.01 * span_length`` is largest (first such span on ties);
  - training: the answer's word span is moved to sub-tokens and tightened to the tokens of
    the annotated text when they occur inside it (``improve_answer_span``); a span that does
    not contain the whole answer, and any impossible question, gets positions (0, 0), the
    [CLS] token.

Shapes (S = max_seq_length, B = batch size):
  input_ids, input_mask, segment_ids: [S] per feature, [B, S] int32 from ``input_dataset``;
  unique_ids, start_positions, end_positions, is_impossible: [] per feature, [B].
"""

import collections
import dataclasses
import os
from typing import NamedTuple, Optional

from absl import logging
import tensorflow as tf

from bert_tf import fileio
from bert_tf.data import pipeline
from bert_tf.errors import BertTfError

# The original numbers features from here, one per doc span, in example order.
FIRST_UNIQUE_ID = 1000000000
# unique_id of the rows ``input_dataset(pad_to_batch=True)`` adds to fill the last batch;
# no feature has it, so post-processing never looks such a result up.
PADDING_UNIQUE_ID = 0


@dataclasses.dataclass
class InputFeatures:
  """One doc span of one example, as fed to the model.

  Attributes:
    unique_id: int, FIRST_UNIQUE_ID + running feature number; joins model outputs back.
    example_index: int, index of the example in the list given to the converter.
    doc_span_index: int, which span of that example's context this is.
    tokens: list of str, ``[CLS] query [SEP] span [SEP]`` without padding.
    token_to_orig_map: {position in ``tokens``: index into ``example.doc_tokens``}, for the
      context positions only.
    token_is_max_context: {position in ``tokens``: bool}, context positions only.
    input_ids, input_mask, segment_ids: lists of max_seq_length ints (0-padded).
    start_position, end_position: training only: answer positions in ``tokens`` (0, 0 if the
      span does not hold the answer or the question is impossible); None otherwise.
    is_impossible: the example's ``is_impossible``.
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: list
  token_to_orig_map: dict
  token_is_max_context: dict
  input_ids: list
  input_mask: list
  segment_ids: list
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False


class DocSpan(NamedTuple):
  """A window on the context's sub-tokens: ``all_doc_tokens[start:start + length]``."""
  start: int
  length: int


def check_lengths(max_seq_length, doc_stride, max_query_length):
  """Raises a one-line BertTfError for lengths that leave no room for the context.

  The original checks max_seq_length > max_query_length + 3 in its flag validation (and
  would loop forever with doc_stride <= 0).
  """
  if max_query_length < 1:
    raise BertTfError(f"max_query_length ({max_query_length}) must be at least 1 "
                      "(--max_query_length)")
  if max_seq_length <= max_query_length + 3:
    raise BertTfError(f"max_seq_length ({max_seq_length}) must be greater than "
                      f"max_query_length ({max_query_length}) + 3 "
                      "(--max_seq_length, --max_query_length)")
  if doc_stride < 1:
    raise BertTfError(f"doc_stride ({doc_stride}) must be at least 1 (--doc_stride)")


def make_doc_spans(num_doc_tokens, max_tokens_for_doc, doc_stride):
  """The sliding windows over ``num_doc_tokens`` sub-tokens (none for an empty context).

  Each span is ``max_tokens_for_doc`` long (the last one may be shorter and ends at the end
  of the context); the next starts ``min(length, doc_stride)`` later.
  """
  doc_spans = []
  start_offset = 0
  while start_offset < num_doc_tokens:
    length = min(num_doc_tokens - start_offset, max_tokens_for_doc)
    doc_spans.append(DocSpan(start=start_offset, length=length))
    if start_offset + length == num_doc_tokens:
      break
    start_offset += min(length, doc_stride)
  return doc_spans


def check_is_max_context(doc_spans, cur_span_index, position):
  """Whether span ``cur_span_index`` gives sub-token ``position`` its most context.

  A token's score in a span is min(tokens left of it, tokens right of it) + 0.01 * span
  length; the first span with the highest score wins.
  """
  best_score = None
  best_span_index = None
  for span_index, doc_span in enumerate(doc_spans):
    end = doc_span.start + doc_span.length - 1
    if position < doc_span.start or position > end:
      continue
    num_left_context = position - doc_span.start
    num_right_context = end - position
    score = min(num_left_context, num_right_context) + 0.01 * doc_span.length
    if best_score is None or score > best_score:
      best_score = score
      best_span_index = span_index
  return cur_span_index == best_span_index


def improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
  """The sub-token span inside [input_start, input_end] whose text is the tokenized answer.

  Character annotations are first moved to whole words, so "1895" in "(1895-1943)." covers
  the whole word; the sub-tokens "( 1895 - 1943 ) ." then contain an exact match. Earliest
  start, then longest span, wins; with no match the word span is kept (e.g. "Japan" in
  "Japanese", which WordPiece does not split).

  Args:
    doc_tokens: the context's sub-tokens (list of str).
    input_start, input_end: inclusive sub-token span of the answer's words.
    tokenizer: anything with ``tokenize(text) -> list of str``.
    orig_answer_text: the annotated answer (str).
  """
  tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
  for new_start in range(input_start, input_end + 1):
    for new_end in range(input_end, new_start - 1, -1):
      if " ".join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
        return new_start, new_end
  return input_start, input_end


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training,
                                 first_unique_id=FIRST_UNIQUE_ID):
  """Yields the ``InputFeatures`` of ``examples``, one per doc span, in order.

  Args:
    examples: list of ``SquadExample`` (training ones need their answer fields).
    tokenizer: a ``FullTokenizer``-like object: ``tokenize(text) -> [str]`` and
      ``convert_tokens_to_ids([str]) -> [int]``.
    max_seq_length: S, length of every feature (384 in the original).
    doc_stride: how far consecutive doc spans start apart at most (128).
    max_query_length: the question is cut to this many sub-tokens (64).
    is_training: fill start_position / end_position.
    first_unique_id: unique_id of the first feature.

  An example with an empty context (no sub-tokens) has no doc span, hence no feature; its
  prediction is then the original's nonce (see ``postprocess``).

  Raises:
    BertTfError: lengths that leave no room for the context (``check_lengths``).
  """
  check_lengths(max_seq_length, doc_stride, max_query_length)
  unique_id = first_unique_id
  num_truncated_queries = 0
  for example_index, example in enumerate(examples):
    query_tokens = tokenizer.tokenize(example.question_text)
    if len(query_tokens) > max_query_length:
      query_tokens = query_tokens[:max_query_length]
      num_truncated_queries += 1

    tok_to_orig_index = []  # sub-token -> word
    orig_to_tok_index = []  # word -> its first sub-token (the next word's if it has none)
    all_doc_tokens = []
    for i, token in enumerate(example.doc_tokens):
      orig_to_tok_index.append(len(all_doc_tokens))
      for sub_token in tokenizer.tokenize(token):
        tok_to_orig_index.append(i)
        all_doc_tokens.append(sub_token)

    tok_start_position = None
    tok_end_position = None
    if is_training and example.is_impossible:
      tok_start_position = -1
      tok_end_position = -1
    if is_training and not example.is_impossible:
      tok_start_position = orig_to_tok_index[example.start_position]
      if example.end_position < len(example.doc_tokens) - 1:
        tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
      else:
        tok_end_position = len(all_doc_tokens) - 1
      tok_start_position, tok_end_position = improve_answer_span(
          all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
          example.orig_answer_text)

    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3  # [CLS], [SEP], [SEP]
    doc_spans = make_doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    for doc_span_index, doc_span in enumerate(doc_spans):
      tokens = ["[CLS]", *query_tokens, "[SEP]"]
      segment_ids = [0] * len(tokens)
      token_to_orig_map = {}
      token_is_max_context = {}
      for split_token_index in range(doc_span.start, doc_span.start + doc_span.length):
        token_to_orig_map[len(tokens)] = tok_to_orig_index[split_token_index]
        token_is_max_context[len(tokens)] = check_is_max_context(
            doc_spans, doc_span_index, split_token_index)
        tokens.append(all_doc_tokens[split_token_index])
        segment_ids.append(1)
      tokens.append("[SEP]")
      segment_ids.append(1)

      input_ids = list(tokenizer.convert_tokens_to_ids(tokens))
      input_mask = [1] * len(input_ids)  # 1 = real token, attended to
      padding = [0] * (max_seq_length - len(input_ids))
      input_ids += padding
      input_mask += padding
      segment_ids += padding

      start_position = None
      end_position = None
      if is_training and not example.is_impossible:
        doc_start = doc_span.start
        doc_end = doc_span.start + doc_span.length - 1
        if tok_start_position >= doc_start and tok_end_position <= doc_end:
          doc_offset = len(query_tokens) + 2
          start_position = tok_start_position - doc_start + doc_offset
          end_position = tok_end_position - doc_start + doc_offset
        else:  # This span does not hold the whole answer: point at [CLS].
          start_position = 0
          end_position = 0
      if is_training and example.is_impossible:
        start_position = 0
        end_position = 0

      yield InputFeatures(
          unique_id=unique_id,
          example_index=example_index,
          doc_span_index=doc_span_index,
          tokens=tokens,
          token_to_orig_map=token_to_orig_map,
          token_is_max_context=token_is_max_context,
          input_ids=input_ids,
          input_mask=input_mask,
          segment_ids=segment_ids,
          start_position=start_position,
          end_position=end_position,
          is_impossible=example.is_impossible)
      unique_id += 1
  if num_truncated_queries:
    logging.info("Cut %d questions to max_query_length=%d tokens", num_truncated_queries,
                 max_query_length)


# --- TFRecords ----------------------------------------------------------------------------------

def name_to_features(seq_length, is_training):
  """The TFRecord feature spec (the original's names): {name: tf.io.FixedLenFeature}.

  Prediction files hold unique_ids, input_ids, input_mask, segment_ids; training files also
  start_positions, end_positions and is_impossible.
  """
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
  }
  if is_training:
    spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["is_impossible"] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def feature_to_tf_example(feature, is_training):
  """``InputFeatures`` -> ``tf.train.Example`` with the ``name_to_features`` names."""

  def int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  features = collections.OrderedDict()
  features["unique_ids"] = int_feature([feature.unique_id])
  features["input_ids"] = int_feature(feature.input_ids)
  features["input_mask"] = int_feature(feature.input_mask)
  features["segment_ids"] = int_feature(feature.segment_ids)
  if is_training:
    features["start_positions"] = int_feature([feature.start_position])
    features["end_positions"] = int_feature([feature.end_position])
    features["is_impossible"] = int_feature([int(bool(feature.is_impossible))])
  return tf.train.Example(features=tf.train.Features(feature=features))


class FeatureWriter:
  """Writes ``InputFeatures`` to one TFRecord file, atomically (renamed on ``close``).

  Example:
    with FeatureWriter(path, is_training=True) as writer:
      for feature in convert_examples_to_features(...):
        writer.write(feature)
  """

  def __init__(self, filename, is_training):
    self.filename = filename
    self.is_training = is_training
    self.num_features = 0
    self._tmp = fileio.temp_name(filename)
    parent = os.path.dirname(filename)
    if parent and not tf.io.gfile.exists(parent):
      tf.io.gfile.makedirs(parent)
    self._writer = tf.io.TFRecordWriter(self._tmp)

  def write(self, feature):
    self._writer.write(feature_to_tf_example(feature, self.is_training).SerializeToString())
    self.num_features += 1

  def close(self):
    """Finishes the file and renames it onto ``filename``."""
    self._writer.close()
    fileio.commit(self._tmp, self.filename)

  def abort(self):
    """Drops the partial file; ``filename`` is left as it was."""
    self._writer.close()
    fileio.discard(self._tmp)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      self.close()
    else:
      self.abort()


def _decode_record(record, spec):
  example = tf.io.parse_single_example(record, spec)
  # tf.train.Example stores int64; TPUs want int32.
  return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
          for name, t in example.items()}


def _pad_batch(batch, batch_size):
  """Pads a (short, last) batch to ``batch_size`` rows of zeros: unique_ids 0, input_mask 0."""
  num_rows = tf.shape(batch["unique_ids"])[0]
  padded = {}
  for name, t in batch.items():
    paddings = [[0, batch_size - num_rows]] + [[0, 0]] * (t.shape.rank - 1)
    t = tf.pad(t, paddings, constant_values=PADDING_UNIQUE_ID if name == "unique_ids" else 0)
    padded[name] = tf.ensure_shape(t, [batch_size] + t.shape.as_list()[1:])
  return padded


def input_dataset(input_file, seq_length, is_training, batch_size, drop_remainder=None,
                  pad_to_batch=False, shuffle_buffer_size=100, seed=None, input_context=None):
  """A tf.data pipeline over SQuAD TFRecords, as the original ``input_fn``.

  Training repeats forever and shuffles with a buffer of 100 records (the original's).
  Every element is a dict of int32 tensors: input_ids / input_mask / segment_ids [B, S],
  unique_ids [B], and for training start_positions / end_positions / is_impossible [B].

  Args:
    input_file: a TFRecord file (or list of files) written by ``FeatureWriter``.
    seq_length: S, the max_seq_length the file was written with.
    is_training: read the answer positions; repeat and shuffle.
    batch_size: B (global batch size; per replica with ``input_context``).
    drop_remainder: drop a short last batch; default: ``is_training``. Static shapes need
      True, or ``pad_to_batch``.
    pad_to_batch: for prediction: fill the last batch with zero rows (unique_ids
      ``PADDING_UNIQUE_ID``) so every batch has B rows and all shapes are static (TPU).
      Their results match no feature and are ignored by ``postprocess``.
    shuffle_buffer_size: records in the training shuffle buffer.
    seed: shuffle seed (None: nondeterministic, like the original).
    input_context: a ``tf.distribute.InputContext`` to shard the records across input
      pipelines (after the shuffle: ``pipeline.shard_records``) and use the per-replica
      batch size.
  """
  if drop_remainder is None:
    drop_remainder = is_training
  spec = name_to_features(seq_length, is_training)
  d = tf.data.TFRecordDataset(input_file)
  if is_training:
    d = d.repeat()
    d = d.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
  # After the (seeded) order: N workers then train on the global batches of one process.
  d = pipeline.shard_records(d, input_context,
                             1 if isinstance(input_file, (str, bytes)) else len(input_file))
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  d = d.map(lambda record: _decode_record(record, spec),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  d = d.batch(batch_size, drop_remainder=drop_remainder)
  if pad_to_batch and not drop_remainder:
    d = d.map(lambda batch: _pad_batch(batch, batch_size))
  return d.prefetch(tf.data.AUTOTUNE)
