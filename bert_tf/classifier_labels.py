"""What a fine-tuned classifier folder says about its outputs: ``classifier.json``.

run_classifier.py writes it beside ``bert_config.json`` in ``--output_dir`` and in
``--output_dir/google`` (through a temporary name, renamed when whole), so that
``bert_tf.load(folder).classify(texts)`` and ``python -m bert_tf classify --model=folder``
answer with label names::

  {"task_name": "MRPC", "labels": ["0", "1"], "is_regression": false,
   "do_lower_case": true, "max_seq_length": 128}

A multi-label classifier (run_classifier.py --multi_label) adds ``"multi_label": true``: its
outputs are independent sigmoid probabilities, one per label.

A folder fine-tuned by run_ner.py has ``token_classifier.json`` instead (``write_tokens``,
``read_tokens``: the tag names in output order, ``do_lower_case``, ``max_seq_length``), for
``bert_tf.load(folder).tag(text)``; its own name, so that a token classifier is never read as
a sentence classifier (both heads are ``output_weights [C,H]``).

``labels`` are the names in output order (the task processor's ``get_labels()``; for the
``user`` task ``--labels``, ``labels.txt`` or the sorted training labels); a regression has
one output and ``labels`` ``[]``.
"""

import json
import os

import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError

FILE_NAME = "classifier.json"
TOKEN_FILE_NAME = "token_classifier.json"


def write(folder, labels, *, is_regression=False, task_name=None, do_lower_case=True,
          max_seq_length=None, multi_label=False):
  """Writes ``folder/classifier.json`` atomically; returns its path."""
  info = {"task_name": task_name, "labels": [] if is_regression else [str(x) for x in labels],
          "is_regression": bool(is_regression), "do_lower_case": bool(do_lower_case),
          "max_seq_length": max_seq_length}
  if multi_label:
    info["multi_label"] = True
  path = os.path.join(folder, FILE_NAME)
  with fileio.atomic_write(path) as f:
    f.write(json.dumps(info, indent=1) + "\n")
  return path


_MISSING = object()


def check_names(labels, flag="--labels"):
  """Label names given by a flag: non-empty and distinct (one output each)."""
  seen = set()
  for label in labels:
    if not str(label).strip():
      raise BertTfError(f"{flag} {','.join(map(str, labels))}: an empty label name")
    if label in seen:
      raise BertTfError(f"{flag} {','.join(map(str, labels))}: {label!r} given twice (one "
                        "output per label: names must differ)")
    seen.add(label)


def _read_json(folder, name):
  """``(content, path)`` of ``folder/name``: its JSON, or ``_MISSING`` when there is no such
  file (a one-line error when it is not JSON)."""
  path = os.path.join(folder, name)
  if not tf.io.gfile.exists(path):
    return _MISSING, path
  return fileio.read_json(path), path


def _labels(info):
  labels = info.get("labels") if isinstance(info, dict) else None
  return labels if isinstance(labels, list) and all(isinstance(x, str) for x in labels) else None


def read(folder):
  """``folder/classifier.json`` as a dict, or None when the folder has none.

  Raises:
    BertTfError: the file is not valid JSON, or its labels are not a list of names.
  """
  info, path = _read_json(folder, FILE_NAME)
  if info is _MISSING:
    return None
  labels = _labels(info)
  if labels is None or (not info.get("is_regression") and len(labels) < 2):
    raise BertTfError(f"{path}: 'labels' must be a list of at least 2 label names (or "
                      "'is_regression': true)")
  return info


def write_tokens(folder, labels, *, do_lower_case=True, max_seq_length=None):
  """Writes ``folder/token_classifier.json`` atomically; returns its path."""
  path = os.path.join(folder, TOKEN_FILE_NAME)
  with fileio.atomic_write(path) as f:
    f.write(json.dumps({"labels": [str(x) for x in labels],
                        "do_lower_case": bool(do_lower_case),
                        "max_seq_length": max_seq_length}, indent=1) + "\n")
  return path


def read_tokens(folder):
  """``folder/token_classifier.json`` as a dict, or None when the folder has none.

  Raises:
    BertTfError: the file is not valid JSON, or its labels are not at least 2 tag names.
  """
  info, path = _read_json(folder, TOKEN_FILE_NAME)
  if info is _MISSING:
    return None
  labels = _labels(info)
  if labels is None or len(labels) < 2:
    raise BertTfError(f"{path}: 'labels' must be a list of at least 2 tag names")
  return info


def from_hugging_face(folder):
  """``(classifier_info, token_classifier_info)`` of a Hugging Face folder without bert_tf's
  files: a ``BertForSequenceClassification`` / ``BertForTokenClassification`` config.json's
  ``id2label`` (and ``problem_type``), the fine-tuning length from tokenizer_config.json's
  ``model_max_length`` when it is below the position limit (bert_tf's export writes it so).
  ``(None, None)`` for anything else. A folder bert_tf exported (export_hugging_face) then
  classifies or tags as the folder it was exported from."""
  path = os.path.join(folder, "config.json")
  if not tf.io.gfile.exists(path):
    return None, None
  config = fileio.read_json(path)
  architectures = config.get("architectures") if isinstance(config, dict) else None
  kind = next((a for a in architectures or () if a in (
      "BertForSequenceClassification", "BertForTokenClassification")), None)
  id2label = config.get("id2label") if kind else None
  if not isinstance(id2label, dict):
    return None, None
  try:
    labels = [str(id2label[str(i)]) for i in range(len(id2label))]
  except KeyError:
    return None, None
  length = None
  tokenizer_path = os.path.join(folder, "tokenizer_config.json")
  if tf.io.gfile.exists(tokenizer_path):
    limit = fileio.read_json(tokenizer_path).get("model_max_length")
    if isinstance(limit, int) and 2 < limit < config.get("max_position_embeddings", 512):
      length = limit
  if kind == "BertForTokenClassification":
    return None, {"labels": labels, "max_seq_length": length}
  problem = config.get("problem_type")
  regression = problem == "regression" or len(labels) == 1 and problem is None
  info = {"task_name": None, "labels": [] if regression else labels,
          "is_regression": regression, "max_seq_length": length}
  if problem == "multi_label_classification":
    info["multi_label"] = True
  return info, None


def check_unchanged(folder, kept, now, file_name, flag="--output_dir"):
  """A run over ``folder``'s fine-tuned checkpoints against what they were fine-tuned with:
  ``kept`` (``read``/``read_tokens`` of the folder, None when there is none) and ``now`` (the
  same keys, this run's values). Output i of the head is the label ``kept["labels"][i]``: a
  run with another label order, task or casing would evaluate or resume the weights under
  other names and write its labels over the folder's. Raises a one-line ``BertTfError`` naming
  what differs. ``flag``: the flag that named ``folder`` (``--init_checkpoint``: see
  ``check_init_checkpoint``)."""
  if kept is None:
    return
  changed = [(key, kept.get(key, False), value) for key, value in now.items()
             if kept.get(key, False) != value]
  if not changed:
    return

  def show(value):
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)

  listed = "; ".join(f"{key} {show(old)} (now {show(new)})" for key, old, new in changed)
  raise BertTfError(f"{flag} {folder!r} holds checkpoints fine-tuned with other labels "
                    f"({os.path.join(folder, file_name)}): {listed}; give the same --labels / "
                    f"--task_name / --do_lower_case, or use another {flag}")


def check_init_checkpoint(init_checkpoint, now, file_name):
  """A run that uses ``init_checkpoint``'s head as it is (eval, predict or an export without
  --do_train, no checkpoint of its own) against the labels file beside it (in its folder, or
  the folder it names: a bert_tf output folder, its ``google/``): an export-only run of a
  multi-label model with plain labels served softmax over sigmoid-trained logits, and
  ``--labels=1,0`` over a model fine-tuned with 0,1 answered the other label, without a
  word. Nothing when there is no such file (a pretrained checkpoint, a Hugging Face folder).
  The task's name is not compared: GLUE's AX (predict) and XNLI run an MNLI model, a user
  task may reuse another's; its labels, casing and kind of output are."""
  if not init_checkpoint:
    return
  folder = fileio.checkpoint_folder(init_checkpoint)
  kept = (read if file_name == FILE_NAME else read_tokens)(folder)
  now = {key: value for key, value in now.items() if key != "task_name"}
  check_unchanged(folder, kept, now, file_name, flag="--init_checkpoint")
