"""Resuming a training run: the newest *readable* ``ckpt-N`` of a folder, never a silent
restart from step 0 (``restore_newest_readable``), and the leftovers of an interrupted save.
Used by ``bert_tf.training.loop`` (which re-exports these names).
"""

import os
import re

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
  saved = checkpoints.training_variable_shapes(shapes)
  ours = {name: list(v.shape) for name, v in checkpoints.google_variable_map(model).items()}
  where = (f"--output_dir {model_dir!r}: checkpoint {os.path.basename(prefix)} was written for "
           "another model")
  advice = "(another --bert_config_file?); use a new --output_dir"
  for name in sorted(ours):
    if name not in saved:
      raise BertTfError(f"{where}: it has no variable {name} {advice}")
    if list(saved[name]) != ours[name]:
      raise BertTfError(f"{where}: {name} has shape {list(saved[name])} there, {ours[name]} in "
                        f"this model {advice}")
  for name in sorted(saved):
    if name not in ours:
      raise BertTfError(f"{where}: it has variable {name}, this model has not {advice}")


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
