"""Tagged sentences (CoNLL files) -> features -> TFRecords -> tf.data, for token classification.

The CoNLL format (CoNLL-2000 chunking, CoNLL-2003 NER, most NER corpora): one token per line,
columns separated by spaces or tabs, the word first and its tag in the last column (or
``label_column``); a blank line ends a sentence; ``-DOCSTART-`` lines (document breaks) are
skipped. A file to predict may have the word column only.

Features, as Hugging Face's ``run_ner`` makes them: every word is tokenized into word pieces
(``FullTokenizer``: basic tokenization, then WordPiece), and the word's tag is the label of its
FIRST piece; the other pieces and [CLS]/[SEP] carry no label (``label_mask`` 0) and are
neither trained on nor predicted. A sentence whose pieces do not fit in
``max_seq_length - 2`` is split, between words, into as many features as it needs (nothing
is lost or predicted twice); a single word with more pieces than that keeps its first ones. A
word with no piece at all (e.g. a lone control character) cannot be predicted: it gets ``O``.

Shapes: S = max_seq_length, B = batch size.

TFRecord features:
  input_ids        int64 [S]  [CLS] pieces [SEP], 0-padded
  input_mask       int64 [S]  1 for real tokens, 0 for padding
  segment_ids      int64 [S]  0
  label_ids        int64 [S]  the tag id at each word's first piece, else 0
  label_mask       int64 [S]  1 at each word's first piece, else 0
  is_real_example  int64 []   0 for the padding features that fill the last eval batch
"""

import collections
import dataclasses
import os
import re
from typing import List, Optional

import tensorflow as tf

from bert_tf import fileio
from bert_tf.data import classifier_features
from bert_tf.errors import BertTfError

DOCSTART = "-DOCSTART-"
_LINE_END = re.compile(r"\r\n|\r|\n")
# Columns are separated by spaces and tabs; other Unicode spaces (a no-break space in
# "10\u00a0000") belong to the word. A line of spaces of any kind is blank.
_ASCII_SPACE = " \t\f\v"
_COLUMN_GAP = re.compile(r"[ \t\f\v]+")


@dataclasses.dataclass
class TaggedSentence:
  """One sentence: its words, their tags (None: unlabelled), and where it came from."""
  words: List[str]
  tags: Optional[List[str]]
  source: str = ""  # "file:line" of its first word, for error messages


@dataclasses.dataclass
class TokenFeatures:
  """One feature (lists of length S), its ``sentence`` index and ``words``: the indices of
  the sentence's words whose first pieces are the feature's label_mask positions, in order."""
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  label_ids: List[int]
  label_mask: List[int]
  sentence: int = -1
  words: List[int] = dataclasses.field(default_factory=list)
  is_real_example: bool = True


def read_conll(path, label_column=-1, labelled=True):
  """The sentences of a CoNLL file.

  Args:
    path: the file.
    label_column: the column of the tag (default the last); the word is column 0.
    labelled: every token line must have a tag (two columns at least); when False, a file
      with one column has no tags (``tags`` None), a file with more is read as labelled.

  Raises:
    BertTfError: the file is missing or unreadable, a token line has too few columns, or
      another number of columns than the file's first token line (a word with a space in
      a tab-separated file shifted its columns: another word and tag were read without a
      word; conlleval refuses such files too). The message names file and line.
  """
  if label_column == 0:
    raise BertTfError("--label_column 0 is the word's column; the tag is in another "
                      "(-1: the last)")
  if not tf.io.gfile.exists(path):
    raise BertTfError(f"{path}: no such file")
  # A leading byte-order mark goes (Windows Notepad's: it would join the first word); lines
  # end at \n, \r\n or \r as Python's text files read them, not at the other characters
  # str.splitlines() knows (U+2028, U+0085, ...), which may be inside a corpus's words.
  lines = _LINE_END.split(fileio.read_utf8(path))
  sentences = []
  words, tags, start = [], [], None
  has_tags = None
  width = None  # the columns of the file's first token line

  def end_sentence():
    nonlocal words, tags, start
    if words:
      sentences.append(TaggedSentence(words, tags if has_tags else None, start))
    words, tags, start = [], [], None

  for number, line in enumerate(lines, 1):
    columns = _COLUMN_GAP.split(line.strip(_ASCII_SPACE)) if line.strip() else []
    if not columns:
      end_sentence()
      continue
    if columns[0] == DOCSTART:
      end_sentence()
      continue
    if has_tags is None:
      has_tags = labelled or len(columns) > 1
      width = (len(columns), number)
    need = max(2, label_column + 1 if label_column >= 0 else 1 - label_column) if has_tags else 1
    if len(columns) < need:
      raise BertTfError(f"{path}:{number}: {len(columns)} column(s), expected at least {need} "
                        f"(the word, and its tag in column {label_column})")
    if len(columns) != width[0]:
      raise BertTfError(f"{path}:{number}: {len(columns)} column(s), line {width[1]} has "
                        f"{width[0]}: every line of a CoNLL file has the same columns (a word "
                        "with a space in it?)")
    if start is None:
      start = f"{path}:{number}"
    words.append(columns[0])
    if has_tags:
      tags.append(columns[label_column])
  end_sentence()
  return sentences


def labels_of(sentences):
  """The tag set of labelled sentences: ``O`` first (when present), then sorted."""
  found = {tag for s in sentences for tag in (s.tags or [])}
  return (["O"] if "O" in found else []) + sorted(found - {"O"})


def _pad(values, length):
  return list(values) + [0] * (length - len(values))


def _line_of(sentence, word_index):
  """``file:line`` of a sentence's word: its words are consecutive lines from ``source``."""
  if not sentence.source:
    return ""
  path, _, line = sentence.source.rpartition(":")
  return f"{path}:{int(line) + word_index}" if line.isdigit() else sentence.source


def convert_sentences(sentences, label_list, max_seq_length, tokenizer, where=""):
  """Tagged sentences -> ``TokenFeatures`` (see the module docstring), in order.

  Raises:
    BertTfError: a tag that is not in ``label_list`` (names the word's file and line).
  """
  if max_seq_length < 3:
    raise BertTfError(f"--max_seq_length {max_seq_length}: token classification needs at "
                      "least 3 ([CLS] a word piece [SEP])")
  label_ids = {label: i for i, label in enumerate(label_list)}
  room = max_seq_length - 2
  cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
  features = []
  for index, sentence in enumerate(sentences):
    pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))[:room]
              for word in sentence.words]
    if sentence.tags is not None:
      for word_index, (word, tag) in enumerate(zip(sentence.words, sentence.tags)):
        if tag not in label_ids:
          raise BertTfError(f"{_line_of(sentence, word_index) or where}: tag {tag!r} of "
                            f"{word!r} is not one of the labels ({', '.join(label_list)})")
    first = 0
    while first < len(pieces):
      ids, mask, labels, words = [cls_id], [0], [0], []
      last = first
      while last < len(pieces) and len(ids) - 1 + len(pieces[last]) <= room:
        word_pieces = pieces[last]
        ids += word_pieces
        if word_pieces:
          words.append(last)
          mask += [1] + [0] * (len(word_pieces) - 1)
          tag = sentence.tags[last] if sentence.tags is not None else None
          labels += [label_ids[tag] if tag is not None else 0] + [0] * (len(word_pieces) - 1)
        last += 1
      ids.append(sep_id)
      mask.append(0)
      labels.append(0)
      features.append(TokenFeatures(
          input_ids=_pad(ids, max_seq_length), input_mask=_pad([1] * len(ids), max_seq_length),
          segment_ids=[0] * max_seq_length, label_ids=_pad(labels, max_seq_length),
          label_mask=_pad(mask, max_seq_length), sentence=index, words=words))
      first = last
  return features


def pad_to_batch(features, batch_size):
  """Features plus all-zero padding features (is_real_example False) up to a multiple of
  ``batch_size``: every eval batch has the same static shape."""
  length = len(features[0].input_ids) if features else 0
  padding = (-len(features)) % batch_size
  zeros = [0] * length
  return list(features) + [TokenFeatures(list(zeros), list(zeros), list(zeros), list(zeros),
                                         list(zeros), is_real_example=False)
                           for _ in range(padding)]


def feature_spec(max_seq_length):
  """The TFRecord parsing spec: name -> tf.io.FixedLenFeature."""
  spec = collections.OrderedDict(
      (name, tf.io.FixedLenFeature([max_seq_length], tf.int64))
      for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask"))
  spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def write_features(features, output_file):
  """Writes the features to a TFRecord (through a temporary name); returns the count."""
  parent = os.path.dirname(output_file)
  if parent:
    tf.io.gfile.makedirs(parent)
  tmp = fileio.temp_name(output_file)
  try:
    with tf.io.TFRecordWriter(tmp) as writer:
      for feature in features:
        values = {name: tf.train.Feature(int64_list=tf.train.Int64List(
            value=list(getattr(feature, name))))
            for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask")}
        values["is_real_example"] = tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(feature.is_real_example)]))
        # deterministic: map keys sorted, so the same features give the same bytes in
        # every process (protobuf's map order is not fixed otherwise).
        writer.write(tf.train.Example(features=tf.train.Features(
            feature=values)).SerializeToString(deterministic=True))
    fileio.commit(tmp, output_file)
  except BaseException:
    fileio.discard(tmp)
    raise
  return len(features)


def make_dataset(input_files, max_seq_length, batch_size, is_training, drop_remainder,
                 input_context=None, shuffle_buffer_size=100, seed=None):
  """Batches of token features from TFRecord file(s): the classifier's ``make_dataset``
  (training repeats and shuffles, eval keeps the file order) with this format's spec; dicts
  of int32 tensors, every one [B,S] but ``is_real_example`` [B]."""
  return classifier_features.make_dataset(
      input_files, max_seq_length, batch_size, is_training, drop_remainder,
      input_context=input_context, shuffle_buffer_size=shuffle_buffer_size, seed=seed,
      spec=feature_spec(max_seq_length))


def word_predictions(sentences, features, predicted_ids, label_list):
  """Per-piece predictions back to one tag per word.

  Args:
    sentences: the ``TaggedSentence`` list the features were made from.
    features: ``convert_sentences``'s features (padding features after them are ignored).
    predicted_ids: [N,S] predicted label ids of the features, in the same order.
    label_list: label names in id order.

  Returns:
    A list of tag lists, one per sentence, a tag per word (``O`` for a word with no piece).
  """
  tags = [["O"] * len(s.words) for s in sentences]
  for feature, ids in zip(features, predicted_ids):
    if not feature.is_real_example:
      continue
    positions = [i for i, m in enumerate(feature.label_mask) if m]
    for word, position in zip(feature.words, positions):
      tags[feature.sentence][word] = label_list[int(ids[position])]
  return tags
