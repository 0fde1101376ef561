"""GLUE, XNLI and user sentence-(pair) classification tasks: the ONE task table, readers, writers.

Every fact about a task lives in `TASKS`: which file holds which split, which columns hold
text_a / text_b / label in the official layout, the label names in id order, whether it is a
regression, which metrics it reports, its tensorflow-datasets name, and the GLUE-submission file
each predict split goes to. The processors, `bert_tf.metrics` and the run_classifier script
read the table; nothing else spells these facts out.

Official layouts (column numbers from 0; the GLUE files as download_glue_data.py writes them):

  task    split          file                  header  text_a  text_b  label
  CoLA    train/dev      {split}.tsv           no      3       -       1
          test           test.tsv              yes     1       -       -
  SST-2   train/dev      {split}.tsv           yes     0       -       1
          test           test.tsv              yes     1       -       -
  MRPC    train/dev      {split}.tsv           yes     3       4       0
          test           test.tsv              yes     3       4       -
  STS-B   train/dev      {split}.tsv           yes     7       8       9 (score 0-5, float)
          test           test.tsv              yes     7       8       -
  QQP     train/dev      {split}.tsv           yes     3       4       5
          test           test.tsv              yes     1       2       -
  MNLI    train          train.tsv             yes     8       9       last
          dev_(mis)matched, test_(mis)matched: dev_matched.tsv, ...      (test: no label)
  QNLI, RTE, WNLI        {split}.tsv           yes     1       2       3 (test: none)
  AX      test           diagnostic.tsv|AX.tsv yes     1       2       - (MNLI labels)
  XNLI    train          multinli/multinli.train.{language}.tsv   yes  0  1  2
          dev/test       xnli.{dev,test}.tsv   yes     6       7       1 (rows of `language` only)

GLUE files are read as the original run_classifier reads them: tab-separated, no quoting (MNLI
and MRPC sentences contain unbalanced quotes), UTF-8 (a byte-order mark is dropped). A row with
the wrong number of columns, an unknown label, an empty text or a non-numeric score raises a
one-line `BertTfError` naming the file and line.

A user task needs no code: a data_dir with train/dev/test .tsv (tab-separated, no quoting) or
.csv (comma-separated, standard quoting) files whose header names the columns `text_a`,
optionally `text_b`, and `label` (other columns are ignored); see `UserTaskProcessor`. A
multi-label user task (any number of labels per example, `multi_label=True`) reads the label
names separated by commas in `label`, or a 0/1 column per label; see `UserTaskProcessor`.

Example:
  >>> processor = get_processor("mrpc")
  >>> processor.get_labels()
  ['0', '1']
  >>> get_task("MNLI").predict_splits["test_mismatched"]
  'MNLI-mm.tsv'
"""

import csv
import dataclasses
import io
import os
import types
from typing import Mapping, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from bert_tf import classifier_labels, fileio
from bert_tf.errors import BertTfError


@dataclasses.dataclass
class InputExample:
  """One example: raw text(s) and label, as the original run_classifier's InputExample.

  Attributes:
    guid: unique id, "<split>-<id or row>" (the original's ids where it had a processor).
    text_a: str, the first (or only) untokenized sequence.
    text_b: str or None, the second sequence of a pair task.
    label: the label name (str, one of the task's labels), the score (float, regression),
      the label names of a multi-label task (a tuple, in the task's label order, maybe
      empty), or None for an unlabelled test example.
  """
  guid: str
  text_a: str
  text_b: Optional[str] = None
  label: Optional[Union[str, float, Tuple[str, ...]]] = None


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where one split of a task lives: the file and the columns (negative = from the end).

  Attributes:
    files: file name(s) relative to data_dir, the first that exists is read; may contain
      "{language}" (XNLI).
    text_a, text_b, label: column numbers; text_b None for single-sentence tasks, label None
      for unlabelled (test) splits.
    guid: column holding the example's id, or None for the row's position in the file
      (counting the header), as the original's CoLA and MRPC processors do.
    header: whether the first line is a header (then every row must have as many columns).
    num_columns: the column count of a header-less file.
    language: column that must equal the processor's language for a row to be kept (XNLI).
    guid_prefix: the guid's prefix when it is not the split name (the original's MNLI "test").
  """
  files: Tuple[str, ...]
  text_a: int
  text_b: Optional[int] = None
  label: Optional[int] = None
  guid: Optional[int] = None
  header: bool = True
  num_columns: Optional[int] = None
  language: Optional[int] = None
  guid_prefix: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class TfdsSource:
  """The same task in tensorflow-datasets: dataset name, split names, text feature keys."""
  name: str
  splits: Mapping[str, str]
  text_a: str
  text_b: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class GlueTask:
  """Everything bert_tf knows about one task.

  Attributes:
    name: canonical lower-case name ("cola", "sst-2", ..., "user").
    labels: label names in id order (the classifier's output order); () for regression.
    splits: split name -> `Columns`.
    metrics: names of `bert_tf.metrics.METRICS` reported on eval splits.
    eval_splits: split -> prefix of its metric keys in eval_results.txt ("eval_", "eval_mm_").
    predict_splits: split -> GLUE-submission file name, or None where GLUE takes no file.
    is_regression: one output, mean-squared-error loss, float labels (STS-B).
    train_split: the split fine-tuning trains on (None for predict-only tasks such as AX).
    tfds: the tensorflow-datasets source, or None.
    label_aliases: label spellings mapped onto `labels` while reading (XNLI's "contradictory").
    multi_label: each example has any number of the labels (a user task's --multi_label):
      one sigmoid output per label, multi-hot label vectors.
  """
  name: str
  labels: Tuple[str, ...]
  splits: Mapping[str, Columns]
  metrics: Tuple[str, ...]
  eval_splits: Mapping[str, str]
  predict_splits: Mapping[str, Optional[str]]
  is_regression: bool = False
  train_split: Optional[str] = "train"
  tfds: Optional[TfdsSource] = None
  label_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
  multi_label: bool = False

  @property
  def num_labels(self):
    """Width of the classifier output: 1 for regression, else the number of labels."""
    return 1 if self.is_regression else len(self.labels)


def _frozen(mapping):
  return types.MappingProxyType(dict(mapping))


def _standard_task(name, labels, train_dev, test, metrics, submission, tfds_name, tfds_text,
                   is_regression=False):
  """A task with train.tsv, dev.tsv and test.tsv (all but CoLA's test share one layout)."""
  return GlueTask(
      name=name, labels=tuple(labels), is_regression=is_regression, metrics=tuple(metrics),
      splits=_frozen({
          "train": dataclasses.replace(train_dev, files=("train.tsv",)),
          "dev": dataclasses.replace(train_dev, files=("dev.tsv",)),
          "test": dataclasses.replace(test, files=("test.tsv",)),
      }),
      eval_splits=_frozen({"dev": "eval_"}),
      predict_splits=_frozen({"test": submission}),
      tfds=TfdsSource(f"glue/{tfds_name}",
                      _frozen({"train": "train", "dev": "validation", "test": "test"}),
                      *tfds_text))


_BINARY = ("0", "1")
_NLI = ("contradiction", "entailment", "neutral")  # The original MnliProcessor's order.
_ENTAILMENT = ("entailment", "not_entailment")

# The ONE GLUE task table. Metric names are `bert_tf.metrics.METRICS` keys.
TASKS = _frozen({task.name: task for task in [
    _standard_task(
        "cola", _BINARY,
        Columns((), text_a=3, label=1, header=False, num_columns=4),
        Columns((), text_a=1),
        ("accuracy", "mcc"), "CoLA.tsv", "cola", ("sentence",)),
    _standard_task(
        "sst-2", _BINARY, Columns((), text_a=0, label=1), Columns((), text_a=1, guid=0),
        ("accuracy",), "SST-2.tsv", "sst2", ("sentence",)),
    _standard_task(
        "mrpc", _BINARY, Columns((), text_a=3, text_b=4, label=0), Columns((), text_a=3, text_b=4),
        ("accuracy", "f1"), "MRPC.tsv", "mrpc", ("sentence1", "sentence2")),
    _standard_task(
        "sts-b", (), Columns((), text_a=7, text_b=8, label=9, guid=0),
        Columns((), text_a=7, text_b=8, guid=0),
        ("pearson", "spearman"), "STS-B.tsv", "stsb", ("sentence1", "sentence2"),
        is_regression=True),
    _standard_task(
        "qqp", _BINARY, Columns((), text_a=3, text_b=4, label=5, guid=0),
        Columns((), text_a=1, text_b=2, guid=0),
        ("accuracy", "f1"), "QQP.tsv", "qqp", ("question1", "question2")),
    GlueTask(
        name="mnli", labels=_NLI, metrics=("accuracy",),
        splits=_frozen({
            "train": Columns(("train.tsv",), text_a=8, text_b=9, label=-1, guid=0),
            "dev_matched": Columns(("dev_matched.tsv",), text_a=8, text_b=9, label=-1, guid=0),
            "dev_mismatched": Columns(("dev_mismatched.tsv",), text_a=8, text_b=9, label=-1,
                                      guid=0),
            "test_matched": Columns(("test_matched.tsv",), text_a=8, text_b=9, guid=0,
                                    guid_prefix="test"),
            "test_mismatched": Columns(("test_mismatched.tsv",), text_a=8, text_b=9, guid=0),
        }),
        eval_splits=_frozen({"dev_matched": "eval_", "dev_mismatched": "eval_mm_"}),
        predict_splits=_frozen({"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
        tfds=TfdsSource("glue/mnli", _frozen({
            "train": "train", "dev_matched": "validation_matched",
            "dev_mismatched": "validation_mismatched", "test_matched": "test_matched",
            "test_mismatched": "test_mismatched"}), "premise", "hypothesis")),
    _standard_task(
        "qnli", _ENTAILMENT, Columns((), text_a=1, text_b=2, label=3, guid=0),
        Columns((), text_a=1, text_b=2, guid=0),
        ("accuracy",), "QNLI.tsv", "qnli", ("question", "sentence")),
    _standard_task(
        "rte", _ENTAILMENT, Columns((), text_a=1, text_b=2, label=3, guid=0),
        Columns((), text_a=1, text_b=2, guid=0),
        ("accuracy",), "RTE.tsv", "rte", ("sentence1", "sentence2")),
    _standard_task(
        "wnli", _BINARY, Columns((), text_a=1, text_b=2, label=3, guid=0),
        Columns((), text_a=1, text_b=2, guid=0),
        ("accuracy",), "WNLI.tsv", "wnli", ("sentence1", "sentence2")),
    GlueTask(
        # The diagnostic set: predicted with an MNLI model, so MNLI's labels; no training.
        name="ax", labels=_NLI, metrics=("accuracy",), train_split=None,
        splits=_frozen({"test": Columns(("diagnostic.tsv", "AX.tsv"), text_a=1, text_b=2,
                                        guid=0)}),
        eval_splits=_frozen({}), predict_splits=_frozen({"test": "AX.tsv"}),
        tfds=TfdsSource("glue/ax", _frozen({"test": "test"}), "premise", "hypothesis")),
    GlueTask(
        # XNLI's own layout, as the original XnliProcessor reads it; not a GLUE task.
        name="xnli", labels=_NLI, metrics=("accuracy",),
        splits=_frozen({
            "train": Columns(("multinli/multinli.train.{language}.tsv",), text_a=0, text_b=1,
                             label=2),
            "dev": Columns(("xnli.dev.tsv",), text_a=6, text_b=7, label=1, language=0),
            "test": Columns(("xnli.test.tsv",), text_a=6, text_b=7, label=1, language=0),
        }),
        eval_splits=_frozen({"dev": "eval_"}), predict_splits=_frozen({"test": None}),
        label_aliases=_frozen({"contradictory": "contradiction"})),
]})

_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "diagnostic": "ax",
            "mnli-m": "mnli", "mnli_matched": "mnli"}

USER_TASK = "user"

# What a multi-label task reports (`bert_tf.metrics.MULTI_LABEL_METRICS` keys), besides the
# F1 of each label.
MULTI_LABEL_METRICS = ("accuracy", "f1", "precision", "recall", "macro_f1", "label_accuracy")


def get_task(task_name):
  """The `GlueTask` for a name as the original's --task_name spells it (any case)."""
  name = (task_name or "").strip().lower()
  name = _ALIASES.get(name, name)
  if name not in TASKS:
    raise BertTfError(
        f"unknown task_name {task_name!r} (known: {', '.join(sorted(TASKS))}, or "
        f"{USER_TASK!r} for a TSV/CSV task with text_a, text_b, label columns)")
  return TASKS[name]


# === Reading delimited files ===

def _rows(path, delimiter="\t", quoting=csv.QUOTE_NONE):
  """Yields (line number from 1, list of fields) for each record of a delimited UTF-8 file.
  A field may be as long as the file (Python's csv stops at 131,072 characters by default: a
  long document in a user task was an error, though BERT reads only its first word pieces)."""
  text = fileio.read_utf8(path)
  if csv.field_size_limit() < len(text):
    csv.field_size_limit(max(len(text), 1 << 17))
  # Lines end at "\n" only, as when the original iterates over the file; "\r\n" is fine.
  reader = csv.reader(io.StringIO(text, newline="\n"), delimiter=delimiter, quoting=quoting)
  line = 1
  while True:
    try:
      row = next(reader)
    except StopIteration:
      return
    except csv.Error as e:
      why = ("a carriage return (\\r) inside a field: lines end at \\n (or \\r\\n)"
             if "new-line character" in str(e) else str(e))
      raise BertTfError(f"{path}:{reader.line_num}: {why}") from None
    yield line, row
    line = reader.line_num + 1


def _user_rows(path):
  """``_rows`` of a user task's file: a .csv with quotes, a .tsv without."""
  if path.endswith(".csv"):
    return _rows(path, delimiter=",", quoting=csv.QUOTE_MINIMAL)
  return _rows(path)


def _find_file(data_dir, names, what):
  if not data_dir:
    raise BertTfError(f"no data_dir given to read {what} from (--data_dir)")
  paths = [os.path.join(data_dir, name) for name in names]
  for path in paths:
    if tf.io.gfile.exists(path):
      return path
  raise BertTfError(f"{what} not found (--data_dir): {' or '.join(map(repr, paths))}")


def _check_text(text, location, what, allow_empty):
  if not text.strip() and not allow_empty:
    raise BertTfError(
        f"{location}: empty {what}; pass allow_empty_text=True (--allow_empty_text) to keep "
        "such rows as the original run_classifier does")


def _parse_label(task, raw, location, label_separator=","):
  """Raw label text -> label name (classification), float score (regression), or the tuple of
  label names of a multi-label task (``raw``: names joined by ``label_separator``, or already
  a tuple of names)."""
  if task.multi_label:
    names = raw if isinstance(raw, tuple) else tuple(
        name.strip() for name in raw.split(label_separator) if name.strip())
    unknown = [name for name in names if name not in task.labels]
    if unknown:
      raise BertTfError(
          f"{location}: unknown label {unknown[0]!r} for task {task.name} "
          f"(labels: {', '.join(task.labels)}; several are separated by {label_separator!r})")
    return tuple(name for name in task.labels if name in names)
  if task.is_regression:
    try:
      score = float(raw)
    except ValueError:
      score = float("nan")
    if not np.isfinite(score):
      raise BertTfError(f"{location}: {task.name} score {raw!r} is not a number")
    return score
  label = task.label_aliases.get(raw, raw)
  if label not in task.labels:
    raise BertTfError(
        f"{location}: unknown label {raw!r} for task {task.name} "
        f"(labels: {', '.join(task.labels)})")
  return label


def make_example(task, guid, text_a, text_b, raw_label, location, allow_empty_text=False,
                 label_separator=","):
  """Checks one row's texts and label and makes its `InputExample`.

  Args:
    task: the `GlueTask` (labels, regression, multi-label, label aliases).
    text_b: None for a single-sentence task.
    raw_label: the label text as read, or None (unlabelled); for a multi-label task also a
      tuple of names.
    location: "path:line" (or "dataset/split:idx N") for error messages.
    label_separator: what separates the names of a multi-label task's label text.
  """
  _check_text(text_a, location, "text_a", allow_empty_text)
  if text_b is not None:
    _check_text(text_b, location, "text_b", allow_empty_text)
  label = (None if raw_label is None else
           _parse_label(task, raw_label, location, label_separator))
  return InputExample(guid=guid, text_a=text_a, text_b=text_b, label=label)


class DataProcessor:
  """Reads a task's splits into `InputExample`s; the original DataProcessor's interface.

  Attributes:
    task: the `GlueTask`.
    allow_empty_text: keep rows whose text is empty (the original did; QQP's train.tsv has
      two empty question2) instead of raising.
  """

  def __init__(self, task, allow_empty_text=False):
    self.task = task
    self.allow_empty_text = allow_empty_text

  def get_labels(self):
    """Label names in id order (the original's label_list); [] for regression."""
    return list(self.task.labels)

  def get_examples(self, data_dir, split):
    """All examples of `split` (a key of task.splits) read from data_dir."""
    raise NotImplementedError

  def _split_name(self, splits, kind):
    if not splits:
      raise BertTfError(f"task {self.task.name} has no {kind} split")
    return next(iter(splits))

  def get_train_examples(self, data_dir):
    if self.task.train_split is None:
      raise BertTfError(f"task {self.task.name} has no training data (predict only)")
    return self.get_examples(data_dir, self.task.train_split)

  def get_dev_examples(self, data_dir):
    """The first eval split (MNLI: dev_matched, as the original)."""
    return self.get_examples(data_dir, self._split_name(self.task.eval_splits, "dev"))

  def get_test_examples(self, data_dir):
    """The first predict split (MNLI: test_matched, as the original)."""
    return self.get_examples(data_dir, self._split_name(self.task.predict_splits, "test"))

  label_separator = ","

  def _make_example(self, guid, text_a, text_b, raw_label, location):
    return make_example(self.task, guid, text_a, text_b, raw_label, location,
                        self.allow_empty_text, self.label_separator)


class GlueProcessor(DataProcessor):
  """Reads any task of `TASKS` from its official layout; XNLI keeps rows of one `language`."""

  def __init__(self, task, language="zh", allow_empty_text=False):
    super().__init__(task, allow_empty_text=allow_empty_text)
    self.language = language  # XNLI only; the original hard-codes "zh".

  def split_file(self, data_dir, split):
    """The file of ``split`` in ``data_dir`` (the first of the task's names that exists)."""
    cols = self.task.splits[split]
    names = [name.format(language=self.language) for name in cols.files]
    return _find_file(data_dir, names, f"{self.task.name} {split} file")

  def get_examples(self, data_dir, split):
    task = self.task
    if split not in task.splits:
      raise BertTfError(
          f"task {task.name} has no split {split!r} (splits: {', '.join(task.splits)})")
    cols = task.splits[split]
    path = self.split_file(data_dir, split)
    prefix = cols.guid_prefix or split
    examples = []
    expected = cols.num_columns
    for position, (line, row) in enumerate(_rows(path)):
      if cols.header and position == 0:
        expected = len(row)
        if expected <= max(c for c in (cols.text_a, cols.text_b, cols.label, cols.guid, 0)
                           if c is not None):
          raise BertTfError(f"{path}:{line}: header has {expected} columns, too few for "
                            f"the {task.name} layout")
        continue
      if len(row) != expected:
        raise BertTfError(
            f"{path}:{line}: expected {expected} tab-separated columns"
            f"{' as in the header' if cols.header else ''}, found {len(row)}")
      if cols.language is not None and row[cols.language] != self.language:
        continue
      guid = f"{prefix}-{row[cols.guid] if cols.guid is not None else position}"
      examples.append(self._make_example(
          guid, row[cols.text_a], None if cols.text_b is None else row[cols.text_b],
          None if cols.label is None else row[cols.label], f"{path}:{line}"))
    return examples

  def get_tfds_examples(self, split, data_dir=None):
    """The same examples from tensorflow-datasets (`glue/<task>`), which must be prepared
    under data_dir already (nothing is downloaded). Guids are "<split>-<idx>"."""
    return get_tfds_examples(self.task, split, data_dir, allow_empty_text=self.allow_empty_text)


# === User tasks: TSV/CSV with a header ===

USER_COLUMNS = ("text_a", "text_b", "label")


def _label_sort_key(labels):
  """Numeric labels sort as numbers ("2" < "10"), others as strings."""
  try:
    return sorted(labels, key=float)
  except ValueError:
    return sorted(labels)


class UserTaskProcessor(DataProcessor):
  """A task of the user's own: {train,dev,test}.tsv or .csv with a header row.

  The header names the columns: `text_a` (required), `text_b` (optional, a pair task), `label`
  (required in train and dev; test may omit it). .tsv files are tab-separated without quoting,
  .csv files comma-separated with standard quoting (a quoted field may span lines).

  Label order (= the classifier's output order) is, first found: the `labels` argument
  (--labels), a `labels.txt` in data_dir (one per line), or the sorted distinct labels of
  train (numerically if they all are numbers), else of dev. Regression tasks take float labels.

  A multi-label task (``multi_label``: each example has any number of the labels, none
  included) reads them from either
    * the `label` column: label names separated by ``label_separator`` (default ","; an empty
      field is an example with no label), e.g. ``toxic,insult``; or
    * one column per label named as the label, holding 0 or 1 (the layout of Kaggle's
      Jigsaw toxic-comment files), when the header has no `label` column; the labels must
      then be given (--labels or labels.txt).
  """

  SPLITS = ("train", "dev", "test")

  def __init__(self, data_dir=None, labels=None, is_regression=False, allow_empty_text=False,
               multi_label=False, label_separator=","):
    if is_regression and multi_label:
      raise BertTfError("a task is a regression (--is_regression) or multi-label "
                        "(--multi_label), not both")
    if is_regression and labels:
      raise BertTfError("--labels names a classification's outputs; a regression "
                        "(--is_regression) has one float output and no labels")
    if multi_label and not label_separator:
      raise BertTfError("--label_separator must not be empty")
    self.data_dir = data_dir
    self._labels = tuple(labels) if labels else None
    self._headers = {}  # path -> the header of a file read (text_b or not)
    self.is_regression = is_regression
    self.multi_label = multi_label
    self.label_separator = label_separator
    super().__init__(self._make_task(self._labels or ()), allow_empty_text=allow_empty_text)

  def _make_task(self, labels):
    if self.multi_label:
      metrics = MULTI_LABEL_METRICS
    elif self.is_regression:
      metrics = ("pearson", "spearman")
    elif len(labels) == 2:
      metrics = ("accuracy", "f1", "mcc")
    else:
      metrics = ("accuracy",)
    return GlueTask(
        name=USER_TASK, labels=() if self.is_regression else tuple(labels),
        is_regression=self.is_regression, multi_label=self.multi_label, metrics=metrics,
        splits=_frozen({s: Columns((f"{s}.tsv", f"{s}.csv"), text_a=0) for s in self.SPLITS}),
        eval_splits=_frozen({"dev": "eval_"}), predict_splits=_frozen({"test": None}))

  def get_labels(self):
    if not self.is_regression and not self.task.labels:
      self.task = self._make_task(self._resolve_labels())
    return list(self.task.labels)

  def _resolve_labels(self):
    if self._labels:
      return self._labels
    if not self.data_dir:
      raise BertTfError("a user task needs its labels (--labels) or a data_dir to find them in")
    labels_file = os.path.join(self.data_dir, "labels.txt")
    if tf.io.gfile.exists(labels_file):
      labels = [line.strip() for line in fileio.read_utf8(labels_file).split("\n")
                if line.strip()]
      if len(set(labels)) != len(labels) or len(labels) < 2:
        raise BertTfError(f"{labels_file}: needs at least 2 distinct labels, one per line")
      return tuple(labels)
    for split in ("train", "dev"):
      found = [n for n in self.task.splits[split].files
               if tf.io.gfile.exists(os.path.join(self.data_dir, n))]
      if found:
        labels = {raw for _, raw, _ in self._read(self.data_dir, split, need_label=True)}
        if self.multi_label:
          labels = {name.strip() for raw in labels for name in raw.split(self.label_separator)
                    if name.strip()}
        if len(labels) < 2:
          raise BertTfError(f"{os.path.join(self.data_dir, found[0])}: needs at least 2 "
                            f"distinct labels to classify, found {sorted(labels)}")
        return tuple(_label_sort_key(labels))
    raise BertTfError(
        f"no train.tsv/.csv or dev.tsv/.csv in {self.data_dir!r} to find the labels in; "
        "give them with --labels or labels.txt")

  def split_file(self, data_dir, split):
    """The file of ``split`` in ``data_dir`` (``<split>.tsv`` or ``<split>.csv``; both is
    one line: which one was meant?)."""
    names = self.task.splits[split].files
    if data_dir and all(tf.io.gfile.exists(os.path.join(data_dir, n)) for n in names):
      raise BertTfError(f"{data_dir} has both {' and '.join(names)}: keep the one to use")
    return _find_file(data_dir, names, f"user task {split} file")

  def _read(self, data_dir, split, need_label):
    """Yields (location, raw label or None, row dict) for each row of a split's file."""
    path = self.split_file(data_dir, split)
    is_csv = path.endswith(".csv")
    rows = _user_rows(path)
    header = None
    label_columns = None  # multi-label, one 0/1 column per label
    for line, row in rows:
      if header is None:
        header = [name.strip() for name in row]
        self._headers[path] = header
        if split != "train":
          self._check_pairs_as_train(data_dir, path, header)
        label_columns = self._label_columns(header, path, line)
        missing = [c for c in ("text_a",) + (("label",) if need_label and not label_columns
                                              else ()) if c not in header]
        if missing:
          either = ("; or a 0/1 column per label named by --labels or labels.txt"
                    if self.multi_label else "")
          raise BertTfError(f"{path}:{line}: header {header} lacks column(s) {missing} "
                            f"(expected {', '.join(USER_COLUMNS)}{either})")
        continue
      if len(row) != len(header):
        raise BertTfError(
            f"{path}:{line}: expected {len(header)} {'comma' if is_csv else 'tab'}-separated "
            f"columns as in the header, found {len(row)}")
      fields = dict(zip(header, row))
      raw_label = fields.get("label")
      if label_columns:
        raw_label = self._from_label_columns(fields, label_columns, f"{path}:{line}")
      elif raw_label is not None:
        # Spaces around a label are not part of it ("pos " and "pos" were two classes, and
        # a CSV's ", pos" a class " pos"); an empty one is no label at all (it became a class
        # "").
        raw_label = raw_label.strip()
        if not raw_label and need_label and not self.multi_label:
          raise BertTfError(f"{path}:{line}: empty label (every {split} row needs one)")
      yield f"{path}:{line}", raw_label, fields

  def _label_columns(self, header, path, line):
    """The label names of a multi-label file with a 0/1 column per label, or None."""
    if not self.multi_label or "label" in header:
      return None
    labels = self.task.labels or self._labels
    if not labels:
      return None  # _resolve_labels asks for --labels or labels.txt
    missing = [name for name in labels if name not in header]
    if missing and len(missing) < len(labels):
      raise BertTfError(f"{path}:{line}: header {header} has no 'label' column and lacks the "
                        f"0/1 column(s) of label(s) {missing}")
    return None if missing else tuple(labels)

  @staticmethod
  def _from_label_columns(fields, label_columns, location):
    names = []
    for name in label_columns:
      value = fields[name].strip()
      if value not in ("0", "1"):
        raise BertTfError(f"{location}: column {name!r} holds {fields[name]!r}; a label "
                          "column holds 0 or 1")
      if value == "1":
        names.append(name)
    return tuple(names)

  def get_examples(self, data_dir, split):
    if split not in self.SPLITS:
      raise BertTfError(f"user task has no split {split!r} (splits: {', '.join(self.SPLITS)})")
    self.get_labels()
    examples = []
    for i, (location, raw_label, fields) in enumerate(
        self._read(data_dir, split, need_label=split != "test")):
      # A test file's labels are not read, as the original's (a blank or "?" was refused).
      examples.append(self._make_example(
          f"{split}-{i}", fields["text_a"], fields.get("text_b"),
          None if split == "test" else raw_label, location))
    return examples

  def _check_pairs_as_train(self, data_dir, path, header):
    """A split of sentence pairs (a text_b column) when train has single texts, or the other
    way round, is one line: the model would be evaluated on inputs of another form. (Train's
    header as ``_read`` found it, else its first row.)"""
    names = self.task.splits["train"].files
    if not data_dir or not any(tf.io.gfile.exists(os.path.join(data_dir, n)) for n in names):
      return
    train = self.split_file(data_dir, "train")
    if train not in self._headers:
      first = next(_user_rows(train), None)
      self._headers[train] = [name.strip() for name in first[1]] if first else []
    train_header = self._headers[train]
    if ("text_b" in train_header) != ("text_b" in header):
      raise BertTfError(f"{path} {'has' if 'text_b' in header else 'has no'} text_b column "
                        f"but {train} {'has' if 'text_b' in train_header else 'has none'}: "
                        "pairs and single texts are other inputs to the model")


def get_processor(task_name, data_dir=None, labels=None, is_regression=False, language="zh",
                  allow_empty_text=False, multi_label=False, label_separator=","):
  """The processor for --task_name: a GLUE/XNLI task of `TASKS`, or "user".

  Args:
    task_name: as the original's flag ("MRPC", "sst-2", "user", ...), any case.
    data_dir: user task only, where labels.txt / train are read to find the labels.
    labels: user task only, label names in id order.
    is_regression: user task only, float labels and one output.
    language: XNLI only, the language kept from the multilingual files (original: "zh").
    allow_empty_text: keep rows with an empty text instead of raising.
    multi_label: user task only, any number of labels per example (``UserTaskProcessor``).
    label_separator: multi-label only, what separates the names in the `label` column.
  """
  if labels is not None:
    classifier_labels.check_names(labels)
    if len(labels) < 2 and not multi_label and not is_regression:
      raise BertTfError(f"--labels {','.join(map(str, labels))}: a classifier needs at least "
                        "2 labels")
  if (task_name or "").strip().lower() == USER_TASK:
    return UserTaskProcessor(data_dir=data_dir, labels=labels, is_regression=is_regression,
                             allow_empty_text=allow_empty_text, multi_label=multi_label,
                             label_separator=label_separator)
  if multi_label:
    raise BertTfError(f"--multi_label is for a user task (--task_name=user); {task_name} has "
                      "one label per example")
  task = get_task(task_name)
  # The task's own labels and kind: another --labels or --is_regression would be ignored.
  if labels and tuple(labels) != task.labels:
    have = ("no labels (a regression)" if task.is_regression else
            f"the labels {', '.join(task.labels)}")
    raise BertTfError(f"--labels is for a user task (--task_name=user); {task.name} has {have}")
  if is_regression and not task.is_regression:
    raise BertTfError(f"--is_regression is for a user task (--task_name=user); {task.name} is "
                      "a classification")
  return GlueProcessor(task, language=language, allow_empty_text=allow_empty_text)


# === tensorflow-datasets ===

def get_tfds_examples(task, split, data_dir=None, allow_empty_text=False):
  """A split of `glue/<task>` from tensorflow-datasets as `InputExample`s.

  The dataset must already be prepared under data_dir (or TFDS's default directory): this
  never downloads. Label ids are mapped onto the task's own label names (TFDS orders MNLI's
  labels entailment, neutral, contradiction; the original contradiction, entailment, neutral).
  Unlabelled test splits (TFDS label -1) give label None. Guids are "<split>-<idx>".
  """
  import tensorflow_datasets as tfds  # Heavy; only this path needs it.

  if isinstance(task, str):
    task = get_task(task)
  if task.tfds is None:
    raise BertTfError(f"task {task.name} is not in tensorflow-datasets' glue; use --data_dir")
  if split not in task.tfds.splits:
    raise BertTfError(f"task {task.name} has no split {split!r} in tensorflow-datasets "
                      f"(splits: {', '.join(task.tfds.splits)})")
  builder = tfds.builder(task.tfds.name, data_dir=data_dir)
  try:
    dataset = builder.as_dataset(split=task.tfds.splits[split], shuffle_files=False)
  except (AssertionError, tfds.core.registered.DatasetNotFoundError, FileNotFoundError,
          tf.errors.NotFoundError) as e:
    raise BertTfError(
        f"{task.tfds.name} split {task.tfds.splits[split]} is not prepared under data_dir "
        f"{data_dir!r} (bert_tf does not download; run `tfds build {task.tfds.name}` first): "
        f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

  label_feature = builder.info.features["label"]
  names = getattr(label_feature, "names", None)
  # Binary GLUE tasks keep "0"/"1" (the GLUE files' own labels); others map through names.
  by_name = names is not None and all(n in task.labels for n in names)
  labelled = split not in task.predict_splits
  examples = []
  for record in dataset.as_numpy_iterator():
    idx = int(record["idx"])
    location = f"{task.tfds.name}/{task.tfds.splits[split]}:idx {idx}"
    text_a = record[task.tfds.text_a].decode("utf-8")
    text_b = record[task.tfds.text_b].decode("utf-8") if task.tfds.text_b else None
    raw = None
    if labelled:
      value = record["label"]
      if task.is_regression:
        raw = str(np.float32(value))  # TFDS keeps float32: 3.6 for 3.5999999, as in the TSV.
      elif int(value) < 0:
        raise BertTfError(f"{location}: no label in a split that needs one")
      else:
        raw = names[int(value)] if by_name else str(int(value))
    examples.append(make_example(task, f"{split}-{idx}", text_a, text_b, raw, location,
                                 allow_empty_text))
  return examples


# === do_predict outputs ===

def write_test_results(path, probabilities, num_actual_examples=None, into=None):
  """Writes the original's test_results.tsv: one line per example, its class probabilities
  (float32, as str() prints them) separated by tabs; one value per line for regression.

  Args:
    path: output file, written atomically.
    probabilities: [N, num_labels] (or [N] / [N, 1] for regression) array-like.
    num_actual_examples: keep only the first rows (drops the batch padding); default all.
    into: a dict: the text goes into ``into[path]`` instead, to be written with the other
      outputs of the run (``fileio.write_together``).
  """
  values = np.asarray(probabilities, dtype=np.float32)
  if values.ndim == 1:
    values = values[:, None]
  if num_actual_examples is not None:
    if num_actual_examples > len(values):
      raise ValueError(f"{num_actual_examples} examples asked, {len(values)} predicted")
    values = values[:num_actual_examples]
  text = "".join("\t".join(str(p) for p in row) + "\n" for row in values)
  if into is not None:
    into[path] = text
  else:
    with fileio.atomic_write(path, "w") as f:
      f.write(text)
  return path


def write_glue_submission(output_dir, task, split, predictions, num_actual_examples=None,
                          into=None):
  """Writes the file the GLUE server expects for one predict split.

  Format: header "index\\tprediction", then one line per test example in file order, index
  0, 1, ... (the GLUE test files' own index) and the label name (STS-B: the score, 3 decimals).

  Args:
    output_dir: directory; the file name comes from the task table (e.g. "MNLI-mm.tsv").
    task: a `GlueTask` or task name.
    split: a key of task.predict_splits.
    predictions: [N] label ids, or [N, num_labels] probabilities/logits (argmax is taken);
      STS-B: [N] or [N, 1] scores.
    num_actual_examples: keep only the first rows (drops the batch padding).
    into: as ``write_test_results``'s.

  Returns:
    The path written.
  """
  if isinstance(task, str):
    task = get_task(task)
  file_name = task.predict_splits.get(split)
  if file_name is None:
    raise BertTfError(f"task {task.name} split {split!r} has no GLUE-submission file")
  values = np.asarray(predictions)
  if task.is_regression:
    values = values.reshape(len(values), -1)[:, 0].astype(np.float64)
  elif values.ndim == 2:
    values = values.argmax(axis=-1)
  if num_actual_examples is not None:
    values = values[:num_actual_examples]
  path = os.path.join(output_dir, file_name)
  lines = ["index\tprediction\n"] + [
      f"{index}\t{f'{value:.3f}' if task.is_regression else task.labels[int(value)]}\n"
      for index, value in enumerate(values)]
  if into is not None:
    into[path] = "".join(lines)
  else:
    with fileio.atomic_write(path, "w") as f:
      f.write("".join(lines))
  return path
