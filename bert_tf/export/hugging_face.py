"""Hugging Face export: any bert_tf model as a folder ``transformers`` loads.

  >>> bert_tf.export_hugging_face("bert-base-uncased", "bert-base-uncased-hf")  # doctest: +SKIP
  >>> transformers.BertForPreTraining.from_pretrained("bert-base-uncased-hf")  # doctest: +SKIP

The folder holds:
  - ``model.safetensors``: float32 tensors under Hugging Face's names (``checkpoints.
    hugging_face_name``: dense kernels transposed to [out,in]). With both pretraining heads the
    keys are ``BertForPreTraining``'s (``bert.*``, ``cls.predictions.*``,
    ``cls.seq_relationship.*``); with the masked-LM head only, ``BertForMaskedLM``'s; without
    heads, ``BertModel``'s (no prefix). The MLM decoder is tied to the word embeddings, as in
    Google's BERT, so it is not stored (``tie_word_embeddings``).
  - ``config.json``: ``architectures`` as above and the encoder's fields, ``hidden_act`` in
    Hugging Face's words (``BertConfig.to_hugging_face_dict``: Google's tanh GELU is
    ``"gelu_new"``, the exact erf GELU ``"gelu"``).
  - ``vocab.txt`` (the vocab in id order), ``tokenizer_config.json`` (``do_lower_case``, the
    special tokens, ``model_max_length``) and ``special_tokens_map.json``.

A fine-tuned model is written with its head, as the transformers class that has it:
``BertClassifier`` (run_classifier.py) as ``BertForSequenceClassification`` (``num_labels=1``:
``problem_type`` regression), ``BertTokenClassifier`` (run_ner.py) as
``BertForTokenClassification``, ``BertSpanLabeler`` (run_squad.py) as
``BertForQuestionAnswering`` (the last two without the pooler, which they do not have). The
label names go to ``id2label``/``label2id``: from ``labels=``, else from the fine-tuned
folder's ``classifier.json`` / ``token_classifier.json``. The folder is written
under a temporary name beside ``output_dir`` and renamed when whole; an existing
``output_dir`` must be empty, or (with ``overwrite``) a previous export of this kind
(``is_previous_export``), swapped out whole as a SavedModel export is (``swap``: a kill between
the two renames keeps it aside as ``<output_dir>.previous.tmp-<pid>-<8 hex>``, and the next
export to ``output_dir`` puts it back first).
"""

import functools
import json
import os

import numpy as np
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import BertTfError
from bert_tf.export import folder_exports, swap

# What an export writes (a folder holding only these is a previous export).
FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
         "special_tokens_map.json")
# Hugging Face's names of the special tokens.
_SPECIAL = (("unk_token", "[UNK]"), ("sep_token", "[SEP]"), ("pad_token", "[PAD]"),
            ("cls_token", "[CLS]"), ("mask_token", "[MASK]"))


# bert_tf's task models -> (transformers' class, whether it has the pooler).
TASK_ARCHITECTURES = {"BertClassifier": ("BertForSequenceClassification", True),
                      "BertTokenClassifier": ("BertForTokenClassification", False),
                      "BertSpanLabeler": ("BertForQuestionAnswering", False)}


def export_hugging_face(model, output_dir, *, overwrite=False, config_file=None,
                        vocab_file=None, do_lower_case=None, labels=None, multi_label=False):
  """Writes ``model`` as a Hugging Face BERT folder; returns ``output_dir``.

  Args:
    model: what ``bert_tf.load`` returns (its heads are written when it has them); a path or
      released model's name that ``bert_tf.load`` takes (a Google, bert_tf or Hugging Face
      folder, or checkpoint); or a bert_tf Keras model (``BertModel``; ``BertPretrainer``,
      written with both heads; any task model, written as its encoder), then with
      ``vocab_file``. A folder fine-tuned by run_classifier.py or run_ner.py (it has
      ``classifier.json`` or ``token_classifier.json``) or run_squad.py is written with its
      head.
    output_dir: the folder to write (new, or empty).
    overwrite: replace a previous export at ``output_dir``.
    config_file, vocab_file, do_lower_case: as in ``bert_tf.load``.
    labels: a task model's label names in output order (``id2label``).
    multi_label: a Keras ``BertClassifier`` of independent sigmoid outputs (``problem_type``
      ``multi_label_classification``); a folder's ``classifier.json`` says so itself.
  Raises:
    BertTfError: an ``output_dir`` holding other files, a Keras model without ``vocab_file``.
  """
  from bert_tf import inference  # pylint: disable=import-outside-toplevel
  model = folder_exports.loaded(model, functools.partial(check_output_dir, output_dir, overwrite,
                                                        model), config_file, vocab_file,
                               do_lower_case)
  fine_tuned_length = None
  if isinstance(model, inference.InferenceModel):
    keras_model, tokenizer, lower = model.model, model.tokenizer, model.do_lower_case
    # transformers truncates at model_max_length: the fine-tuning run's length, as the
    # SavedModel and bert_tf.load's classify (the position limit gave other answers for long
    # texts).
    fine_tuned_length = (model.classifier_info or model.token_classifier_info or {}).get(
        "max_seq_length")
    heads = (model.has_masked_lm, model.has_next_sentence, model.has_pooler)
    task = folder_exports.fine_tuned(model, "export_hugging_face")
    if task is not None:
      keras_model, labels, multi_label = task[0], labels or task[1], task[2]
  else:
    keras_model, tokenizer, lower, heads = folder_exports.from_keras(
        model, vocab_file, do_lower_case, "export_hugging_face")
  check_output_dir(output_dir, overwrite)
  tensors, architecture = hugging_face_tensors(keras_model, *heads)
  config = keras_model.config.to_hugging_face_dict(architectures=[architecture])
  config.update(_label_fields(keras_model, architecture, labels, multi_label))
  vocab = tokenizer.vocab
  config["pad_token_id"] = vocab.get("[PAD]", 0)
  tokenizer_config = {"do_lower_case": bool(lower), "tokenize_chinese_chars": True,
                      "strip_accents": None, "tokenizer_class": "BertTokenizer",
                      "model_max_length": int(fine_tuned_length or
                                              keras_model.config.max_position_embeddings)}
  special = {key: token for key, token in _SPECIAL if token in vocab}
  tokenizer_config.update(special)

  def write(folder):
    from safetensors.numpy import save  # pylint: disable=import-outside-toplevel
    tf.io.gfile.makedirs(folder)
    with tf.io.gfile.GFile(os.path.join(folder, "model.safetensors"), "wb") as f:
      f.write(save(tensors, metadata={"format": "pt"}))
    for name, values in (("config.json", config), ("tokenizer_config.json", tokenizer_config),
                         ("special_tokens_map.json", special)):
      with tf.io.gfile.GFile(os.path.join(folder, name), "w") as f:
        f.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
    with tf.io.gfile.GFile(os.path.join(folder, "vocab.txt"), "w") as f:
      # Every line of the vocab (id = line), a repeated token too: Hugging Face reads ids so.
      f.write("".join(token + "\n" for token in tokenization.vocab_lines(vocab)))

  swap.write_atomically(output_dir, write, check=lambda path: check_output_dir(path, overwrite),
                        is_previous=is_previous_export)
  return output_dir


def _label_fields(model, architecture, labels, multi_label=False):
  """config.json's ``num_labels`` fields of a task model: ``id2label``/``label2id`` (names
  from ``labels``, else transformers' default ``LABEL_<i>``), and a sequence classifier's
  ``problem_type`` (regression, single- or multi-label classification: the loss
  transformers trains it with)."""
  if architecture not in ("BertForSequenceClassification", "BertForTokenClassification"):
    return {}
  count = model.num_labels
  if labels is not None and len(labels) != count:
    raise BertTfError(f"export_hugging_face: {len(labels)} labels for a head of {count} "
                      "outputs")
  names = [str(x) for x in labels] if labels is not None else [f"LABEL_{i}" for i in range(count)]
  fields = {"id2label": {str(i): name for i, name in enumerate(names)},
            "label2id": {name: i for i, name in enumerate(names)}}
  if architecture == "BertForSequenceClassification":
    fields["problem_type"] = ("regression" if count == 1 else "multi_label_classification"
                              if multi_label else "single_label_classification")
  return fields


def hugging_face_tensors(model, masked_lm=True, next_sentence=True, pooler=True):
  """``({hugging_face_name: float32 array}, architecture)`` of a bert_tf model's encoder and
  the pretraining heads asked for (those the model has); of a task model
  (``TASK_ARCHITECTURES``), its encoder and head."""
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  names = checkpoints.google_variable_map(model)
  task = TASK_ARCHITECTURES.get(type(model).__name__)
  if task is not None:  # A fine-tuned model: its encoder and its head.
    architecture, has_pooler = task
    tensors = {}
    for name, variable in names.items():
      if not has_pooler and name.startswith("bert/pooler/"):
        continue
      hf_name, transpose = checkpoints.hugging_face_name(name, "bert.")
      value = np.asarray(variable.numpy(), np.float32)
      tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    return tensors, architecture
  masked_lm = masked_lm and any(n.startswith("cls/predictions/") for n in names)
  next_sentence = next_sentence and any(n.startswith("cls/seq_relationship/") for n in names)
  if masked_lm and next_sentence:
    architecture, prefix = "BertForPreTraining", "bert."
  elif masked_lm:
    architecture, prefix = "BertForMaskedLM", "bert."
  else:
    architecture, prefix = "BertModel", ""
  wanted = ["bert/"] + (["cls/predictions/"] if masked_lm else []) + (
      ["cls/seq_relationship/"] if next_sentence else [])
  tensors = {}
  for name, variable in names.items():
    if not name.startswith(tuple(wanted)) or (not pooler and name.startswith("bert/pooler/")):
      continue
    hf_name, transpose = checkpoints.hugging_face_name(name, prefix)
    value = np.asarray(variable.numpy(), np.float32)
    tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  return tensors, architecture


def is_previous_export(path):
  """True if folder ``path`` holds the files an export writes and nothing else (replacing it
  loses nothing else; a folder transformers saved with a model alone, or with a fast
  tokenizer's tokenizer.json, is not one)."""
  entries = {name.rstrip("/") for name in tf.io.gfile.listdir(path)}
  return entries == set(FILES)


def check_output_dir(output_dir, overwrite, model=None, name="output_dir"):
  """Raises a one-line ``BertTfError`` unless an export to ``output_dir`` loses nothing: a new
  or empty folder, or a previous export with ``overwrite``; never the folder of ``model`` (a
  path being exported), nor the working folder (``folder_exports.check_output_dir``)."""
  folder_exports.check_output_dir(output_dir, overwrite, is_previous_export, model, name)
