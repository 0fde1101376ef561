"""SavedModels that need TensorFlow and tensorflow-text only: classifier, encoder, preprocessor.

Loading any of them needs ``import tensorflow_text`` first (it registers the WordPiece ops the
in-graph tokenizer uses); bert_tf itself is not needed: ``tf.saved_model.load(path)``.

Shape legend: B = batch, S = sequence length (``max_seq_length`` for text inputs, any for
ids), H = hidden size, L = layers, C = classes, T = word pieces of one text (ragged).

Classifier (``export_classifier``), signatures:
  serving_default, serve_text   text [B] string
  serve_text_pair               text_a [B], text_b [B] string
  serve_ids                     input_word_ids, input_mask, input_type_ids [B,S] int32
each returning
  classification  logits [B,C], probabilities [B,C] float32, label_ids [B] int32,
                  labels [B] string (the label names)
  regression      logits [B,1], predictions [B] float32 (the score)
  multi-label     logits [B,C], probabilities [B,C] float32 (each label's sigmoid),
                  predictions [B,C] int32 (1 where the probability is above 0.5)
Text goes through the fine-tuned model's own preprocessing (vocab, casing, max_seq_length,
the original's truncation). Attributes: ``label_names``, ``vocab_file``, ``do_lower_case``,
``max_seq_length``; the signatures' functions are also methods (``loaded.serve_text(t)``).

Encoder (``export_encoder``), as TF Hub's BERT encoders:
  ``loaded(inputs, training=False)`` with inputs {input_word_ids, input_mask, input_type_ids}
  [B,S] int32 -> {sequence_output [B,S,H], pooled_output [B,H], default [B,H] (=
  pooled_output), encoder_outputs (list of L [B,S,H])}; training=True turns dropout on
  (fine-tuning: ``loaded.trainable_variables``, TF Hub's Reusable SavedModel API with
  ``variables`` and ``regularization_losses``). Signature serving_default: the same inputs ->
  sequence_output, pooled_output, default, and encoder_outputs stacked [L,B,S,H].
  Attributes ``vocab_file`` (asset), ``do_lower_case``.

Preprocessor (``export_preprocessor``), as TF Hub's BERT preprocessors:
  ``loaded(text [B])`` -> {input_word_ids, input_mask, input_type_ids} [B,S] int32;
  ``loaded.tokenize(text [B])`` -> word-piece ids [B,(T)] int32 ragged (TF Hub's has a word
  dimension too: [B,(words),(pieces)]); ``loaded.bert_pack_inputs([ids_a])`` or
  ``([ids_a, ids_b])`` -> the dict, truncated as the original (S is fixed at export, not an
  argument as in TF Hub). Signatures serving_default (text) and serve_text_pair (text_a,
  text_b).

Every export is written to a temporary directory beside its target and renamed into place
when whole (``write_atomically``). Nothing the user had is deleted (``check_export_dir``): the
target may be missing or an empty folder; a previous export of ours (a SavedModel folder, or
export_all's classifier/encoder/preprocessor) is replaced only with ``overwrite=True``
(``--overwrite_export``), whole and at once; any other existing path is refused with a
one-line ``BertTfError``, as is an export_dir that is, or contains, the run's output_dir.

Every signature checks that its inputs hold one row per example each (a ``text_a`` of 1 row
with a ``text_b`` of 3 would otherwise be broadcast): a mismatch raises
``InvalidArgumentError`` naming both inputs and their sizes.
"""

import os

import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError
from bert_tf.export import swap
from bert_tf.preprocessing import BertPreprocessor, assert_same_batch
from bert_tf.training.loop import random_states

_IDS = ("input_word_ids", "input_mask", "input_type_ids")


def _ids_spec(name):
  return tf.TensorSpec([None, None], tf.int32, name=name)


_TEXT = tf.TensorSpec([None], tf.string, name="text")
_TEXT_A = tf.TensorSpec([None], tf.string, name="text_a")
_TEXT_B = tf.TensorSpec([None], tf.string, name="text_b")
_RAGGED_IDS = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)


# What tf.saved_model.save writes into a SavedModel folder, and export_all's sub-folders.
_SAVED_MODEL_ENTRIES = frozenset(["saved_model.pb", "fingerprint.pb", "variables", "assets",
                                  "assets.extra"])
_EXPORT_ALL_ENTRIES = frozenset(["classifier", "encoder", "preprocessor"])


def _entries(path):
  return {name.rstrip("/") for name in tf.io.gfile.listdir(path)}  # gs:// lists "dir/"


def _is_saved_model(path):
  entries = _entries(path)
  return "saved_model.pb" in entries and entries <= _SAVED_MODEL_ENTRIES


def is_previous_export(path):
  """True if folder ``path`` holds nothing but an export of ours: one SavedModel, or
  export_all's classifier/encoder/preprocessor SavedModels (so replacing it loses nothing
  but that export)."""
  entries = _entries(path)
  if entries and entries <= _EXPORT_ALL_ENTRIES:
    return all(tf.io.gfile.isdir(os.path.join(path, name)) and
               _is_saved_model(os.path.join(path, name)) for name in entries)
  return _is_saved_model(path)


def _inside(path, folder):
  """True if ``path`` is ``folder`` or lies under it (both normalised, absolute if local)."""
  return path == folder or path.startswith(folder.rstrip("/") + "/")


def _absolute(path):
  return os.path.normpath(path if fileio.is_remote(path) else os.path.abspath(path))


def check_export_dir(export_dir, *, overwrite=False, output_dir=None):
  """Raises a one-line ``BertTfError`` unless writing an export to ``export_dir`` loses
  nothing the user had.

  Allowed: a path that does not exist, an empty folder, and (only with ``overwrite``) a
  previous export of ours (``is_previous_export``). Refused: a file; any other non-empty
  folder; an export_dir that is ``output_dir`` or contains it (replacing it would take the
  run's checkpoints along). An export_dir inside output_dir is fine (README's own example:
  ``--output_dir=mrpc_output --export_dir=mrpc_output/export``).

  Scripts call it before training, so that a bad --export_dir fails in a second, not after
  the run; ``write_atomically`` calls it again just before it replaces anything. A previous
  export that an overwrite killed between its two renames left aside is first put back
  (``swap.restore_interrupted_overwrite``).
  """
  swap.check_not_around_working_folder(export_dir, "--export_dir")
  swap.restore_interrupted_overwrite(export_dir, is_previous_export)
  target = _absolute(export_dir)
  if output_dir:
    output = _absolute(output_dir)
    if target == output:
      raise BertTfError(f"--export_dir {export_dir!r} is the --output_dir: give the export a "
                        f"folder of its own, e.g. {os.path.join(output_dir, 'export')!r}")
    if _inside(output, target):
      raise BertTfError(f"--export_dir {export_dir!r} contains the --output_dir "
                        f"{output_dir!r}: give the export a folder of its own, e.g. "
                        f"{os.path.join(output_dir, 'export')!r}")
  if not tf.io.gfile.exists(export_dir):
    return
  if not tf.io.gfile.isdir(export_dir):
    raise BertTfError(f"--export_dir {export_dir!r} exists and is not a directory; "
                      "give a new path")
  entries = _entries(export_dir)
  if not entries:
    return
  if not is_previous_export(export_dir):
    raise BertTfError(f"--export_dir {export_dir!r} is a folder with other files in it (e.g. "
                      f"{sorted(entries)[0]!r}) that an export would replace; nothing was "
                      f"written: give a new path, e.g. {_new_path(export_dir)!r}")
  if not overwrite:
    raise BertTfError(f"--export_dir {export_dir!r} holds a previous export: pass "
                      "--overwrite_export to replace it, or give a new path")


def _new_path(export_dir):
  """A path that does not exist yet, inside ``export_dir``: a suggestion for the user."""
  candidate = os.path.join(export_dir, "export")
  number = 2
  while tf.io.gfile.exists(candidate):
    candidate = os.path.join(export_dir, f"export_{number}")
    number += 1
  return candidate


def write_atomically(export_dir, write, *, overwrite=False):
  """Calls ``write(tmp_dir)``, then swaps tmp_dir in as ``export_dir`` (``swap.write_atomically``:
  the previous export renamed aside, the new one renamed in, the previous one removed; a kill
  between the two renames loses nothing, the next run puts the previous export back).

  ``export_dir`` must pass ``check_export_dir`` (a previous export is replaced only with
  ``overwrite``): it is checked before ``write`` and again before the swap. A failed ``write``
  leaves everything as it was. Returns ``export_dir``, normalised.

  A SavedModel's ``assets.extra/`` is the user's (TensorFlow writes none; TF Serving reads its
  warmup requests there): a replaced export's goes into the new one, as it was (an overwrite
  deleted it).
  """

  def write_keeping_extras(tmp):
    write(tmp)
    if not tf.io.gfile.isdir(export_dir):
      return
    subfolders = [""] if _is_saved_model(export_dir) else sorted(_EXPORT_ALL_ENTRIES)
    for sub in subfolders:
      extra = os.path.join(export_dir, sub, _ASSETS_EXTRA)
      new_model = os.path.join(tmp, sub)
      if (tf.io.gfile.isdir(extra)
          and tf.io.gfile.exists(os.path.join(new_model, "saved_model.pb"))
          and not tf.io.gfile.exists(os.path.join(new_model, _ASSETS_EXTRA))):
        _copy_tree(extra, os.path.join(new_model, _ASSETS_EXTRA))

  return swap.write_atomically(
      export_dir, write_keeping_extras,
      check=lambda path: check_export_dir(path, overwrite=overwrite),
      is_previous=is_previous_export)


_ASSETS_EXTRA = "assets.extra"


def _copy_tree(source, target):
  """Copies folder ``source`` to ``target`` (gs:// too)."""
  tf.io.gfile.makedirs(target)
  for name in tf.io.gfile.listdir(source):
    name = name.rstrip("/")
    path = os.path.join(source, name)
    if tf.io.gfile.isdir(path):
      _copy_tree(path, os.path.join(target, name))
    else:
      tf.io.gfile.copy(path, os.path.join(target, name), overwrite=True)


def check_fits(model, vocab_file, max_seq_length=None):
  """The preprocessing fits the model, as the scripts check: a vocab of the config's size (one
  of another size exported, and the served model then failed on the first text), and a
  max_seq_length within its position embeddings (was a multi-line tracing error)."""
  from bert_tf import tokenization  # pylint: disable=import-outside-toplevel
  config = getattr(getattr(model, "bert", model), "config", None)
  if config is None:
    return
  if isinstance(vocab_file, (list, tuple)):  # the tokens themselves, in id order
    tokenization.check_vocab_size("given as tokens", len(vocab_file), config.vocab_size)
  else:
    fileio.require_file(vocab_file, "vocab file", "vocab_file")
    vocab = tokenization.load_vocab(vocab_file)
    tokenization.check_vocab_size(vocab_file, tokenization.vocab_size(vocab), config.vocab_size)
  if max_seq_length is not None:
    if max_seq_length > config.max_position_embeddings:
      raise BertTfError(f"max_seq_length {max_seq_length} exceeds the model's "
                        f"max_position_embeddings {config.max_position_embeddings}")
    if max_seq_length < 3:
      raise BertTfError(f"max_seq_length must be at least 3, got {max_seq_length}")


def _make_preprocessor(vocab_file, do_lower_case, max_seq_length):
  fileio.require_file(vocab_file, "vocab file", "vocab_file")
  return BertPreprocessor(vocab_file, do_lower_case=do_lower_case,
                          max_seq_length=max_seq_length)


# The modules' tf.function methods run without AutoGraph (straight-line code; nothing in them
# branches on a tensor). With it, TensorFlow binds a method to its module through a weak
# TfMethodTarget and AutoGraph tells builtins by the ids it recorded when TensorFlow was first
# imported; in a Jupyter kernel one of those ids is ipykernel's per-cell ``builtins.input``,
# freed when the cell ends, and a binding that lands at that address was called as a builtin:
# with the TfMethodTarget as ``self`` (AttributeError; bert_tf.inference met it in CI).
class _Assets(tf.Module):
  """vocab_file (an asset, copied into the export) and do_lower_case, as TF Hub's models."""

  def _add_assets(self, vocab_file, do_lower_case):
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self.do_lower_case = tf.Variable(bool(do_lower_case), trainable=False,
                                     name="do_lower_case")


class ClassifierModule(_Assets):
  """A fine-tuned ``BertClassifier`` with its preprocessing (see the module docstring)."""

  def __init__(self, model, vocab_file, do_lower_case, max_seq_length, labels=None,
               multi_label=False):
    super().__init__(name="bert_classifier")
    check_fits(model, vocab_file, max_seq_length)
    self.model = model
    self.is_regression = model.num_labels == 1  # One output: a regression score.
    self.multi_label = multi_label
    if multi_label and self.is_regression:
      raise BertTfError("a multi-label classifier needs at least 2 outputs")
    if not self.is_regression:
      labels = [str(label) for label in (labels or range(model.num_labels))]
      if len(labels) != model.num_labels:
        raise BertTfError(f"{len(labels)} label names for a classifier with "
                          f"{model.num_labels} outputs")
      self.label_names = tf.Variable(labels, trainable=False, name="label_names")
    self.preprocessor = _make_preprocessor(vocab_file, do_lower_case, max_seq_length)
    self.max_seq_length = tf.Variable(int(max_seq_length), trainable=False,
                                      name="max_seq_length")
    self._add_assets(vocab_file, do_lower_case)

  def _outputs(self, inputs):
    logits = tf.cast(self.model(inputs, training=False), tf.float32)        # [B,C]
    if self.is_regression:
      return {"logits": logits, "predictions": logits[:, 0]}
    if self.multi_label:
      return {"logits": logits, "probabilities": tf.math.sigmoid(logits),
              "predictions": tf.cast(logits > 0, tf.int32)}
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)           # [B]
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "label_ids": label_ids, "labels": tf.gather(self.label_names, label_ids)}

  @tf.function(autograph=False, input_signature=[_TEXT])
  def serve_text(self, text):
    return self._outputs(self.preprocessor(text))

  @tf.function(autograph=False, input_signature=[_TEXT_A, _TEXT_B])
  def serve_text_pair(self, text_a, text_b):
    return self._outputs(self.preprocessor((text_a, text_b)))

  @tf.function(autograph=False, input_signature=[_ids_spec(name) for name in _IDS])
  def serve_ids(self, input_word_ids, input_mask, input_type_ids):
    inputs = {"input_word_ids": input_word_ids, "input_mask": input_mask,
              "input_type_ids": input_type_ids}
    checked = assert_same_batch("serve_ids", list(inputs.items()), dims=2)
    return self._outputs(dict(zip(inputs, checked)))

  def signatures(self):
    return {"serving_default": self.serve_text, "serve_text": self.serve_text,
            "serve_text_pair": self.serve_text_pair, "serve_ids": self.serve_ids}


class EncoderModule(_Assets):
  """A bare ``BertModel`` laid out as a TF Hub BERT encoder (see the module docstring)."""

  # TF Hub's Reusable SavedModel API: these are saved as attributes of the loaded object
  # (tf.Module only has them as properties, which are not saved).
  variables = trainable_variables = regularization_losses = None

  def __init__(self, encoder, vocab_file, do_lower_case):
    super().__init__(name="bert_encoder")
    check_fits(encoder, vocab_file)
    self.encoder = encoder
    self.variables = list(encoder.variables)
    self.trainable_variables = list(encoder.trainable_variables)
    self.regularization_losses = []
    # Dropout's random-generator states (Keras does not track them): training=True uses them.
    self.random_states = random_states(encoder)
    self._add_assets(vocab_file, do_lower_case)

  def _encode(self, inputs, training=False):
    checked = assert_same_batch("encoder", [(k, inputs[k]) for k in _IDS], dims=2)
    outputs = self.encoder(dict(zip(_IDS, checked)), training=training)
    return {"sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"],
            "default": outputs["pooled_output"],
            "encoder_outputs": list(outputs["encoder_outputs"])}

  @tf.function(autograph=False)
  def __call__(self, inputs, training=False):
    return self._encode(inputs, training=training)

  @tf.function(autograph=False, input_signature=[_ids_spec(name) for name in _IDS])
  def serve_ids(self, input_word_ids, input_mask, input_type_ids):
    outputs = self._encode({"input_word_ids": input_word_ids, "input_mask": input_mask,
                            "input_type_ids": input_type_ids})
    outputs["encoder_outputs"] = tf.stack(outputs["encoder_outputs"], axis=0)  # [L,B,S,H]
    return outputs

  def trace(self):
    """Traces ``__call__`` for training=False and True (what the export keeps)."""
    spec = {name: _ids_spec(name) for name in _IDS}
    self.__call__.get_concrete_function(spec, training=False)
    self.__call__.get_concrete_function(spec, training=True)

  def signatures(self):
    return {"serving_default": self.serve_ids}


class PreprocessorModule(_Assets):
  """``BertPreprocessor`` laid out as a TF Hub BERT preprocessor (see the module docstring)."""

  def __init__(self, vocab_file, do_lower_case, max_seq_length):
    super().__init__(name="bert_preprocessor")
    self.preprocessor = _make_preprocessor(vocab_file, do_lower_case, max_seq_length)
    self.max_seq_length = tf.Variable(int(max_seq_length), trainable=False,
                                      name="max_seq_length")
    self._add_assets(vocab_file, do_lower_case)

  @tf.function(autograph=False, input_signature=[_TEXT])
  def __call__(self, text):
    return self.preprocessor(text)

  @tf.function(autograph=False, input_signature=[_TEXT])
  def tokenize(self, text):
    return self.preprocessor.tokenize(text)

  @tf.function(autograph=False)
  def bert_pack_inputs(self, segments):
    if len(segments) not in (1, 2):
      raise ValueError(f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}")
    return self.preprocessor.pack(*segments)

  @tf.function(autograph=False, input_signature=[_TEXT_A, _TEXT_B])
  def serve_text_pair(self, text_a, text_b):
    return self.preprocessor((text_a, text_b))

  def trace(self):
    self.bert_pack_inputs.get_concrete_function([_RAGGED_IDS])
    self.bert_pack_inputs.get_concrete_function([_RAGGED_IDS, _RAGGED_IDS])

  def signatures(self):
    return {"serving_default": self.__call__, "serve_text_pair": self.serve_text_pair}


def _save(module, export_dir, overwrite):
  if hasattr(module, "trace"):
    module.trace()
  return write_atomically(
      export_dir, lambda tmp: tf.saved_model.save(module, tmp, signatures=module.signatures()),
      overwrite=overwrite)


def export_classifier(model, export_dir, *, vocab_file, do_lower_case=None, max_seq_length=None,
                      labels=None, overwrite=False, multi_label=False):
  """Writes a fine-tuned ``BertClassifier`` as a SavedModel taking raw text or ids.

  Args:
    model: a ``bert_tf.modeling.BertClassifier`` (num_labels=1: regression), or what
      ``bert_tf.load`` returns for a folder run_classifier.py fine-tuned (its head, and unless
      given the labels, multi-label, casing and length of its classifier.json).
    export_dir: the SavedModel directory: missing, empty, or (with ``overwrite``) a previous
      export, replaced whole (``check_export_dir``).
    vocab_file, do_lower_case, max_seq_length: the preprocessing the model was trained with
      (default: a loaded folder's, else lower-cased and 128).
    labels: label names in id order (default "0", "1", ...); ignored for regression.
    multi_label: the outputs are independent sigmoid probabilities (run_classifier.py
      --multi_label).
  Returns:
    export_dir.
  Raises:
    BertTfError: ``model`` is no fine-tuned classifier (one line; it was an AttributeError).
  """
  model, labels, multi_label, do_lower_case, max_seq_length = _classifier(
      model, labels, multi_label, do_lower_case, max_seq_length, "export_classifier")
  model = in_float32(model)
  return _save(ClassifierModule(model, vocab_file, do_lower_case, max_seq_length, labels,
                                multi_label=multi_label), export_dir, overwrite)


def in_float32(model):
  """``model``, or for a model built under a mixed precision policy (trained with --dtype
  bfloat16 or float16) a float32 copy of it with the same weights: an export computes in
  float32 whatever the training did (it computed in 16 bits, its numbers off bert_tf.load's
  and the evaluation's of the same checkpoint by up to 7e-4; TF Serving on a CPU has no fast
  bfloat16 either)."""
  policy = getattr(getattr(model, "dtype_policy", None), "name", "float32")
  if policy == "float32":
    return model
  config = model.get_config()
  config["dtype"] = "float32"
  twin = type(model).from_config(config)
  ids = tf.zeros([1, 2], tf.int32)
  twin({name: ids for name in _IDS}, training=False)  # builds its variables
  twin.set_weights(model.get_weights())
  return twin


def _classifier(model, labels, multi_label, do_lower_case, max_seq_length, function):
  """``(BertClassifier, labels, multi_label, do_lower_case, max_seq_length)`` of ``model``
  and the arguments given (see ``export_classifier``)."""
  from bert_tf import inference  # pylint: disable=import-outside-toplevel
  from bert_tf.export import folder_exports  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertClassifier  # pylint: disable=import-outside-toplevel
  if isinstance(model, inference.InferenceModel):
    task = (folder_exports.fine_tuned(model, function)
            if model.classifier_info is not None else None)
    if task is None:
      raise BertTfError(f"{function}: {model.source} is not a classifier fine-tuned by "
                        "run_classifier.py (no classifier.json beside its checkpoint)")
    info = model.classifier_info
    if do_lower_case is None:  # the fine-tuning's (classifier.json), else the loaded model's
      do_lower_case = info.get("do_lower_case", model.do_lower_case)
    if max_seq_length is None:
      max_seq_length = info.get("max_seq_length") or 128
    return task[0], labels or task[1], multi_label or task[2], bool(do_lower_case), max_seq_length
  if not isinstance(model, BertClassifier):
    raise BertTfError(f"{function}: model must be a fine-tuned bert_tf.modeling.BertClassifier "
                      "or what bert_tf.load returns for a folder run_classifier.py fine-tuned, "
                      f"not {type(model).__name__}")
  return (model, labels, multi_label, True if do_lower_case is None else do_lower_case,
          128 if max_seq_length is None else max_seq_length)


def export_encoder(encoder, export_dir, *, vocab_file, do_lower_case=None, overwrite=False):
  """Writes a ``BertModel`` (or a task model's ``.bert``, or what ``bert_tf.load`` returns)
  as a TF Hub-style encoder; ``do_lower_case`` default: a loaded model's, else True."""
  from bert_tf import inference  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertModel  # pylint: disable=import-outside-toplevel
  if isinstance(encoder, inference.InferenceModel):
    if do_lower_case is None:
      do_lower_case = encoder.do_lower_case
    encoder = encoder.model
  if do_lower_case is None:
    do_lower_case = True
  encoder = getattr(encoder, "bert", encoder)
  if not isinstance(encoder, BertModel):
    raise BertTfError("export_encoder: encoder must be a bert_tf BertModel, a task model or "
                      f"what bert_tf.load returns, not {type(encoder).__name__}")
  encoder = in_float32(encoder)
  return _save(EncoderModule(encoder, vocab_file, do_lower_case), export_dir, overwrite)


def export_preprocessor(export_dir, *, vocab_file, do_lower_case=True, max_seq_length=128,
                        overwrite=False):
  """Writes the in-graph preprocessing as a TF Hub-style preprocessor SavedModel."""
  return _save(PreprocessorModule(vocab_file, do_lower_case, max_seq_length), export_dir,
               overwrite)


def export_all(model, export_dir, *, vocab_file, do_lower_case=None, max_seq_length=None,
               labels=None, overwrite=False, multi_label=False):
  """``export_dir/{classifier,encoder,preprocessor}`` from a fine-tuned classifier, written
  (as a whole) atomically; ``model`` and ``overwrite`` as ``export_classifier``. Returns
  export_dir."""
  model, labels, multi_label, do_lower_case, max_seq_length = _classifier(
      model, labels, multi_label, do_lower_case, max_seq_length, "export_all")

  def write(tmp):
    tf.io.gfile.makedirs(tmp)
    export_classifier(model, os.path.join(tmp, "classifier"), vocab_file=vocab_file,
                      do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                      labels=labels, multi_label=multi_label)
    export_encoder(model, os.path.join(tmp, "encoder"), vocab_file=vocab_file,
                   do_lower_case=do_lower_case)
    export_preprocessor(os.path.join(tmp, "preprocessor"), vocab_file=vocab_file,
                        do_lower_case=do_lower_case, max_seq_length=max_seq_length)
  return write_atomically(export_dir, write, overwrite=overwrite)
