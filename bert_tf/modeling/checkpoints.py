"""Checkpoint I/O: Google's TF1 ``bert_model.ckpt`` (both ways) and Hugging Face weights.

This module is the one place for the checkpoint name map. bert_tf builds every variable under
Google's own name (``bert/encoder/layer_0/attention/self/query/kernel``, REFERENCE.md), so the
map from a model to Google names is the variable paths, with one exception: the classifier head
is stored at the top level (``output_weights``, ``output_bias``). Hugging Face names derive from
Google's by ``hugging_face_name``.

Loading never silently loads part of an encoder: a missing or unexpected ``bert/*`` variable,
or any shape mismatch, is a ``BertTfError`` naming the variable (the usual cause is a
``bert_config.json`` that does not belong to the checkpoint). Missing or unexpected *heads*
are normal (fine-tuning from a pretraining checkpoint) and are listed in the returned
``LoadReport``.
"""

import dataclasses
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import faults, fileio
from bert_tf.errors import BertTfError

# Checkpoint entries that are not model weights: optimizer slots and step counters.
_NON_MODEL = re.compile(r"(/adam_[mv]$|/Adam(_1)?$|/lamb_[mv]$|^global_step$|"
                        r"^_CHECKPOINTABLE_OBJECT_GRAPH$|^good_steps$|^loss_scale$)")
# Encoder variables whose absence is tolerated (Hugging Face's MLM-only models have no pooler).
_OPTIONAL_ENCODER = re.compile(r"^bert/pooler/")


@dataclasses.dataclass
class LoadReport:
  """What a load did: names (Google-style) loaded, missing from the source, unexpected."""
  source: str
  loaded: list
  missing: list
  unexpected: list

  def __str__(self):
    lines = [f"loaded {len(self.loaded)} variables from {self.source}"]
    if self.missing:
      lines.append(f"missing (left at their initial values): {', '.join(self.missing)}")
    if self.unexpected:
      lines.append(f"unexpected (not used): {', '.join(self.unexpected)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The name map.
# ---------------------------------------------------------------------------------------------


def google_variable_map(model):
  """``{google_name: variable}`` for a ``BertModel`` or any bert_tf task model.

  Optimizer variables are not included (see ``save_google_checkpoint``).
  """
  names = {}
  for variable in model.weights:
    name = variable.path
    if name.startswith("classifier/"):
      name = name[len("classifier/"):]
    if name in names:
      raise AssertionError(f"two variables map to {name}")
    names[name] = variable
  return names


def hugging_face_name(google_name, prefix="bert."):
  """Google name -> ``(hugging_face_name, transpose)``, or ``None`` if it has no HF twin.

  Dense kernels are [in,out] in Google/Keras and [out,in] in PyTorch, hence ``transpose``.
  ``output_weights`` matrices are already [out,in] in both.
  """
  name = google_name
  transpose = name.endswith("/kernel")
  if name.startswith("bert/"):
    name = prefix + name[len("bert/"):]
  elif name.startswith("cls/squad/"):
    name = "qa_outputs/" + name[len("cls/squad/output_"):]
  elif name in ("output_weights", "output_bias"):
    name = "classifier/" + name[len("output_"):]
  elif name == "cls/predictions/output_bias":
    name = "cls/predictions/bias"
  elif name.startswith("cls/seq_relationship/output_"):
    name = "cls/seq_relationship/" + name[len("cls/seq_relationship/output_"):]
  name = re.sub(r"layer_(\d+)", r"layer/\1", name)
  name = re.sub(r"/(kernel|gamma|weights)$", "/weight", name)
  name = re.sub(r"/beta$", "/bias", name)
  if re.search(r"_embeddings$", name):
    name += "/weight"
  return name.replace("/", "."), transpose


# ---------------------------------------------------------------------------------------------
# Google's TF1 checkpoints.
# ---------------------------------------------------------------------------------------------


def resolve_checkpoint_prefix(path):
  """A checkpoint prefix from a prefix, a directory (its latest checkpoint) or ``*.index``."""
  if not path:
    raise BertTfError("no checkpoint given")
  if path.endswith(".index"):
    path = path[:-len(".index")]
  # TF1's graph file beside the checkpoint (bert_model.ckpt.meta): its prefix.
  if path.endswith(".meta") and not tf.io.gfile.exists(path + ".index"):
    path = path[:-len(".meta")]
  # A data file named for the checkpoint (bert_model.ckpt.data-00000-of-00001): its prefix.
  data_file = re.fullmatch(r"(.+)\.data-\d{5}-of-\d{5}", path)
  if data_file and not tf.io.gfile.isdir(path):
    path = data_file.group(1)
  if tf.io.gfile.isdir(path):
    try:  # (tf.train.latest_checkpoint logs an ERROR line when the one named is missing)
      state = tf.train.get_checkpoint_state(path)
    except Exception:  # pylint: disable=broad-except  (a damaged "checkpoint" file: ignored)
      state = None
    if state is not None and state.model_checkpoint_path:
      named = state.model_checkpoint_path
      # A copied folder whose "checkpoint" file names the original folder's absolute path
      # (TF1's Saver writes them): the copy's own checkpoint of that name, not the original's.
      for candidate in (os.path.join(path, os.path.basename(named)), named):
        if tf.io.gfile.exists(candidate + ".index"):
          return candidate
      name = os.path.basename(named)
      raise BertTfError(f"{os.path.join(path, 'checkpoint')} names {name}, but {path!r} has no "
                        f"{name}.index (a partial copy?): copy it, or give the checkpoint to "
                        "use")
    # No "checkpoint" file (a copied folder): the one checkpoint, or the highest step of
    # one name's (ckpt-14000 over ckpt-10000, which sorts first); several names, refused.
    prefixes = sorted({c[:-len(".index")]
                       for c in tf.io.gfile.glob(os.path.join(path, "*.index"))})
    if len(prefixes) == 1:
      return prefixes[0]
    steps = [re.fullmatch(r"(.*)-(\d+)", p) for p in prefixes]
    if prefixes and all(steps) and len({m.group(1) for m in steps}) == 1:
      return max(steps, key=lambda m: int(m.group(2))).group(0)
    if prefixes:
      names = ", ".join(os.path.basename(p) for p in prefixes[:4])
      more = ", ..." if len(prefixes) > 4 else ""
      raise BertTfError(
          f"{path!r} holds {len(prefixes)} checkpoints ({names}{more}) and no 'checkpoint' "
          "file naming the latest: give the one to use (its path without .index)")
    raise BertTfError(f"no checkpoint found in directory {path!r}")
  if not tf.io.gfile.exists(path + ".index"):
    hint = ""
    original_name = re.fullmatch(r"(.*)model\.ckpt-(\d+)", path)
    if original_name and tf.io.gfile.exists(
        f"{original_name.group(1)}ckpt-{original_name.group(2)}.index"):
      # The original's Estimator wrote model.ckpt-N; bert_tf's training runs write ckpt-N.
      hint = f": bert_tf names its training checkpoints ckpt-N, use {original_name.group(1)}" \
             f"ckpt-{original_name.group(2)}"
    raise BertTfError(f"checkpoint not found: {path!r} (no {os.path.basename(path)}.index)"
                      f"{hint}")
  return path


def read_google_checkpoint(path):
  """``(prefix, {name: np.ndarray})`` of the model tensors of a TF checkpoint (one-line error
  if unreadable); its optimizer slots and step counters are left unread (a training
  checkpoint's Adam moments are twice its weights)."""
  prefix = resolve_checkpoint_prefix(path)
  try:
    reader = tf.train.load_checkpoint(prefix)
    shapes = model_variable_shapes(reader.get_variable_to_shape_map())
    return prefix, {name: reader.get_tensor(name) for name in sorted(shapes)}
  except (tf.errors.OpError, ValueError, IndexError) as e:
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise BertTfError(f"checkpoint {prefix!r} is unreadable (truncated or corrupt?): "
                      f"{message}") from None


_LAYER = re.compile(r"^(?:bert[/.])?encoder[/.]layer[_.](\d+)[/.]")


def _shapes(path):
  """``(source, {name: shape})`` of the weights at ``path`` without reading them (Google and
  bert_tf names with "/", Hugging Face's with "."); None where they cannot be listed (the load
  says why)."""
  try:
    if is_hugging_face_weights(path):
      filename = resolve_safetensors(path)
      if fileio.is_remote(filename):
        return None
      from safetensors import safe_open  # pylint: disable=import-outside-toplevel
      with safe_open(filename, framework="numpy") as f:
        return filename, {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    prefix = resolve_checkpoint_prefix(path)
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  except Exception:  # pylint: disable=broad-except
    return None
  trained = training_variable_shapes(shapes)
  return prefix, {k: tuple(v) for k, v in (trained or shapes).items()}


def check_config_fits(config, path):
  """Before a model of ``config`` is built for the weights at ``path``: its number of layers,
  and the word embeddings' and first intermediate layer's shapes, against the checkpoint's
  (names and shapes only, read from its index or header). A config of another model, or a
  typo such as ``num_hidden_layers`` 1200, was found only once the model was built: minutes,
  or all the memory, for a large number. Weights that cannot be listed are left to the load."""
  listed = _shapes(path)
  if not listed:
    return
  source, shapes = listed
  layers = {int(m.group(1)) for name in shapes for m in [_LAYER.match(name)] if m}
  if layers and len(layers) != config.num_hidden_layers:
    raise BertTfError(f"{source}: the checkpoint has {len(layers)} encoder layers but the config "
                      f"says num_hidden_layers {config.num_hidden_layers} (does the config "
                      "belong to this checkpoint?)")
  hidden, inner = config.hidden_size, config.intermediate_size
  expected = {"bert/embeddings/word_embeddings": (config.vocab_size, hidden),
              "bert/encoder/layer_0/intermediate/dense/kernel": (hidden, inner)}
  for google, shape in expected.items():
    # Its name in Google's and bert_tf's checkpoints, and in Hugging Face's with or without
    # the "bert." prefix (a dense kernel transposed there).
    names = [(google, False)] + [hugging_face_name(google, prefix) for prefix in ("bert.", "")]
    for name, transposed in names:
      if name in shapes:
        found = shapes[name][::-1] if transposed else shapes[name]
        if found != shape:
          raise shape_mismatch(source, google, found, shape)


def shape_mismatch(source, name, found, expected):
  """The one-line error of variable ``name`` of shape ``found`` in the checkpoint ``source``
  but ``expected`` in the model."""
  if (name in ("output_weights", "output_bias") and len(found) == len(expected)
      and list(found)[1:] == list(expected)[1:]):
    # A fine-tuned classifier's or tagger's head: another number of labels, not another config.
    return BertTfError(
        f"{source}: its classification head ({name}) has {found[0]} outputs, this model "
        f"{expected[0]} labels: it was fine-tuned for other labels; start from the pretrained "
        "checkpoint it came from, or give the labels it was fine-tuned with")
  return BertTfError(f"{source}: variable {name} has shape {list(found)} in the checkpoint but "
                     f"{list(expected)} in the model (does the config belong to this "
                     "checkpoint?)")


def _assign_all(model, values, source, allow_missing_encoder=False, foreign_encoder=()):
  """Assigns ``{google_name: array}`` to the model's variables with the load policy above.

  ``foreign_encoder`` lists source tensors (in the source's own naming) that belong to an
  encoder but have no variable in the model: an error once shapes have been checked.
  """
  targets = google_variable_map(model)
  loaded, missing = [], []
  for name, variable in targets.items():
    if name not in values:
      missing.append(name)
      continue
    value = values[name]
    if tuple(value.shape) != tuple(variable.shape):
      raise shape_mismatch(source, name, value.shape, variable.shape)
    loaded.append(name)
  unexpected = sorted(n for n in values if n not in targets and not _NON_MODEL.search(n))
  bad_missing = [n for n in missing if n.startswith("bert/") and not _OPTIONAL_ENCODER.match(n)]
  if bad_missing and not allow_missing_encoder:
    raise BertTfError(
        f"{source}: lacks {len(bad_missing)} encoder variable(s) the config needs, e.g. "
        f"{', '.join(bad_missing[:3])} (wrong bert_config for this checkpoint?)")
  bad_unexpected = [n for n in unexpected if n.startswith("bert/")] + list(foreign_encoder)
  if bad_unexpected:
    raise BertTfError(
        f"{source}: has {len(bad_unexpected)} encoder variable(s) the config does not, e.g. "
        f"{', '.join(bad_unexpected[:3])} (wrong bert_config for this checkpoint?)")
  for name in loaded:
    variable = targets[name]
    variable.assign(np.asarray(values[name]).astype(variable.dtype))
  report = LoadReport(source, loaded, missing, unexpected)
  # At --verbosity=1: the scripts print the report themselves (twice otherwise); callers of
  # the library get it as the return value.
  logging.vlog(1, "%s", report)
  return report


def load_google_checkpoint(model, path, allow_missing_encoder=False):
  """Loads a Google-format TF1 checkpoint (``bert_model.ckpt``) into ``model``."""
  prefix, values = read_google_checkpoint(path)
  return _assign_all(model, values, prefix, allow_missing_encoder)


def save_google_checkpoint(model, path, optimizer=None, global_step=None, extra=None):
  """Writes ``model`` as a TF1 checkpoint under Google's names, readable by Google's code.

  Args:
    model: a ``BertModel`` or task model.
    path: the checkpoint prefix, e.g. ``out/bert_model.ckpt``.
    optimizer: optional bert_tf optimizer; its slots are written as ``<name>/adam_m`` and
      ``<name>/adam_v`` when it offers ``google_slots(variable)``.
    global_step: optional int, written as ``global_step`` (int64).
    extra: optional ``{name: array}`` of further tensors.
  Returns the prefix. Written as ``write_google_checkpoint`` writes.
  """
  tensors = {name: variable.numpy() for name, variable in google_variable_map(model).items()}
  if optimizer is not None and hasattr(optimizer, "google_slots"):
    for name, variable in google_variable_map(model).items():
      for suffix, slot in optimizer.google_slots(variable).items():
        tensors[f"{name}/{suffix}"] = np.asarray(slot)
  tensors.update(extra or {})
  return write_google_checkpoint(tensors, path, global_step)


def write_google_checkpoint(tensors, path, global_step=None):
  """Writes ``{google_name: array}`` (and ``global_step``, int64, when given) as a TF1
  checkpoint at the prefix ``path``, with a ``checkpoint`` file naming it beside it.

  Returns the prefix. Files are written in a temporary folder beside them (``<path>.tmp-<pid>-
  <8 hex>/``, the pattern of ``fileio.temp_name``: the next export removes one that a killed
  export left) and renamed out when whole (index last), so a reader never sees a
  half-written checkpoint; a checkpoint already at
  ``path`` (a re-export) loses its index first, so a kill between the renames leaves no
  loadable checkpoint there (the next export writes it whole), never old index over new data.
  """
  tensors = dict(tensors)
  if global_step is not None:
    tensors["global_step"] = np.asarray(global_step, np.int64)
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  # The files are written in a temporary folder named as every temporary of ``path``
  # (``fileio.temp_name``: ``bert_model.ckpt.tmp-<pid>-<8 hex>/``), so that the next export
  # removes what a killed one left, and no glob of checkpoint files meets half-written ones.
  fileio.remove_stale_temps(path)
  tmp_dir = fileio.temp_name(path)
  tmp = os.path.join(tmp_dir, os.path.basename(path))
  try:
    names = sorted(tensors)
    tf.io.gfile.makedirs(tmp_dir)
    tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[n]) for n in names])
    data_files = tf.io.gfile.glob(tmp + ".data-*")
    if tf.io.gfile.exists(path + ".index"):
      tf.io.gfile.remove(path + ".index")
    for data_file in data_files:
      fileio.commit(data_file, path + data_file[len(tmp):])
    faults.point("google_export_data")  # tests: a kill between the data and the index
    fileio.commit(tmp + ".index", path + ".index")
  finally:
    fileio.discard_folder(tmp_dir)
  with fileio.atomic_write(os.path.join(directory or ".", "checkpoint")) as f:
    f.write(f'model_checkpoint_path: "{os.path.basename(path)}"\n'
            f'all_model_checkpoint_paths: "{os.path.basename(path)}"\n')
  return path


# ---------------------------------------------------------------------------------------------
# Hugging Face weights.
# ---------------------------------------------------------------------------------------------


def resolve_safetensors(path):
  """``model.safetensors`` from a file or a model folder (one-line error otherwise)."""
  if tf.io.gfile.isdir(path):
    candidate = os.path.join(path, "model.safetensors")
    if tf.io.gfile.exists(candidate):
      return candidate
    if tf.io.gfile.exists(os.path.join(path, "pytorch_model.bin")):
      raise BertTfError(f"{path}: only pytorch_model.bin found; bert_tf reads model.safetensors "
                        "(convert it with transformers' save_pretrained(safe_serialization=True))")
    raise BertTfError(f"no model.safetensors in {path!r}")
  if not tf.io.gfile.exists(path):
    raise BertTfError(f"weights file not found: {path!r}")
  return path


def read_hugging_face(path):
  """``{hf_name: np.ndarray}`` from a ``.safetensors`` file or a model folder."""
  from safetensors.numpy import load  # pylint: disable=import-outside-toplevel
  filename = resolve_safetensors(path)
  try:
    with tf.io.gfile.GFile(filename, "rb") as f:
      return filename, load(f.read())
  except Exception as e:  # safetensors raises its own SafetensorError for corrupt files.
    raise BertTfError(f"{filename}: not a readable safetensors file ({e})") from None


def hugging_face_to_google(hf_values, model):
  """Renames (and transposes) Hugging Face tensors to Google names for ``model``'s variables.

  Accepts names with or without the ``bert.`` prefix and old ``LayerNorm.gamma/beta``
  spellings. Returns ``(values, unexpected_hf_names)``.
  """
  values = dict(hf_values)
  for key in list(values):
    fixed = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", key)
    fixed = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", fixed)
    if fixed != key:
      values[fixed] = values.pop(key)
  has_prefix = any(k.startswith("bert.") for k in values)
  prefix = "bert." if has_prefix else ""
  google, used = {}, set()
  for name in google_variable_map(model):
    hf, transpose = hugging_face_name(name, prefix)
    if hf in values:
      google[name] = values[hf].T if transpose else values[hf]
      used.add(hf)
  # Buffers and tied copies that carry no weights of their own.
  ignorable = re.compile(r"(position_ids$|cls\.predictions\.decoder\.(weight|bias)$)")
  unexpected = sorted(k for k in values if k not in used and not ignorable.search(k))
  return google, unexpected


def load_hugging_face(model, path, allow_missing_encoder=False):
  """Loads Hugging Face BERT weights (``model.safetensors`` or a model folder)."""
  filename, hf_values = read_hugging_face(path)
  values, unexpected = hugging_face_to_google(hf_values, model)
  foreign = [k for k in unexpected if re.match(r"(bert\.)?(encoder|embeddings)\.", k)]
  report = _assign_all(model, values, filename, allow_missing_encoder, foreign)
  report.unexpected = sorted(set(report.unexpected) | set(unexpected))
  return report


# ---------------------------------------------------------------------------------------------
# Dispatch.
# ---------------------------------------------------------------------------------------------


def is_hugging_face_weights(path):
  if path.endswith(".safetensors"):
    return True
  return tf.io.gfile.isdir(path) and (
      tf.io.gfile.exists(os.path.join(path, "model.safetensors")) or
      tf.io.gfile.exists(os.path.join(path, "pytorch_model.bin")))


# bert_tf training checkpoints (tf.train.Checkpoint) keep the model's variables by Google
# name under "model/", so any task model can read any other's encoder by name.
_TRAINING_KEY = re.compile(r"^model/(.+)/\.ATTRIBUTES/VARIABLE_VALUE$")


def trackable_variables(model):
  """A trackable holding ``model``'s variables under their Google names (for training
  checkpoints: ``tf.train.Checkpoint(model=trackable_variables(model), optimizer=...)``)."""
  return tf.train.Checkpoint(**google_variable_map(model))


def _unescape(key):
  # tf.train.Checkpoint escapes "/" as ".S" and "." as ".." in object names.
  return re.sub(r"\.(.)", lambda m: "/" if m.group(1) == "S" else m.group(1), key)


def training_variable_shapes(shape_map):
  """``{google_name: shape}`` of the model variables in a bert_tf training checkpoint's
  ``get_variable_to_shape_map()`` (empty for other checkpoints)."""
  return {_unescape(m.group(1)): shape for key, shape in shape_map.items()
          for m in [_TRAINING_KEY.match(key)] if m}


def model_variable_shapes(shape_map):
  """``{google_name: shape}`` of the model variables in a Google-format checkpoint's
  ``get_variable_to_shape_map()``: without its optimizer slots and step counters."""
  return {name: shape for name, shape in shape_map.items() if not _NON_MODEL.search(name)}


def is_bert_tf_checkpoint(prefix):
  """Whether a TF checkpoint is a bert_tf training checkpoint (object-based, TF2)."""
  try:
    names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError, IndexError):
    return False
  return "_CHECKPOINTABLE_OBJECT_GRAPH" in names and any(_TRAINING_KEY.match(n) for n in names)


def read_bert_tf_checkpoint(prefix):
  """``{google_name: np.ndarray}`` of the model variables in a bert_tf training checkpoint."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    return {_unescape(m.group(1)): reader.get_tensor(key)
            for key in reader.get_variable_to_shape_map()
            for m in [_TRAINING_KEY.match(key)] if m}
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise BertTfError(f"checkpoint {prefix!r} is unreadable (truncated or corrupt?): "
                      f"{str(e).strip().splitlines()[0] if str(e).strip() else e}") from None


# A bert_tf training checkpoint's step: its optimizer's (float16 runs of before: the inner
# optimizer's); ckpt-N is saved at step N.
_TRAINING_STEP = re.compile(r"^optimizer/(inner_optimizer/)?_?iterations/\.ATTRIBUTES/"
                            r"VARIABLE_VALUE$")


def checkpoint_step(prefix):
  """The training step of the TF checkpoint ``prefix``: Google's ``global_step``, or a bert_tf
  training checkpoint's (the N of its ``ckpt-N``); None when it has none (a checkpoint saved
  without one, Hugging Face weights)."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for name in sorted(reader.get_variable_to_shape_map()):
      if name == "global_step" or _TRAINING_STEP.match(name):
        return int(reader.get_tensor(name))
  except (tf.errors.OpError, ValueError, IndexError, TypeError):
    return None
  return None


def read_model_tensors(prefix):
  """``{google_name: np.ndarray}`` of the model weights in a TF checkpoint, Google's or a bert_tf
  training checkpoint (no optimizer slots nor step counters)."""
  if is_bert_tf_checkpoint(prefix):
    return read_bert_tf_checkpoint(prefix)
  return read_google_checkpoint(prefix)[1]


def load_bert_tf_checkpoint(model, prefix, allow_missing_encoder=False):
  """Loads a bert_tf training checkpoint (e.g. a pretraining run's ``output_dir``) into any
  task model, with the same policy as Google checkpoints: the encoder completely, heads as
  available (reported)."""
  return _assign_all(model, read_bert_tf_checkpoint(prefix), prefix, allow_missing_encoder)


def load_weights(model, path, allow_missing_encoder=False):
  """Loads a Google TF1 checkpoint, a bert_tf training checkpoint or Hugging Face weights."""
  if not path:
    raise BertTfError("no checkpoint given")
  if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + ".index")):
    raise BertTfError(f"checkpoint not found: {path!r}")
  if is_hugging_face_weights(path):
    return load_hugging_face(model, path, allow_missing_encoder)
  prefix = resolve_checkpoint_prefix(path)
  if is_bert_tf_checkpoint(prefix):
    return load_bert_tf_checkpoint(model, prefix, allow_missing_encoder)
  return load_google_checkpoint(model, prefix, allow_missing_encoder)


def load_config(path):
  """A ``BertConfig`` from a config file, or from a model folder's ``bert_config.json`` /
  ``config.json``."""
  from bert_tf.modeling.config import BertConfig  # pylint: disable=import-outside-toplevel
  if path and tf.io.gfile.isdir(path):
    for name in ("bert_config.json", "config.json"):
      if tf.io.gfile.exists(os.path.join(path, name)):
        return BertConfig.from_json_file(os.path.join(path, name))
    raise BertTfError(f"no bert_config.json or config.json in {path!r}")
  return BertConfig.from_json_file(path)
