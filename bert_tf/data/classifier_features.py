"""Classifier examples -> features -> cached TFRecords -> tf.data, as the original run_classifier.

  InputExample --convert_single_example--> InputFeatures --file_based_convert_examples_to_features
  --> TFRecord (atomic, cached by a fingerprint sidecar) --make_dataset--> batches of int32
  tensors with static shapes.

Shapes:
  S = max_seq_length
  B = batch size (per replica when an InputContext is given)

TFRecord features (the original's names; `CLASSIFIER_FEATURES` is the one spec):
  input_ids        int64 [S]  [CLS] a [SEP] (b [SEP]) word-piece ids, 0-padded
  input_mask       int64 [S]  1 for real tokens, 0 for padding
  segment_ids      int64 [S]  0 for [CLS] a [SEP], 1 for b [SEP], 0 for padding
  label_ids        int64 []   label id (float [] for a regression task such as STS-B; float
                              [C] 0/1 for a multi-label task of C labels: 1 where the label
                              is the example's)
  is_real_example  int64 []   0 for the PaddingInputExamples that fill the last eval batch

The tokenizer is any object with `tokenize(text) -> [word pieces]` and
`convert_tokens_to_ids(tokens) -> [ids]` (bert_tf.tokenization.FullTokenizer, or Google's).
"""

import collections
import collections.abc
import dataclasses
import hashlib
import json
import os
from typing import List, Union

import tensorflow as tf

from bert_tf import fileio
from bert_tf.data import pipeline
from bert_tf.data import record_check
from bert_tf.errors import BertTfError


class PaddingInputExample:
  """A fake example that makes the number of eval/predict examples a multiple of the batch
  size, so every batch has the same (static) shape; its features have is_real_example=0 and
  are left out of metrics and outputs."""

  def __eq__(self, other):
    return isinstance(other, PaddingInputExample)

  def __repr__(self):
    return "PaddingInputExample()"


@dataclasses.dataclass
class InputFeatures:
  """The features of one example (lists of length max_seq_length, Python ints).

  label_id is an int (class id), a float (regression score), or a list of C floats 0/1
  (multi-label: 1 for each of the example's labels).
  """
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  label_id: Union[int, float, List[float]]
  is_real_example: bool = True


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Trims the pair in place to max_length tokens in all, one token at a time from the end of
  the longer one (b when equal), as the original's _truncate_seq_pair."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def convert_single_example(example, label_list, max_seq_length, tokenizer,
                           is_regression=False, multi_label=False):
  """One `InputExample` (or `PaddingInputExample`) -> `InputFeatures`, as the original.

  A pair is truncated to max_seq_length - 3 word pieces, a single sentence cut to
  max_seq_length - 2; an empty text_b counts as no text_b (the original's `if text_b`).
  An unlabelled example (label None, a test set) gets label id 0, the id of the dummy label
  the original's processors gave test examples (multi-label: no label).

  Args:
    example: InputExample or PaddingInputExample.
    label_list: label names in id order (ignored for regression).
    max_seq_length: S, at least 3 for a pair / 2 for a single sentence.
    tokenizer: see the module docstring.
    is_regression: the label is a float score.
    multi_label: the label is a tuple of names (a multi-hot label_id of len(label_list)).

  Returns:
    InputFeatures with lists of length S.
  """
  if isinstance(example, PaddingInputExample):
    zeros = [0] * max_seq_length
    return InputFeatures(input_ids=list(zeros), input_mask=list(zeros),
                         segment_ids=list(zeros),
                         label_id=_label_id(None, label_list, is_regression, multi_label, None),
                         is_real_example=False)

  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  if tokens_b:
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)  # [CLS] a [SEP] b [SEP]
  else:
    tokens_a = tokens_a[:max_seq_length - 2]                    # [CLS] a [SEP]

  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    segment_ids += [1] * (len(tokens_b) + 1)
  input_ids = list(tokenizer.convert_tokens_to_ids(tokens))
  input_mask = [1] * len(input_ids)
  padding = [0] * (max_seq_length - len(input_ids))
  input_ids += padding
  input_mask += padding
  segment_ids += padding

  return InputFeatures(
      input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
      label_id=_label_id(example.label, label_list, is_regression, multi_label, example.guid),
      is_real_example=True)


def _label_id(label, label_list, is_regression, multi_label, guid):
  """The label_id feature of a label (None: unlabelled or padding)."""
  if is_regression:
    return 0.0 if label is None else float(label)
  label_list = list(label_list)
  if multi_label:
    names = () if label is None else label
    if isinstance(names, str) or any(name not in label_list for name in names):
      raise BertTfError(f"example {guid}: label {label!r} is not a tuple of names of "
                        f"{label_list}")
    return [float(name in names) for name in label_list]
  if label is None:
    return 0
  try:
    return label_list.index(label)
  except ValueError:
    raise BertTfError(f"example {guid}: label {label!r} is not one of "
                      f"{label_list}") from None


def pad_to_batch(examples, batch_size):
  """examples + PaddingInputExamples up to a multiple of batch_size (a new list)."""
  padded = list(examples)
  padded += [PaddingInputExample()] * (-len(padded) % batch_size)
  return padded


def feature_spec(max_seq_length, is_regression=False, multi_labels=0):
  """The TFRecord parsing spec: name -> tf.io.FixedLenFeature (the ONE place for it).

  ``multi_labels``: the number of labels C of a multi-label task (label_ids float [C]), else 0.
  """
  if multi_labels:
    label = tf.io.FixedLenFeature([multi_labels], tf.float32)
  else:
    label = tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64)
  return collections.OrderedDict([
      ("input_ids", tf.io.FixedLenFeature([max_seq_length], tf.int64)),
      ("input_mask", tf.io.FixedLenFeature([max_seq_length], tf.int64)),
      ("segment_ids", tf.io.FixedLenFeature([max_seq_length], tf.int64)),
      ("label_ids", label),
      ("is_real_example", tf.io.FixedLenFeature([], tf.int64)),
  ])


CLASSIFIER_FEATURES = tuple(feature_spec(1).keys())


def to_tf_example(feature, is_regression=False):
  """InputFeatures -> tf.train.Example with the original's feature names and order."""
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  if isinstance(feature.label_id, list):  # multi-label
    label = tf.train.Feature(float_list=tf.train.FloatList(value=feature.label_id))
  elif is_regression:
    label = tf.train.Feature(float_list=tf.train.FloatList(value=[feature.label_id]))
  else:
    label = ints([feature.label_id])
  features = collections.OrderedDict([
      ("input_ids", ints(feature.input_ids)),
      ("input_mask", ints(feature.input_mask)),
      ("segment_ids", ints(feature.segment_ids)),
      ("label_ids", label),
      ("is_real_example", ints([int(feature.is_real_example)])),
  ])
  return tf.train.Example(features=tf.train.Features(feature=features))


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file, is_regression=False,
                                            multi_label=False):
  """Writes one tf.train.Example per example to output_file (atomically).

  Returns:
    The number of records written (padding included).
  """
  parent = os.path.dirname(output_file)
  if parent:
    tf.io.gfile.makedirs(parent)
  # TFRecordWriter writes to a path, so fileio.atomic_write's file object cannot be used:
  # the same temp-name-then-rename is done here.
  tmp = fileio.temp_name(output_file)
  count = 0
  try:
    with tf.io.TFRecordWriter(tmp) as writer:
      for example in examples:
        feature = convert_single_example(example, label_list, max_seq_length, tokenizer,
                                         is_regression, multi_label)
        writer.write(to_tf_example(feature, is_regression).SerializeToString())
        count += 1
    fileio.commit(tmp, output_file)
  except BaseException:
    fileio.discard(tmp)
    raise
  return count


# === Cache ===

_PROBE = "Héllo, WORLD! 東京 naïve [CLS] un##affable\tdon't 3.14"


def tokenizer_fingerprint(tokenizer):
  """A hash of what decides the word pieces: the vocab, lower-casing, and the tokenizer's
  output on a probe string (so any behaviour change shows)."""
  h = hashlib.sha256()
  h.update(f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}".encode())
  vocab = getattr(tokenizer, "vocab", None)
  if isinstance(vocab, collections.abc.Mapping):
    for token, index in vocab.items():
      h.update(f"{token}\x00{index}\x01".encode("utf-8", "surrogatepass"))
  lower = getattr(tokenizer, "do_lower_case",
                  getattr(getattr(tokenizer, "basic_tokenizer", None), "do_lower_case", None))
  h.update(repr(lower).encode())
  h.update(repr(getattr(tokenizer, "never_split", None)).encode())
  if getattr(tokenizer, "preserve_unused_tokens", False):  # (hashes without it unchanged)
    h.update(b"preserve_unused_tokens")
  probe = tokenizer.tokenize(_PROBE)
  h.update(json.dumps([probe, list(tokenizer.convert_tokens_to_ids(probe))]).encode())
  return h.hexdigest()


def features_fingerprint(examples, label_list, max_seq_length, tokenizer, is_regression=False,
                         multi_label=False):
  """A hash of everything the TFRecord depends on (examples in order, padding included)."""
  h = hashlib.sha256()
  kind = {"multi_label": True} if multi_label else {}  # (single-label hashes stay as they were)
  h.update(json.dumps({"format": 1, "max_seq_length": max_seq_length,
                       "labels": list(label_list), "is_regression": bool(is_regression),
                       "tokenizer": tokenizer_fingerprint(tokenizer), **kind}).encode())
  for example in examples:
    if isinstance(example, PaddingInputExample):
      record = None
    else:
      record = [example.guid, example.text_a, example.text_b, example.label]
    h.update(json.dumps(record).encode("utf-8", "surrogatepass"))
    h.update(b"\n")
  return h.hexdigest()


def metadata_path(output_file):
  """The cache sidecar of a TFRecord: <output_file>.meta.json."""
  return output_file + ".meta.json"


def cached_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                        output_file, is_regression=False, multi_label=False):
  """`file_based_convert_examples_to_features` unless output_file already holds the same.

  Beside the TFRecord a sidecar <output_file>.meta.json records the fingerprint of the
  examples, labels, sequence length and tokenizer, the record counts and the file's size.
  When both exist and the fingerprint and size match and every record is sound (``record_check.reusable``: a damaged
  cache is written again), nothing is written. Both files are written atomically, the sidecar
  last, so an interrupted write is redone next time.

  Returns:
    dict with "num_examples" (records, padding included), "num_real_examples",
    "max_seq_length", "is_regression", "fingerprint", and "cached" (True when reused).
  """
  fingerprint = features_fingerprint(examples, label_list, max_seq_length, tokenizer,
                                     is_regression, multi_label)
  meta_file = metadata_path(output_file)
  if tf.io.gfile.exists(output_file) and tf.io.gfile.exists(meta_file):
    try:
      with tf.io.gfile.GFile(meta_file, "r") as f:
        meta = json.load(f)
    except (ValueError, tf.errors.OpError):
      meta = {}
    # Its size too: another script writing the same name (run_squad's and run_ner's
    # eval.tf_record) left this sidecar beside records it does not describe.
    if (meta.get("fingerprint") == fingerprint and
        meta.get("record_bytes") == tf.io.gfile.stat(output_file).length and
        record_check.reusable(output_file)):
      return dict(meta, cached=True)
  if tf.io.gfile.exists(meta_file):
    tf.io.gfile.remove(meta_file)  # The TFRecord is about to change.
  num_examples = file_based_convert_examples_to_features(
      examples, label_list, max_seq_length, tokenizer, output_file, is_regression, multi_label)
  meta = {
      "fingerprint": fingerprint,
      "num_examples": num_examples,
      "num_real_examples": sum(not isinstance(e, PaddingInputExample) for e in examples),
      "max_seq_length": max_seq_length,
      "is_regression": bool(is_regression),
      "record_bytes": tf.io.gfile.stat(output_file).length,
  }
  with fileio.atomic_write(meta_file, "w") as f:
    json.dump(meta, f, indent=2, sort_keys=True)
  return dict(meta, cached=False)


# === tf.data ===

def make_dataset(input_files, max_seq_length, batch_size, is_training, drop_remainder,
                 is_regression=False, input_context=None, shuffle_buffer_size=100, seed=None,
                 spec=None):
  """Batches of classifier features from TFRecord file(s), as the original's input_fn.

  Training repeats forever and shuffles with a buffer of 100 records, as the original.
  Eval/predict keep the file order. With drop_remainder (always for training; for eval and
  predict after `pad_to_batch`) every tensor has a static batch dimension, as TPUs need.

  Args:
    input_files: a path or list of paths.
    max_seq_length: S, as the files were written with.
    batch_size: the global batch size; with an input_context, each pipeline batches
      input_context.get_per_replica_batch_size(batch_size).
    is_training: repeat and shuffle.
    drop_remainder: drop a last partial batch (static shapes).
    is_regression: label_ids are float32.
    input_context: tf.distribute.InputContext (from distribute_datasets_from_function): the
      records are sharded across input pipelines after the shuffle
      (``pipeline.shard_records``).
    shuffle_buffer_size: records in the shuffle buffer (training only).
    seed: shuffle seed, for reproducible runs.
    spec: another record format's parsing spec (a multi-label task's ``feature_spec(S,
      multi_labels=C)``, token classification's ``bert_tf.data.conll.feature_spec``); default
      ``feature_spec(S, is_regression)``.

  Returns:
    tf.data.Dataset of dicts: input_ids, input_mask, segment_ids [B, S] int32, label_ids [B]
    int32 (float32 for regression, [B, C] float32 multi-label), is_real_example [B] int32.
  """
  if isinstance(input_files, (str, bytes)):
    input_files = [input_files]
  dataset = tf.data.TFRecordDataset(list(input_files))
  if is_training:
    dataset = dataset.repeat()
    dataset = dataset.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
  # After the (seeded) order: N workers then train on the global batches of one process.
  dataset = pipeline.shard_records(dataset, input_context, len(input_files))
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  spec = spec or feature_spec(max_seq_length, is_regression)

  def decode(records):                                   # [B] serialized tf.train.Example
    features = tf.io.parse_example(records, spec)
    # tf.train.Example holds int64; TPUs want int32.
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in features.items()}

  dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)
