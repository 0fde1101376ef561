"""Resuming a training run: the newest *readable* ``ckpt-N`` of a folder, never a silent
restart from step 0 (``restore_newest_readable``), and the leftovers of an interrupted save.
Used by ``bert_tf.training.loop`` (which re-exports these names).
"""

import os
import re

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.errors import BertTfError
from bert_tf.modeling import checkpoints


def latest_checkpoint(model_dir):
  """The newest training checkpoint in ``model_dir`` (named by the ``checkpoint`` state file
  or found by its ``ckpt-N.index``), or None.

  Not just the state file's: a garbage one must not make an eval-only run silently evaluate
  initial weights. A damaged newest checkpoint is returned too: loading it is then a one-line
  error, not a silent evaluation of older weights.
  """
  if not tf.io.gfile.isdir(model_dir):
    return None
  candidates = _checkpoint_candidates(model_dir)[0]
  return candidates[0] if candidates else None


# === Resuming: the newest readable checkpoint, never a silent restart ===
#
# tf.train.CheckpointManager resumes from what the `checkpoint` state file names; when that
# file is garbage it resumes from nothing and the new run's saves overwrite the old ckpt-N
# files, and a damaged ckpt-N is a traceback. So the candidates are read from the folder itself.

_CHECKPOINT_INDEX = re.compile(r"^ckpt-(\d+)\.index$")
_SAVE_TEMP_DIR = re.compile(r"^ckpt-\d+_temp$")  # TF's shards before the merge into ckpt-N


def _checkpoint_number(prefix):
  return int(prefix.rsplit("-", 1)[1])


def _checkpoint_candidates(model_dir):
  """(prefixes newest first, state_ok): ``ckpt-N`` named by the state file or with an index.

  ``state_ok`` is False when a ``checkpoint`` state file exists but cannot be parsed.
  """
  prefixes = {}
  state_file = os.path.join(model_dir, "checkpoint")
  state = None
  if tf.io.gfile.exists(state_file):
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # its multi-line ParseError warning; ours is one line
    try:
      state = tf.train.get_checkpoint_state(model_dir)
    finally:
      logger.setLevel(level)
  state_ok = state is not None or not tf.io.gfile.exists(state_file)
  if state is not None:
    for path in list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path]:
      name = os.path.basename(path)
      if re.fullmatch(r"ckpt-\d+", name):
        prefixes[name] = os.path.join(model_dir, name)
  for name in tf.io.gfile.listdir(model_dir):
    match = _CHECKPOINT_INDEX.match(name)
    if match:
      prefixes[name[:-len(".index")]] = os.path.join(model_dir, name[:-len(".index")])
  return sorted(prefixes.values(), key=_checkpoint_number, reverse=True), state_ok


def _first_line(error):
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def check_checkpoint_fits(model, prefix, model_dir):
  """Raises a one-line ``BertTfError`` when checkpoint ``prefix`` was written for another
  model (another bert_config): the first variable missing, extra or of another shape.

  Reads the checkpoint's index only. Raises ``tf.errors.OpError`` (or ValueError/IndexError)
  when the index itself is unreadable (a damaged checkpoint, not a mismatch).
  """
  shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
  misfit = _first_misfit(model, checkpoints.training_variable_shapes(shapes))
  if misfit:
    raise BertTfError(f"--output_dir {model_dir!r}: checkpoint {os.path.basename(prefix)} was "
                      f"written for another model: {misfit} (another --bert_config_file?); use "
                      "a new --output_dir")


def _first_misfit(model, saved, extra_allowed=lambda name: False):
  """How the model variables ``saved`` (``{google_name: shape}``) first fail to fit
  ``model``'s: a variable missing, of another shape, or one the model has not (but those
  ``extra_allowed`` lets by); None when they fit."""
  ours = {name: list(v.shape) for name, v in checkpoints.google_variable_map(model).items()}
  for name in sorted(ours):
    if name not in saved:
      return f"it has no variable {name}"
    if list(saved[name]) != ours[name]:
      return f"{name} has shape {list(saved[name])} there, {ours[name]} in this model"
  for name in sorted(saved):
    if name not in ours and not extra_allowed(name):
      return f"it has variable {name}, this model has not"
  return None


def restore_newest_readable(checkpoint, model, model_dir, progress, rewrite_state=True):
  """Restores ``checkpoint`` from the newest readable ``ckpt-N`` in ``model_dir``.

  ``checkpoint``: a ``tf.train.Checkpoint``, or a function of a checkpoint prefix giving the
  one to restore it with (``loop.training_checkpoint``: the objects the files hold). Values
  the files hold that it does not are left unread, in silence.

  A damaged checkpoint (missing or truncated ``.index``/``.data-*``, a bad checksum) or a
  garbage ``checkpoint`` state file gives a one-line warning through ``progress`` and the next
  older checkpoint is tried; the state file is then rewritten to name the one restored, so the
  run's own saves continue from it (unless ``rewrite_state`` is False: a multi-worker run's
  non-chief workers only read the chief's folder). A checkpoint of another model is a ``BertTfError`` (older
  ones would not fit either). Checkpoints exist but none is readable: a ``BertTfError``
  (starting over would overwrite them).

  Returns:
    the prefix restored, or None when ``model_dir`` has no checkpoint.
  """
  if not tf.io.gfile.isdir(model_dir):
    return None
  candidates, state_ok = _checkpoint_candidates(model_dir)
  problems = [] if state_ok else [f"{os.path.join(model_dir, 'checkpoint')} is unreadable"]
  damaged = []
  for prefix in candidates:
    try:
      check_checkpoint_fits(model, prefix, model_dir)
      restorer = checkpoint(prefix) if callable(checkpoint) else checkpoint
      restorer.restore(prefix).expect_partial().assert_existing_objects_matched()
    except (tf.errors.OpError, ValueError, IndexError) as e:
      damaged.append(f"{os.path.basename(prefix)} ({_first_line(e)})")
      problems.append(f"checkpoint {prefix} is damaged ({_first_line(e)})")
      continue
    except AssertionError as e:  # the variables fit but not the optimizer's/other objects
      raise BertTfError(f"--output_dir {model_dir!r}: checkpoint {os.path.basename(prefix)} "
                        f"does not fit this run ({_first_line(e)}); use a new --output_dir"
                        ) from None
    if damaged or not state_ok or tf.train.latest_checkpoint(model_dir) != prefix:
      if problems:
        progress(f"warning: {'; '.join(problems)}: resuming from {prefix}, the newest "
                 "readable checkpoint")
      if rewrite_state:
        _write_checkpoint_state(model_dir, prefix, candidates)
    return prefix
  if damaged:
    raise BertTfError(f"--output_dir {model_dir!r}: no readable checkpoint, all are damaged: "
                      f"{'; '.join(damaged)}; move them away to start over")
  return None


# === The original code's run: google-research/bert's Estimator writes ``model.ckpt-N`` ===


def has_checkpoint(model_dir):
  """Whether ``model_dir`` holds a training checkpoint: bert_tf's ``ckpt-N`` or the
  original code's ``model.ckpt-N``."""
  return latest_checkpoint(model_dir) is not None or bool(original_checkpoints(model_dir))


_ORIGINAL_INDEX = re.compile(r"^model\.ckpt-(\d+)\.index$")


def original_checkpoints(model_dir, newer_than=None):
  """The ``model.ckpt-N`` prefixes google-research/bert's Estimator left in ``model_dir``
  (those with an ``.index``), newest first; [] for none or no folder. ``newer_than``: only
  those of a later step than that checkpoint prefix's (a bert_tf ``ckpt-N``)."""
  if not tf.io.gfile.isdir(model_dir):
    return []
  prefixes = [os.path.join(model_dir, name[:-len(".index")])
              for name in tf.io.gfile.listdir(model_dir) if _ORIGINAL_INDEX.match(name)]
  if newer_than is not None:
    prefixes = [p for p in prefixes if _checkpoint_number(p) > _checkpoint_number(newer_than)]
  return sorted(prefixes, key=_checkpoint_number, reverse=True)


def continue_original_run(model, optimizer, model_dir, progress):
  """Continues in ``model_dir`` the run of Google's original code that wrote its newest
  ``model.ckpt-N`` there (a run stopped, then the same command given to bert_tf), as the
  original resumes: its weights, Adam's moments (``<variable>/adam_m``, ``/adam_v``: the
  ``m`` and ``v`` slots of bert_tf's optimizers) and ``global_step``, which the learning-rate
  schedule follows. Called when ``model_dir`` has no ``ckpt-N`` of bert_tf's own: bert_tf's
  checkpoints come after the original's, and its later resumes take them.

  ``optimizer``: built, the bert_tf optimizer (the one a float16 loss scale wraps). Returns
  the prefix continued, or None when there is none. Raises a one-line ``BertTfError`` when
  the newest cannot be continued (unreadable, another model, no Adam moments): starting over
  in that folder would hide the original's run behind new checkpoints.
  """
  found = original_checkpoints(model_dir)
  if not found:
    return None
  prefix = found[0]
  name = os.path.basename(prefix)
  advice = (f"give it as --init_checkpoint={prefix} to a run with a new --output_dir "
            "(its weights only), or move it away")
  if not hasattr(optimizer, "slot"):
    raise BertTfError(f"--output_dir {model_dir!r} holds {name}, written by Google's original "
                      f"code: only bert_tf's own optimizers take its Adam moments; {advice}")
  try:
    reader = tf.train.load_checkpoint(prefix)
    saved = reader.get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise BertTfError(f"--output_dir {model_dir!r}: the original code's checkpoint {name} is "
                      f"unreadable ({_first_line(e)}); {advice}") from None
  where = f"--output_dir {model_dir!r} holds {name}, written by Google's original code"
  if "global_step" not in saved:
    raise BertTfError(f"{where}, without a global_step to continue from; {advice}")
  # Heads beyond the encoder that this model has not are left out (below); all it has fit.
  model_shapes = checkpoints.model_variable_shapes(saved)
  misfit = _first_misfit(model, model_shapes,
                         extra_allowed=lambda var_name: not var_name.startswith("bert/"))
  if misfit:
    raise BertTfError(f"{where}, for another model: {misfit} (another --bert_config_file or "
                      f"task?); {advice}")
  variables = checkpoints.google_variable_map(model)
  trainable = {id(v) for v in model.trainable_variables}
  with_slots = set()
  for var_name, variable in sorted(variables.items()):
    if id(variable) in trainable:
      has = [f"{var_name}/{slot}" in saved for slot in ("adam_m", "adam_v")]
      if all(has):
        with_slots.add(var_name)
      elif any(has) or not var_name.startswith("bert/pooler/"):
        slot = "adam_v" if has[0] else "adam_m"
        raise BertTfError(f"{where}, without Adam's moments ({var_name}/{slot}) to go on "
                          f"with; {advice}")
      # (else the pooler of run_squad's model, which the original never updated: its
      # optimizer skips a variable without gradient and makes no slots for it; they stay 0.)
  heads = sorted({n.rsplit("/", 1)[0] for n in model_shapes if n not in variables})
  if heads:  # e.g. its next-sentence head, continued with --use_next_sentence=False
    progress(f"note: {name}'s {', '.join(heads)} {'is' if len(heads) == 1 else 'are'} not in "
             "this model: left out")
  try:
    for var_name, variable in variables.items():
      variable.assign(np.asarray(reader.get_tensor(var_name)).astype(variable.dtype))
      if var_name in with_slots:
        for slot, key in (("m", "adam_m"), ("v", "adam_v")):
          target = optimizer.slot(variable, slot)
          target.assign(np.asarray(reader.get_tensor(f"{var_name}/{key}")).astype(
              target.dtype))
    step = int(reader.get_tensor("global_step"))
  except (tf.errors.OpError, ValueError, IndexError) as e:
    raise BertTfError(f"--output_dir {model_dir!r}: the original code's checkpoint {name} is "
                      f"unreadable ({_first_line(e)}); {advice}") from None
  optimizer.iterations.assign(step)
  progress(f"continuing the run of Google's original code in {model_dir} from {name}: its "
           f"weights, Adam's moments and global_step {step}; its input starts over, as the "
           "original's did (its files stay; bert_tf's checkpoints are ckpt-N beside them)")
  return prefix


def keep_original_checkpoints(model_dir):
  """Makes sure TF's checkpoint manager, which reads ``model_dir``'s ``checkpoint`` state
  file, never deletes the original's ``model.ckpt-N`` it names: a manager deletes the listed
  checkpoints that carry times (``all_model_checkpoint_timestamps``) in turn with its own
  (keep_checkpoint_max). TF1's Saver writes none; a state file with them is rewritten (whole,
  atomically) with the same checkpoints and no times, so the original's code still finds
  its latest there."""
  from tensorflow.python.checkpoint import checkpoint_management  # pylint: disable=import-outside-toplevel,no-name-in-module
  try:
    state = tf.train.get_checkpoint_state(model_dir)
  except Exception:  # pylint: disable=broad-except  (unreadable: the manager ignores it too)
    return
  if state is None or not state.all_model_checkpoint_timestamps:
    return
  # (get_checkpoint_state made the paths absolute: written back relative, as the Estimator's
  # Saver writes them, so that a folder moved elsewhere still names its checkpoints.)
  checkpoint_management.update_checkpoint_state_internal(
      model_dir, os.path.basename(state.model_checkpoint_path),
      all_model_checkpoint_paths=[os.path.basename(p)
                                  for p in state.all_model_checkpoint_paths],
      save_relative_paths=True)


def _write_checkpoint_state(model_dir, prefix, candidates):
  """Rewrites the ``checkpoint`` state file (atomically): ``prefix`` is the latest; the older
  checkpoints with an index stay listed (with their times) so ``keep_checkpoint_max`` still
  deletes them in turn."""
  from tensorflow.python.checkpoint import checkpoint_management  # pylint: disable=import-outside-toplevel,no-name-in-module
  kept = [p for p in reversed(candidates)
          if _checkpoint_number(p) < _checkpoint_number(prefix)
          and tf.io.gfile.exists(p + ".index")] + [prefix]
  checkpoint_management.update_checkpoint_state_internal(
      model_dir, os.path.basename(prefix),
      all_model_checkpoint_paths=[os.path.basename(p) for p in kept],
      all_model_checkpoint_timestamps=[tf.io.gfile.stat(p + ".index").mtime_nsec / 1e9
                                       for p in kept],
      save_relative_paths=True)


def clean_save_leftovers(model_dir, progress):
  """Removes the ``ckpt-N_temp/`` folders a run killed mid-save leaves (TF writes a
  checkpoint's shards there, then merges them into ``ckpt-N.*``), and in a local folder the
  ``fileio.temp_name`` files (``<name>.tmp-<pid>-<8 hex>``) of a process no longer running
  (an output stopped mid-write by Ctrl-C or a kill): only those names."""
  if not tf.io.gfile.isdir(model_dir):
    return
  for name in tf.io.gfile.listdir(model_dir):
    name = name.rstrip("/")
    path = os.path.join(model_dir, name)
    if _SAVE_TEMP_DIR.match(name) and tf.io.gfile.isdir(path):
      progress(f"removing {path}, left by a save that was interrupted")
      tf.io.gfile.rmtree(path)
    if fileio.stale_temp(path):
      progress(f"removing {path}, left by a write that was interrupted")
      os.remove(path)
