"""Evaluation during training: the dev set at every checkpoint, the best checkpoint kept, and
early stopping. What users of the original asked for (google-research/bert issues 115, 636,
1206) and its Estimator scripts never gave: their --do_eval ran once, after training.
run_classifier (the dev set(s)), run_squad (the official scores of --predict_file) and
run_pretraining (the eval input's masked-LM and next-sentence metrics) use it.

A ``Trainer.train`` checkpoint hook. At each checkpoint the training loop saves
(``--save_checkpoints_steps``, and the last one), on every worker:

  1. ``evaluate()`` (the task's eval over its dev set(s): {key: value}, the keys of
     eval_results.txt) runs on the weights just saved;
  2. the results go into ``<output_dir>/eval_history.jsonl`` (one JSON object per evaluation:
     ``global_step`` and every key; the file is rewritten whole through a temporary name) and
     TensorBoard (``<output_dir>/summaries/eval``);
  3. when the value of ``metric`` is better than the best so far (strictly; lower for a loss,
     higher for anything else; nan never), the weights become ``<output_dir>/best/``: a
     checkpoint of the model alone (``ckpt-<step>``, written whole, then named in
     ``best/checkpoint``, then the previous one removed) with ``best.json`` (step, metric,
     value) and the files ``write_files(folder)`` adds (config, vocab, labels: the folder
     loads alone, ``bert_tf.load``);
  4. with ``patience``: training stops once ``patience`` evaluations in a row were not better
     than the best.

A killed run restarted with the same command goes on where it was: the history and the best
are read back at the start (``begin``), and a checkpoint saved but not yet evaluated (the run
was killed between the two) is evaluated first. Entries after the step training resumes
from (a newer checkpoint did not load) are dropped: training makes those steps again; a
``best/`` made from such a lost checkpoint stays the best until a better one. A fresh run
(no checkpoint to resume) starts a new history; its first evaluation replaces a previous
``best/``. Evaluation changes nothing in training: no dropout is drawn, the training input is
untouched, so the trained weights are those of a run without it.

The evaluations know what they scored: ``eval_data``, a fingerprint of the dev data and of
what cuts it (``data_fingerprint``), goes into every history entry and ``best.json``. A
resumed run whose dev data differs (README lets the input paths change on resume) compares
nothing with the other data's scores: those entries stay in the file, marked, but count for
neither the best, nor early stopping, nor ``--do_eval``'s "already evaluated"; a ``best/``
chosen on the other data is replaced by the next evaluation (each said in a line).
"""

import hashlib
import json
import math
import os
import shutil

import tensorflow as tf

from bert_tf import faults, fileio
from bert_tf.errors import BertTfError
from bert_tf.modeling import checkpoints
from bert_tf.progress import log_line
from bert_tf.training import distribution, loop, preflight
from bert_tf.training.resume import clean_save_leftovers

HISTORY_FILE = "eval_history.jsonl"
BEST_DIR = "best"
BEST_FILE = "best.json"


def lower_is_better(metric):
  """Losses go down; accuracy, F1, correlations go up."""
  return "loss" in metric


def is_better(value, best, metric):
  """Whether ``value`` improves strictly on ``best`` (None or nan: no best yet, any number
  does); nan never does (a correlation of constant predictions)."""
  if value is None or math.isnan(value):
    return False
  if best is None or math.isnan(best):
    return True
  return value < best if lower_is_better(metric) else value > best


def read_history(output_dir, progress=None):
  """The entries of ``<output_dir>/eval_history.jsonl`` in step order ([] if none). A line that
  does not parse (a file edited by hand) is left out with a warning naming it."""
  path = os.path.join(output_dir, HISTORY_FILE)
  if not fileio.exists(path):
    return []
  entries = []
  with fileio.open_file(path) as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        entry = json.loads(line)
        entry["global_step"] = int(entry["global_step"])
      except (ValueError, TypeError, KeyError):
        if progress:
          progress(f"warning: {path} line {number} is not an evaluation (left out)")
        continue
      entries.append(entry)
  return sorted(entries, key=lambda e: e["global_step"])


def data_fingerprint(*parts):
  """A short hash of what an evaluation scores: the dev examples (and labels) and the settings
  that cut them into features (JSON-able ``parts``). Two evaluations compare only when theirs
  agree."""
  h = hashlib.sha256()
  for part in parts:
    h.update(json.dumps(part, sort_keys=True, default=str).encode("utf-8", "surrogatepass"))
    h.update(b"\n")
  return h.hexdigest()[:16]


def file_fingerprint(path, head_bytes=1 << 20, named=True):
  """(base name, size, hash of the first ``head_bytes``: None all, 0 none) of a data file:
  cheap for large TFRecords, and files made anew (another seed, another corpus) differ in their
  first records even when their size agrees. ``named=False``: without the name (a file hashed
  whole is the same data under any name)."""
  h = hashlib.sha256()
  if head_bytes != 0:
    with fileio.open_file(path, "rb") as f:
      h.update(f.read() if head_bytes is None else f.read(head_bytes))
  name = [os.path.basename(path)] if named else []
  return name + [fileio.file_size(path), h.hexdigest()[:16]]


def best_step(best_dir):
  """The step of the checkpoint ``best/checkpoint`` names, or None."""
  latest = tf.train.latest_checkpoint(best_dir) if tf.io.gfile.isdir(best_dir) else None
  return int(latest.rsplit("-", 1)[1]) if latest else None


class EvalDuringTraining:
  """The checkpoint hook (see the module docstring).

  Args:
    strategy: the strategy ``model`` was built under.
    model: the model being trained (its weights are evaluated and saved as they are).
    evaluate: ``() -> {key: float}``, the eval results of the model's current weights.
    output_dir: the training run's folder (``eval_history.jsonl``, ``best/``).
    metric: the key of ``evaluate``'s results that chooses the best checkpoint.
    patience: stop after this many evaluations without a better one (0: never stop early).
    write_files: ``folder -> None``, writes what makes ``best/`` load alone (chief only).
    progress: a function taking a line of text.
    eval_data: the fingerprint of what ``evaluate`` scores (``data_fingerprint``); None:
      unknown (every entry compares).
  """

  def __init__(self, strategy, model, evaluate, output_dir, metric, *, patience=0,
               write_files=None, progress=None, eval_data=None):
    self.strategy = strategy
    self.model = model
    self.evaluate = evaluate
    self.output_dir = output_dir
    self.metric = metric
    self.patience = patience
    self.write_files = write_files
    self.progress = progress or log_line
    self.eval_data = eval_data
    self.chief = distribution.is_chief(strategy)
    self.summary_writer = loop.summary_writer(output_dir, "eval") if self.chief else None
    self.best_dir = os.path.join(output_dir, BEST_DIR)
    self.history = []
    self.best = None  # (step, value) of best/'s checkpoint
    self._manager = None
    self._write_dir = None

  # === The hook ===

  def begin(self, step, resumed):
    """Reads the history and the best back (resumed) or starts anew; evaluates ``step`` when
    it is a resumed checkpoint with no evaluation yet. Returns whether to stop."""
    if not resumed:
      self.history, self.best = [], None
      return False
    self._check_best_metric()
    # Entries after the step resumed from scored checkpoints that were lost (the newest
    # did not load): training makes those steps again.
    self.history = [e for e in read_history(self.output_dir, self.progress)
                    if e["global_step"] <= step]
    other = [str(e["global_step"]) for e in self.history if not self._same_data(e)]
    if other:
      shown = ", ".join(other) if len(other) <= 4 else (
          f"{', '.join(other[:2])}, ..., {other[-1]} ({len(other)} of them)")
      self.progress(f"note: {HISTORY_FILE}'s evaluations of step(s) {shown} scored other dev "
                    "data than this run's: kept in the file, compared with nothing of this "
                    "run's")
    saved = best_step(self.best_dir)
    if saved is not None:
      entry = self._entry(saved)  # this run's dev data's score of that step
      value = entry.get(self.metric) if entry else None
      kept = self._kept_info()
      # best.json speaks for best/ only when it names its step (a kill between the
      # checkpoint and best.json leaves the previous best's, maybe of other data).
      chosen_elsewhere = ((kept.get("global_step") == saved and not self._same_data(kept)) or
                          (value is None and any(e["global_step"] == saved
                                                 for e in self.history)))
      if chosen_elsewhere:
        self.progress(f"note: {self.best_dir} holds step {saved}, chosen on other dev data "
                      "than this run's: the next evaluation replaces it")
        value = None
      elif value is None:
        self.progress(f"note: {self.best_dir} holds step {saved}, which {HISTORY_FILE} does not"
                      " score: the next evaluation replaces it")
      elif self.chief and kept.get("global_step") != saved:
        self._write_best_info(saved, value)  # Killed between the checkpoint and best.json.
      self.best = (saved, value)
    if self._entry(step) is None:
      return self.saved(step)
    self.progress(f"evaluation of step {step} already done ({HISTORY_FILE})")
    return self._stop()

  def saved(self, step):
    """Evaluates the weights of checkpoint ``step``; keeps them when best. Returns whether to
    stop."""
    faults.point("eval_start", step)
    results = {k: float(v) for k, v in self.evaluate().items() if k != "global_step"}
    if self.metric not in results:
      raise BertTfError(f"--best_metric {self.metric}: not among the eval results "
                        f"({', '.join(sorted(results))})")
    self.history = [e for e in self.history
                    if e["global_step"] < step or not self._same_data(e)]
    entry = dict(results, global_step=step)
    if self.eval_data is not None:
      entry["eval_data"] = self.eval_data
    self.history.append(entry)
    if self.chief:
      self._write_history()
      if self.summary_writer is not None:
        with self.summary_writer.as_default(step=step):
          for key, value in sorted(results.items()):
            tf.summary.scalar(key, value)
        self.summary_writer.flush()
    value = results[self.metric]
    if not self._scored() or is_better(value, self.best[1], self.metric):
      self._save_best(step, value)
      note = "best so far"
    else:
      note = f"best {self.best[1]:.6g} at step {self.best[0]}"
    self.progress(f"eval at step {step}: {self.metric} {value:.6g} ({note}); "
                  + " ".join(f"{k} {v:.6g}" for k, v in sorted(results.items())
                             if k != self.metric))
    return self._stop()

  def evaluated(self, step):
    """This run's evaluation of ``step`` (its eval results and ``global_step``), or None. From
    memory, never the file: a multi-worker run's other workers must not race the chief's
    write (a worker that read too early would evaluate alone, in collectives nobody joins)."""
    entry = self._entry(step)
    if not entry:
      return None
    return {k: v for k, v in entry.items() if k != "eval_data"}

  def close(self):
    """Removes a non-chief worker's temporary copy of the best checkpoint (``Trainer.train``
    calls it when training ends)."""
    if self._write_dir and self._write_dir != self.best_dir:
      shutil.rmtree(self._write_dir, ignore_errors=True)

  # === Parts ===

  def _scored(self):
    """Whether best/ holds a checkpoint with a number (not nan) to beat."""
    return bool(self.best and self.best[1] is not None and not math.isnan(self.best[1]))

  def _same_data(self, entry):
    """Whether a history entry (or best.json) scored this run's dev data (one without a
    fingerprint, written before they were kept, is taken to)."""
    theirs = entry.get("eval_data")
    return theirs is None or self.eval_data is None or theirs == self.eval_data

  def _entry(self, step):
    """This run's dev data's evaluation of ``step``, or None."""
    return next((e for e in self.history
                 if e["global_step"] == step and self._same_data(e)), None)

  def _stop(self):
    """Whether ``patience`` evaluations since the best (or since the start, with none) were
    no better."""
    if not self.patience:
      return False
    since = self.best[0] if self._scored() else -1
    waited = sum(1 for e in self.history if e["global_step"] > since and self._same_data(e))
    if waited < self.patience:
      return False
    best = (f"the best, {self.best[1]:.6g}, is step {self.best[0]}'s"
            if since >= 0 else "none scored")
    self.progress(f"early stopping: {waited} evaluations without a better {self.metric} "
                  f"(--early_stopping_patience={self.patience}); {best}")
    return True

  def _kept_info(self):
    """``best/best.json`` as a dict ({} when missing or unreadable: it is rewritten)."""
    path = os.path.join(self.best_dir, BEST_FILE)
    if not fileio.exists(path):
      return {}
    try:
      with fileio.open_file(path) as f:
        info = json.load(f)
    except ValueError:
      return {}
    return info if isinstance(info, dict) else {}

  def _check_best_metric(self):
    """A ``best/`` kept by another metric is a one-line error (its value would not compare)."""
    kept = self._kept_info().get("metric")
    if kept and kept != self.metric:
      raise BertTfError(
          f"{self.best_dir} holds the best checkpoint by {kept}, this run asks for "
          f"--best_metric={self.metric}: pass --best_metric={kept}, or move that folder away")

  def _write_history(self):
    with fileio.atomic_write(os.path.join(self.output_dir, HISTORY_FILE)) as f:
      for entry in self.history:
        f.write(json.dumps(entry, sort_keys=True) + "\n")

  def _save_best(self, step, value):
    """The model's weights as ``best/ckpt-<step>`` (every worker takes part in a save; only
    the chief's lands in ``best/``), then ``best.json`` and the folder's files."""
    if self._manager is None:
      self._write_dir = distribution.worker_write_dir(self.strategy, self.best_dir)
      if self.chief:
        clean_save_leftovers(self.best_dir, self.progress)
      checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_variables(self.model))
      self._manager = tf.train.CheckpointManager(checkpoint, self._write_dir, max_to_keep=1)
    self._manager.save(checkpoint_number=step)
    self.best = (step, value)
    if not self.chief:
      return
    faults.point("best_saved", step)
    self._write_best_info(step, value)

  def _write_best_info(self, step, value):
    """``best.json`` and the files that make ``best/`` load alone."""
    with fileio.atomic_write(os.path.join(self.best_dir, BEST_FILE)) as f:
      info = {"global_step": step, "metric": self.metric, "value": value,
              "checkpoint": f"ckpt-{step}"}
      if self.eval_data is not None:
        info["eval_data"] = self.eval_data
      f.write(json.dumps(info, indent=1) + "\n")
    if self.write_files:
      self.write_files(self.best_dir)


# === For the training scripts ===

def check_flags(do_train, eval_during_training, best_metric, early_stopping_patience,
                use_best_checkpoint, best_dir):
  """The flags of evaluation during training that do not fit together: one-line errors."""
  if eval_during_training and not do_train:
    raise BertTfError("--eval_during_training evaluates while training: set --do_train=True "
                      "(or --use_best_checkpoint to evaluate the best checkpoint kept)")
  for flag, value in (("--best_metric", best_metric),
                      ("--early_stopping_patience", early_stopping_patience)):
    if value and not eval_during_training:
      raise BertTfError(f"{flag} needs --eval_during_training")
  if early_stopping_patience < 0:
    raise BertTfError(f"--early_stopping_patience {early_stopping_patience} must be 0 (off) "
                      "or more")
  if use_best_checkpoint and do_train and not eval_during_training:
    raise BertTfError("--use_best_checkpoint with --do_train needs --eval_during_training "
                      f"(it chooses the best checkpoint, {best_dir})")


def resolve_best_metric(best_metric, default, keys, what):
  """``best_metric``, or ``default`` when not given; one that is not among ``keys`` (the
  evaluation's) is a one-line error saying what ``what`` has."""
  best_metric = best_metric or default
  if best_metric not in keys:
    raise BertTfError(f"--best_metric {best_metric}: {what} has {', '.join(keys)}")
  return best_metric


def note_kept_best(best_dir, progress):
  """A training run without --eval_during_training over a folder with a ``best/``: a line
  saying that it stays an earlier run's choice, older than what this run trains (it changed
  without a word, and --use_best_checkpoint later used it)."""
  step = best_step(best_dir)
  if step is not None and progress:
    progress(f"note: {best_dir} holds step {step}, chosen by an earlier run's "
             "--eval_during_training; this run does not evaluate, so it stays as it is "
             "(--use_best_checkpoint uses it)")


def require_best(best_dir):
  """A one-line error when ``best_dir`` holds no best checkpoint (--use_best_checkpoint
  without training)."""
  if best_step(best_dir) is None:
    raise BertTfError(f"--use_best_checkpoint: no best checkpoint in {best_dir} (made by "
                      "training with --eval_during_training)")


def _restore_whole(model, checkpoint, what, original=False):
  """``checkpoint``'s weights into ``model``, every one of them: a folder another script
  fine-tuned (a sentence classifier's under run_squad or run_ner, a pretraining run's under
  run_classifier) lacks this task's head, which would stay random (it was evaluated and its
  results written over the folder's, with exit 0). ``original``: a ``model.ckpt-N`` of
  Google's original code (its names), not a bert_tf training checkpoint."""
  report = (checkpoints.load_google_checkpoint(model, checkpoint) if original else
            checkpoints.load_bert_tf_checkpoint(model, checkpoint))
  if report.missing:
    shown = ", ".join(report.missing[:3]) + (", ..." if len(report.missing) > 3 else "")
    raise BertTfError(f"{what}: {checkpoint} lacks {shown} (they would be "
                      "random): its folder holds another kind of model (made by another "
                      "script or task?); give this run an --output_dir of its own")


def restore_best(model, best_dir, progress, what="--use_best_checkpoint"):
  """Loads ``best/``'s weights into ``model``; returns their training step."""
  path = loop.latest_checkpoint(best_dir)
  if path is None:
    raise BertTfError(f"no training checkpoint in {best_dir!r}")
  _restore_whole(model, path, what)
  if progress:
    progress(f"using the best checkpoint, {path}")
  return int(path.rsplit("-", 1)[1])


def restore_without_training(model, output_dir, init_checkpoint, phase, use_best_checkpoint,
                             progress):
  """Loads the weights a run without training uses (eval, predict, an export): ``best/``'s
  with ``use_best_checkpoint``, else the latest checkpoint in ``output_dir``, else
  ``init_checkpoint``'s, which must hold the whole model (``preflight.check_loaded``, naming
  ``phase``). Returns their training step (0 for ``init_checkpoint``)."""
  progress = progress or log_line
  if use_best_checkpoint:
    return restore_best(model, os.path.join(output_dir, BEST_DIR), progress,
                        f"{phase} without --do_train")
  latest = loop.latest_checkpoint(output_dir)
  if latest:
    _restore_whole(model, latest, f"{phase} without --do_train")
    progress(f"restored {latest}")
    return int(latest.rsplit("-", 1)[1])
  originals = loop.original_checkpoints(output_dir)
  if originals:  # A run of Google's original code: its Estimator evaluated these, as here.
    _restore_whole(model, originals[0], f"{phase} without --do_train", original=True)
    progress(f"restored {originals[0]}, written by Google's original code"
             + (f" (not --init_checkpoint {init_checkpoint}, as the original)"
                if init_checkpoint else ""))
    return int(originals[0].rsplit("-", 1)[1])
  report = checkpoints.load_weights(model, init_checkpoint)
  progress(str(report))
  preflight.check_loaded(phase, report)
  return 0
