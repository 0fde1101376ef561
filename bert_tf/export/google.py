"""Google export: any model ``bert_tf.load`` takes as a folder in Google's own layout, which
Google's code reads (``run_classifier.py --init_checkpoint``, ``modeling.BertModel`` with
``tf.train.init_from_checkpoint``), and bert_tf too.

  >>> bert_tf.export_google("pretraining_output/ckpt-20000", "bert-20000")  # doctest: +SKIP
  $ python -m bert_tf export-google --model=pretraining_output/ckpt-20000 --output_dir=bert-20000

bert_tf's training checkpoints (``ckpt-N``) are TF2 object-based checkpoints: their variables
are named ``model/bert/...``, which match none of the names of Google's graph, so Google's
``get_assignment_map_from_checkpoint`` given one maps nothing and the run goes on from random
weights without a word. The training scripts write Google's format at the end of a run
(``output_dir/google``, ``--export_google_checkpoint``); this export writes it for any
checkpoint: an intermediate ``ckpt-N``, a folder (its newest checkpoint), a Hugging Face
folder, a released model's name.

The folder holds:
  - ``bert_model.ckpt.index``, ``bert_model.ckpt.data-00000-of-00001`` and ``checkpoint``:
    the weights under Google's names and layouts (``checkpoints.write_google_checkpoint``): the
    encoder, and the heads the model has: ``cls/predictions`` and ``cls/seq_relationship``
    (run_pretraining.py's), a fine-tuned classifier's or tagger's ``output_weights`` /
    ``output_bias`` (run_classifier.py's, run_ner.py's), ``cls/squad`` (run_squad.py's); any
    other weight the checkpoint holds, as it is. No optimizer slots (as Google's released
    checkpoints). ``global_step``: the checkpoint's step where it has one (a ``ckpt-N``'s is
    N; Google's own ``global_step``).
  - ``bert_config.json`` (Google's fields) and ``vocab.txt`` (the vocab in id order).
  - For a folder fine-tuned by run_classifier.py or run_ner.py: its ``classifier.json`` /
    ``token_classifier.json`` (the label names in output order, the casing and length of the
    fine-tuning), as the training scripts write them beside ``output_dir/google``: bert_tf's
    ``classify`` / ``tag`` of the export answer with the names. (Google's code takes its labels
    from its task processor.)

Google's layout records no casing (Google's scripts take ``--do_lower_case``): ``bert_tf.load``
of the export learns it from the vocab, or from the labels file. Written under a temporary name
beside ``output_dir`` and renamed when whole; an existing ``output_dir`` must be empty, or (with
``overwrite``) a previous export of this kind (``is_previous_export``, which the training
scripts' ``output_dir/google`` also is), swapped out whole as the Hugging Face export is
(``swap``).
"""

import functools
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import classifier_labels, tokenization
from bert_tf.export import folder_exports, swap
from bert_tf.modeling import checkpoints

CHECKPOINT = "bert_model.ckpt"
# What an export writes: the checkpoint (SaveV2 writes one data shard), its "checkpoint" state
# file, the config and vocab; a fine-tuned folder's labels file besides.
FILES = (CHECKPOINT + ".index", CHECKPOINT + ".data-00000-of-00001", "checkpoint",
         "bert_config.json", "vocab.txt")
LABEL_FILES = (classifier_labels.FILE_NAME, classifier_labels.TOKEN_FILE_NAME)

# Activations Google's modeling.get_activation knows ("gelu": its tanh approximation).
_GOOGLE_ACTIVATIONS = ("gelu", "relu", "tanh", "linear")


def export_google(model, output_dir, *, overwrite=False, config_file=None, vocab_file=None,
                  do_lower_case=None, global_step=None, progress=None):
  """Writes ``model`` as a folder in Google's layout; returns ``output_dir``.

  Args:
    model: what ``bert_tf.load`` returns (written with the heads it has, and a fine-tuned
      folder's head and labels file); a path or released model's name that ``bert_tf.load``
      takes: a bert_tf training folder (its newest ``ckpt-N``) or one ``ckpt-N`` of it
      (``out/ckpt-2000``), a Google or Hugging Face folder, a checkpoint; or a bert_tf Keras
      model (written with all its variables), then with ``vocab_file``.
    output_dir: the folder to write (new, or empty).
    overwrite: replace a previous export at ``output_dir``.
    config_file, vocab_file, do_lower_case: as in ``bert_tf.load``.
    global_step: the ``global_step`` to write; default: the checkpoint's own step, if any.
    progress: takes each note on what Google's code cannot run (``google_incompatibilities``);
      default: absl warnings.
  Raises:
    BertTfError: an ``output_dir`` holding other files, a Keras model without ``vocab_file``.
  """
  from bert_tf import inference  # pylint: disable=import-outside-toplevel
  model = folder_exports.loaded(model, functools.partial(check_output_dir, output_dir, overwrite,
                                                        model), config_file, vocab_file,
                               do_lower_case)
  labels = None
  if isinstance(model, inference.InferenceModel):
    config, tokenizer = model.config, model.tokenizer
    tensors = google_tensors(model)
    report = model.load_report
    if global_step is None and report is not None:
      global_step = checkpoints.checkpoint_step(report.source)
    labels = _labels_file(model)
  else:
    keras_model, tokenizer, _, _ = folder_exports.from_keras(model, vocab_file, do_lower_case,
                                                             "export_google")
    config = keras_model.config
    tensors = {name: variable.numpy()
               for name, variable in checkpoints.google_variable_map(keras_model).items()}
  check_output_dir(output_dir, overwrite)
  for note in google_incompatibilities(config):
    if progress is not None:
      progress(note)
    else:
      logging.warning("export_google: %s", note)
  vocab_text = "".join(token + "\n" for token in tokenization.vocab_lines(tokenizer.vocab))

  def write(folder):
    tf.io.gfile.makedirs(folder)
    checkpoints.write_google_checkpoint(tensors, os.path.join(folder, CHECKPOINT), global_step)
    config.to_json_file(os.path.join(folder, "bert_config.json"))
    with tf.io.gfile.GFile(os.path.join(folder, "vocab.txt"), "w") as f:
      # Every line of the vocab (id = line), a repeated token too: Google's load_vocab reads
      # ids so.
      f.write(vocab_text)
    if labels is not None:
      labels(folder)

  swap.write_atomically(output_dir, write, check=lambda path: check_output_dir(path, overwrite),
                        is_previous=is_previous_export)
  return output_dir


def google_tensors(bert):
  """``{google_name: np.ndarray}`` of a loaded model (what ``bert_tf.load`` returns): what its
  load found in the checkpoint (the encoder, the pooler and pretraining heads it has; none left
  at its initial values), a fine-tuned folder's head (``folder_exports.fine_tuned``), and any
  other weight of a TF checkpoint that the load left unused, as it is."""
  variables = checkpoints.google_variable_map(bert.model)
  report = bert.load_report
  found = variables if report is None else {name: variables[name] for name in report.loaded}
  tensors = {name: np.asarray(variable.numpy()) for name, variable in found.items()}
  task = folder_exports.fine_tuned(bert, "export_google")
  if task is not None:
    tensors.update({name: np.asarray(variable.numpy()) for name, variable in
                    checkpoints.google_variable_map(task[0]).items() if name not in tensors})
  left = [name for name in (report.unexpected if report is not None else ())
          if name not in tensors]
  if left:
    if checkpoints.is_hugging_face_weights(report.source):
      logging.warning("export_google: %s: not written (no Google name for them): %s",
                      report.source, ", ".join(left))
    else:
      values = checkpoints.read_model_tensors(report.source)
      tensors.update({name: values[name] for name in left if name in values})
  return tensors


def _labels_file(bert):
  """``write(folder)`` of a fine-tuned folder's labels file (``classifier.json`` /
  ``token_classifier.json``), or None."""
  info = bert.token_classifier_info
  if info is not None:
    return lambda folder: classifier_labels.write_tokens(
        folder, info["labels"], do_lower_case=info.get("do_lower_case", bert.do_lower_case),
        max_seq_length=info.get("max_seq_length"))
  info = bert.classifier_info
  if info is not None:
    return lambda folder: classifier_labels.write(
        folder, info["labels"], is_regression=bool(info.get("is_regression")),
        task_name=info.get("task_name"),
        do_lower_case=info.get("do_lower_case", bert.do_lower_case),
        max_seq_length=info.get("max_seq_length"), multi_label=bool(info.get("multi_label")))
  return None


def google_incompatibilities(config):
  """What of ``config`` Google's modeling.py does not do as bert_tf does (the export runs in
  bert_tf as it is; Google's code would refuse it, or compute other numbers): one line each."""
  notes = []
  if config.hidden_act not in _GOOGLE_ACTIVATIONS:
    notes.append(f"hidden_act {config.hidden_act!r} is bert_tf's, not Google's (its modeling.py "
                 f"knows {', '.join(_GOOGLE_ACTIVATIONS)}): Google's code refuses this config")
  if config.layer_norm_eps != 1e-12:
    notes.append(f"layer_norm_eps {config.layer_norm_eps} is not Google's 1e-12: Google's code "
                 "ignores it and computes slightly other numbers")
  return notes


def is_previous_export(path):
  """True if folder ``path`` holds the files an export writes and nothing else (at most one
  labels file besides; ``vocab.txt`` may be missing: a run's ``output_dir/google`` has none
  when the run was given no ``--vocab_file``): replacing it loses nothing else. A released
  Google folder (it has ``bert_model.ckpt.meta`` and no ``checkpoint`` file) is not one."""
  entries = {name.rstrip("/") for name in tf.io.gfile.listdir(path)}
  required = set(FILES) - {"vocab.txt"}
  extra = entries - set(FILES)
  return required <= entries and extra <= set(LABEL_FILES) and len(extra) <= 1


def check_output_dir(output_dir, overwrite, model=None, name="output_dir"):
  """Raises a one-line ``BertTfError`` unless an export to ``output_dir`` loses nothing: a new
  or empty folder, or a previous export with ``overwrite``; never the folder of ``model`` (a
  path being exported), nor the working folder (``folder_exports.check_output_dir``)."""
  folder_exports.check_output_dir(output_dir, overwrite, is_previous_export, model, name)
