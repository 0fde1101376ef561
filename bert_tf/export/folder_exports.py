"""What the two folder exports share: ``hugging_face`` (a folder transformers loads) and
``google`` (Google's layout, which Google's own code reads).

Both take what ``bert_tf.load`` returns, a path or released model's name that it takes (loaded
here, after the output folder's check: a download may follow), or a bert_tf Keras model with
its ``vocab_file``; both write a fine-tuned folder's head (``fine_tuned``); both write into an
output folder that must be new, empty, or (with ``overwrite``) a previous export of their own
kind (``check_output_dir``), swapped in whole by ``swap.write_atomically``.
"""

import os

import tensorflow as tf

from bert_tf import fileio, paths, tokenization
from bert_tf.errors import BertTfError
from bert_tf.export import swap


def check_output_dir(output_dir, overwrite, is_previous, model=None, name="output_dir"):
  """Raises a one-line ``BertTfError`` unless an export to ``output_dir`` loses nothing: a new
  or empty folder, or a previous export (``is_previous(path)`` recognises one of this kind)
  with ``overwrite``; never the folder of ``model`` (a path being exported: a folder, or a
  checkpoint prefix such as ``out/ckpt-20``), nor the working folder. ``name``: what the
  messages call the folder (the command line's ``--output_dir``)."""
  if not output_dir:
    raise BertTfError(f"no {name} given")
  if (isinstance(model, (str, os.PathLike)) and not fileio.is_remote(str(model)) and
      not fileio.is_remote(str(output_dir)) and
      (os.path.exists(model) or os.path.exists(f"{model}.index")) and
      os.path.realpath(model if os.path.isdir(model) else os.path.dirname(model) or ".") ==
      os.path.realpath(output_dir)):
    raise BertTfError(f"{name} {output_dir!r} is the folder of the model exported "
                      f"({str(model)!r}): give the export a folder of its own")
  swap.check_not_around_working_folder(output_dir, name)
  paths.check_writable(name, output_dir, is_folder=True)  # e.g. a file on its path
  swap.restore_interrupted_overwrite(output_dir, is_previous)
  # A killed export's half-made folder (``<output_dir>.tmp-<pid>-<hex>``), also when this run
  # is then refused: it stayed until a later export went through.
  fileio.remove_stale_temps(output_dir)
  if not tf.io.gfile.exists(output_dir):
    return
  if not tf.io.gfile.isdir(output_dir):
    raise BertTfError(f"{name} {output_dir!r} exists and is not a directory; give a new "
                      "path")
  entries = sorted(entry.rstrip("/") for entry in tf.io.gfile.listdir(output_dir))
  if not entries:
    return
  if not is_previous(output_dir):
    raise BertTfError(f"{name} {output_dir!r} is a folder with other files in it (e.g. "
                      f"{entries[0]!r}); nothing was written: give a new or empty folder")
  if not overwrite:
    how = "--overwrite" if name.startswith("--") else "overwrite=True"
    raise BertTfError(f"{name} {output_dir!r} holds a previous export: pass {how} to replace "
                      "it, or give a new path")


def is_keras_model(model):
  """A bert_tf Keras model (``BertModel``, ``BertPretrainer``, a task model)."""
  return hasattr(model, "weights") and hasattr(model, "config")


def loaded(model, check, config_file=None, vocab_file=None, do_lower_case=None):
  """``model`` itself when it is what ``bert_tf.load`` returns or a Keras model; else (a path
  or name) ``check()`` (the output folder's, before the load: it may be a download), then
  ``bert_tf.load(model, ...)``."""
  from bert_tf import inference  # pylint: disable=import-outside-toplevel
  if isinstance(model, inference.InferenceModel) or is_keras_model(model):
    return model
  check()
  return inference.load(model, config_file=config_file, vocab_file=vocab_file,
                        do_lower_case=do_lower_case)


def from_keras(model, vocab_file, do_lower_case, function):
  """``(model, tokenizer, do_lower_case, (masked LM, next sentence, pooler))`` of a Keras
  model; ``function`` names the export in the one-line error of a missing ``vocab_file``."""
  from bert_tf import casing  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertPretrainer  # pylint: disable=import-outside-toplevel
  if not vocab_file:
    raise BertTfError(f"{function}: a Keras model needs vocab_file= (its vocab.txt)")
  vocab = tokenization.load_vocab(vocab_file)
  tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(vocab), model.config.vocab_size)
  lower, _ = casing.resolve_do_lower_case(os.path.dirname(vocab_file) or ".", vocab,
                                          do_lower_case, vocab_file=vocab_file)
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  pretrainer = isinstance(model, BertPretrainer)
  return model, tokenizer, lower, (pretrainer, pretrainer, True)


def fine_tuned(bert, function):
  """``(task model, label names, multi-label)`` of a loaded folder fine-tuned by
  run_classifier.py or run_ner.py (its ``classifier.json`` / ``token_classifier.json``), or by
  run_squad.py (its checkpoint holds the ``cls/squad`` head, which the encoder's load left
  unused: it was written as a ``BertModel``, transformers' BertForQuestionAnswering then
  drawing a random head with only a warning), or None. ``function`` names the export in the
  one-line error of a head that does not load."""
  if bert.token_classifier_info is not None:
    bert._tagger_fn()  # pylint: disable=protected-access
    return (bert._tagger[0],  # pylint: disable=protected-access
            bert.token_classifier_info["labels"], False)
  if bert.classifier_info is not None:
    bert._classifier_fn()  # pylint: disable=protected-access
    info = bert.classifier_info
    return (bert._classifier[0],  # pylint: disable=protected-access
            None if info.get("is_regression") else info["labels"],
            bool(info.get("multi_label")))
  report = bert.load_report
  if report is not None and any(name.startswith("cls/squad/") for name in report.unexpected):
    from bert_tf.modeling import BertSpanLabeler  # pylint: disable=import-outside-toplevel
    from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
    model = BertSpanLabeler(bert.config)
    loaded_now = checkpoints.load_weights(model, bert.weights_path)
    if loaded_now.missing:  # (not expected: the encoder loaded from the same checkpoint)
      raise BertTfError(f"{function}: {bert.source}: the question-answering model "
                        f"misses {', '.join(loaded_now.missing)}")
    return model, None, False
  return None
