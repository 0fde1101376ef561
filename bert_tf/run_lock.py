"""One run per output folder: a lock held by the run that writes it, and the training flags
its checkpoints were made with.

The lock, ``<output_dir>/.bert_tf.lock``, holds the pid, host, start time and command of the
run holding it. Local folders: it is created whole (written under a temporary name, then
hard-linked to its name, which fails if it exists) and ``fcntl.flock``-ed by its holder for
the whole run; the kernel drops the flock when the holder dies, however it dies. So a second
run finds the file flocked and stops with one line naming the holder, having written nothing;
a lock whose file is there but not flocked was left by a killed run and is taken over (one
line says so), atomically (renamed over, under the old file's flock). The holder removes it
when the run ends, normally or by an error (and the folder too if the lock made it and it
is still empty). On a file system without hard links (some FUSE, gcsfuse and SMB mounts)
the lock is created in place (``O_EXCL``), flocked, then written; one without ``flock`` is a
one-line error (two runs there could not be kept apart). ``gs://`` and other remote folders
have no lock
primitive: the file is written as an advisory note and a run that finds one warns (naming
it) and goes on; the user keeps one run per folder there.

The settings, ``<output_dir>/run_settings.json``: the flags that decide a training run's
trajectory (seed, learning rate, batch size, warmup, sequence lengths, the BERT config,
init_checkpoint, the optimizer's flags, ...), recorded when a training run starts in a folder
without checkpoints. A training run that would resume the folder's checkpoints compares its
own with them: a difference is a one-line error naming each flag with its old and new value,
unless ``resume_with_changed_flags`` (then a warning, and the record is updated). Flags that
legitimately change on resume are not recorded: --num_train_steps (--num_train_epochs) grown
to train longer, eval/predict flags, save/log intervals, paths of inputs and outputs, dtype,
XLA, gradient accumulation and the distribution (the same global batch on other hardware).

A run that does not train but uses the folder's checkpoints (eval or predict only) compares
the BERT config's entries of the record with its own; and every run over a folder with
checkpoints compares its --vocab_file with the folder's vocab.txt (the vocab the checkpoints
were trained with, kept beside them): a vocab or config of another model would be evaluated
without an error and then written over the folder's own.

The training data, ``run_settings.json``'s ``training_data``: a fingerprint of the training
examples (their content, in order: the same data moved to another path is the same; for
pretraining, each --input_file's name and size and the head of the first), recorded by a
fresh training run (``check_training_data``). A run that would resume the checkpoints on
other examples (train.tsv, --train_file or train.txt changed, another --data_dir, input files
dropped, added or made anew) is refused with one line as changed flags are: it would have
gone on from the checkpoint's step through the new data, the model then trained on a mix of
the two. A record without it (an older folder) takes this run's.

All are applied by ``one_run_per_output_dir``, the decorator of the training library's
``run_pretraining``, ``run_classifier``, ``run_squad`` and ``run_token_classifier``; under multi-worker training only
the chief locks and writes, every task compares.
"""

import contextlib
import contextvars
import datetime
import errno
import functools
import hashlib
import inspect
import json
import os
import signal
import socket
import sys
import threading
import uuid

from absl import logging

from bert_tf import faults, fileio
from bert_tf.errors import BertTfError

LOCK_FILE = ".bert_tf.lock"
SETTINGS_FILE = "run_settings.json"
# What a fresh training run writes before its first checkpoint, for the folder to load alone
# (``loop.write_model_files_if_fresh``, ``classifier_labels``): put back as it was when the
# run fails before any checkpoint.
FRESH_RUN_FILES = ("bert_config.json", "vocab.txt", "classifier.json", "token_classifier.json")
# run_settings.json's entry for the training examples' fingerprint (not a flag: compared by
# ``check_training_data``, not ``check_settings``).
TRAINING_DATA = "training_data"
# The run ``one_run_per_output_dir`` is running: its folder, chief, resume_with_changed_flags,
# progress, and the fingerprint to record when it has gone through.
_RUN = contextvars.ContextVar("bert_tf_run", default=None)
# The results of an earlier run that a fresh training run's folder may hold (an eval-only or
# predict-only run of another model, the --init_checkpoint): set aside when it starts, gone
# once it has a checkpoint, put back if it fails before one (``_set_aside_results``).
RESULT_FILES = ("eval_results.txt", "eval_results.json", "test_results*.tsv",
                "test_results.txt", "eval_predictions.txt", "test_predictions.txt",
                "predictions.json", "nbest_predictions.json", "null_odds.json")
# Races where the lock changes hands between two looks at it, before giving up.
_ATTEMPTS = 20
# os.link's errors on a file system without hard links (then the lock is made in place).
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
                  errno.EACCES, errno.EXDEV}


def _warn(line):
  """The lines of a run given no ``progress``: absl warnings."""
  logging.warning("%s", line)


def _record():
  return {"pid": os.getpid(), "host": socket.gethostname(),
          "started": datetime.datetime.now(datetime.timezone.utc).strftime(
              "%Y-%m-%d %H:%M:%S UTC"),
          "command": " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:]),
          "id": uuid.uuid4().hex}  # tells two runs of one process apart


def _parse(data):
  try:
    record = json.loads(data)
    return record if isinstance(record, dict) else {}
  except ValueError:
    return {}


def _describe(record):
  if not record.get("pid"):
    return "a process whose lock file is unreadable"
  command = str(record.get("command", ""))
  if len(command) > 160:
    command = command[:157] + "..."
  return (f"pid {record.get('pid')} on {record.get('host', '?')}, started "
          f"{record.get('started', '?')} ({command})")


def running_holder(folder):
  """``pid ... on host, started ... (command)`` of the run that holds ``folder``'s lock now
  (a training run writing its checkpoints there), or None (no lock, a dead run's, gs://)."""
  path = os.path.join(folder, LOCK_FILE)
  if fileio.is_remote(folder) or not os.path.exists(path):
    return None
  import fcntl  # pylint: disable=import-outside-toplevel
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      return _describe(_parse(_read_fd(fd)))
    except OSError:
      return None
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


class OutputDirLock:
  """The lock of ``output_dir`` (see the module docstring); ``release()`` when done."""

  def __init__(self, output_dir, progress=None):
    self.output_dir = output_dir
    self.path = os.path.join(output_dir, LOCK_FILE)
    self._progress = progress or _warn
    self._fd = None
    self._remote_record = None
    # A folder made for the lock alone is removed with it (a run that fails its checks
    # leaves no empty --output_dir behind).
    self._created = not fileio.exists(output_dir)
    # A folder that is a file, lies under a file or cannot be written: one line that says so
    # (``paths``), before anything is made.
    from bert_tf import paths  # pylint: disable=import-outside-toplevel
    paths.check_writable("--output_dir", output_dir, is_folder=True)
    try:
      fileio.makedirs(output_dir)
    except OSError as e:
      raise BertTfError(f"--output_dir {output_dir!r}: cannot create it "
                        f"({e.strerror or e})") from None
    if fileio.is_remote(output_dir):
      self._acquire_remote()
    else:
      self._fd = self._acquire_local()

  # --- local folders: flock ---

  def _acquire_local(self):
    import fcntl  # pylint: disable=import-outside-toplevel
    data = json.dumps(_record()).encode("utf-8")
    for _ in range(_ATTEMPTS):
      tmp = fileio.temp_name(self.path)
      try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
      except OSError as e:  # e.g. a read-only folder
        raise BertTfError(f"--output_dir {self.output_dir!r}: cannot write in it "
                          f"({e.strerror or e})") from None
      owned = linked = False
      try:
        os.write(fd, data)
        self._flock(fcntl, fd)  # a new file: no one else has it
        try:
          os.link(tmp, self.path)  # fails if the lock exists; else it appears whole
          owned = linked = True
        except FileExistsError:
          owned = self._take_over_if_stale(tmp, fcntl)
        except OSError as e:
          if e.errno not in _NO_HARD_LINKS:
            raise
          linked = True  # no hard links on this file system: made in place below
      finally:
        if not owned:
          os.close(fd)
        if os.path.lexists(tmp):
          os.remove(tmp)
      if owned:
        return fd
      if linked:
        fd = self._create_in_place(fcntl, data)
        if fd is not None:
          return fd
    raise BertTfError(f"--output_dir {self.output_dir!r}: its lock {self.path} changed hands "
                      f"{_ATTEMPTS} times while this run tried to take it; try again")

  def _flock(self, fcntl, fd):
    """flock ``fd``, without waiting (BlockingIOError when another run holds it); a file
    system without locks is one line."""
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise
    except OSError as e:
      raise BertTfError(
          f"--output_dir {self.output_dir!r}: its file system does not support file locks "
          f"({e.strerror or e}), so two runs in this folder could not be kept apart; use a "
          "folder on a local disk") from None

  def _create_in_place(self, fcntl, data):
    """The lock on a file system without hard links (some FUSE, gcsfuse and SMB mounts):
    created under its own name (``O_EXCL``: fails if it exists), flocked, then written.
    Returns its flocked fd, or None to try again (the lock exists: ``_acquire_local`` takes
    it over if stale, which needs no hard link; or it changed hands meanwhile). Between the
    create and the flock a second run may find the new file unlocked and take it over: this
    file is then no longer the lock (checked after the flock), and the next try finds the
    second run's lock held."""
    try:
      fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
      return self._take_over_without_link(fcntl, data)
    try:
      self._flock(fcntl, fd)
      if _same_file(fd, self.path):
        os.write(fd, data)
        return fd
    except BlockingIOError:
      pass
    except BaseException:
      os.close(fd)
      if os.path.lexists(self.path):
        os.remove(self.path)
      raise
    os.close(fd)
    return None

  def _take_over_without_link(self, fcntl, data):
    tmp = fileio.temp_name(self.path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    owned = False
    try:
      os.write(fd, data)
      self._flock(fcntl, fd)
      owned = self._take_over_if_stale(tmp, fcntl)
    finally:
      if not owned:
        os.close(fd)
      if os.path.lexists(tmp):
        os.remove(tmp)
    return fd if owned else None

  def _take_over_if_stale(self, tmp, fcntl):
    """True when the existing lock was left by a run that died and ``tmp`` (ours, flocked)
    replaced it; False when it vanished or changed meanwhile (try again). Raises the one-line
    error when a live run holds it."""
    try:
      old = os.open(self.path, os.O_RDONLY)
    except FileNotFoundError:
      return False
    try:
      try:
        fcntl.flock(old, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        if not _same_file(old, self.path):
          return False
        raise BertTfError(
            f"--output_dir {self.output_dir!r} is in use by another run: "
            f"{_describe(_parse(_read_fd(old)))}; wait for it to end, or use another "
            "--output_dir") from None
      if not _same_file(old, self.path):
        return False
      holder = _parse(_read_fd(old))
      # Under the old file's flock: no other run can be taking it over now.
      os.rename(tmp, self.path)
      self._progress(f"taking over {self.path}, left by {_describe(holder)}, which is no "
                     "longer running")
      return True
    finally:
      os.close(old)

  # --- remote folders (gs://): advisory ---

  def _acquire_remote(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    if tf.io.gfile.exists(self.path):
      with tf.io.gfile.GFile(self.path, "r") as f:
        holder = _parse(f.read())
      self._progress(f"warning: {self.path} exists, written by {_describe(holder)}: a "
                     f"{self.output_dir.split('://')[0]}:// folder cannot be locked, so make "
                     "sure no other run writes this --output_dir (a run that was killed "
                     "leaves this file too)")
      tf.io.gfile.remove(self.path)
    self._remote_record = json.dumps(_record())
    with tf.io.gfile.GFile(self.path, "w") as f:
      f.write(self._remote_record)

  def release(self):
    """Removes the lock file (if still ours) and drops the flock."""
    if self._fd is not None:
      try:
        if _same_file(self._fd, self.path):
          os.remove(self.path)
      except OSError:
        pass
      os.close(self._fd)  # after the removal: a run that opened the file meanwhile retries
      self._fd = None
      if self._created:
        try:
          os.rmdir(self.output_dir)  # only if nothing else was written in it
        except OSError:
          pass
    elif self._remote_record is not None:
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      try:
        with tf.io.gfile.GFile(self.path, "r") as f:
          ours = f.read() == self._remote_record
        if ours:
          tf.io.gfile.remove(self.path)
      except tf.errors.OpError:
        pass
      self._remote_record = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.release()


def _read_fd(fd):
  os.lseek(fd, 0, os.SEEK_SET)
  chunks = []
  while True:
    chunk = os.read(fd, 65536)
    if not chunk:
      return b"".join(chunks).decode("utf-8", "replace")
    chunks.append(chunk)


def _same_file(fd, path):
  try:
    here, there = os.fstat(fd), os.stat(path)
  except FileNotFoundError:
    return False
  return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


# === The flags that decide a training run's trajectory ===

# optimizer_kwargs keys -> their flags (``training.flags.optimizer_kwargs``).
_OPTIMIZER_FLAGS = {"optimizer_type": "optimizer_type", "weight_decay_rate": "weight_decay_rate",
                    "beta_1": "adam_beta1", "beta_2": "adam_beta2", "epsilon": "adam_epsilon",
                    "clip_norm": "clip_norm",
                    "exclude_from_weight_decay": "exclude_from_weight_decay",
                    "end_learning_rate": "end_learning_rate", "power": "lr_decay_power"}


def trajectory_settings(arguments, names):
  """{flag name: value} of the run's ``arguments`` (the library function's, by name) listed in
  ``names``, as JSON values; ``bert_config`` becomes ``bert_config_file.<key>`` entries,
  ``optimizer_kwargs`` its flags, ``dynamic_masking`` a bool and ``masked_lm_prob``."""
  settings = {}
  for name in names:
    value = arguments.get(name)
    if name == "bert_config":
      for key, item in value.to_dict().items():
        settings[f"bert_config_file.{key}"] = item
    elif name == "optimizer_kwargs":
      from bert_tf import optimization  # pylint: disable=import-outside-toplevel
      defaults = {key: param.default for key, param in
                  inspect.signature(optimization.create_optimizer).parameters.items()}
      for key, flag in _OPTIMIZER_FLAGS.items():
        settings[flag] = (value or {}).get(key, defaults.get(key))
    elif name == "dynamic_masking":
      settings["dynamic_masking"] = bool(value)
      settings["masked_lm_prob"] = value["masked_lm_prob"] if value else None
    elif name == "init_checkpoint" and value and not fileio.is_remote(value):
      settings[name] = os.path.abspath(value)
    else:
      settings[name] = value
  return json.loads(json.dumps(settings))  # tuples as lists: as read back


def _show(value):
  if value is None:
    return "unset"
  if isinstance(value, list):
    return ",".join(map(str, value)) or "(empty)"
  return str(value)


def _has_checkpoints(output_dir):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return bool(tf.io.gfile.glob(os.path.join(output_dir, "ckpt-*.index")))


def _read(path):
  """The text of ``path``, or None if it does not exist."""
  if not fileio.exists(path):
    return None
  with fileio.open_file(path) as f:
    return f.read()


def _put_back(path, text):
  """``path`` as it was: ``text``, or no file for None."""
  if text is None:
    fileio.discard(path)
  else:
    with fileio.atomic_write(path) as f:
      f.write(text)


def _write_settings(path, settings):
  with fileio.atomic_write(path) as f:
    f.write(json.dumps(settings, indent=1, sort_keys=True) + "\n")


def _differences(recorded, settings):
  """``--flag old (now new); ...`` for each entry that differs between the two dicts
  (``bert_config_file.key`` entries as ``--bert_config_file's key``), or "" if none does."""
  missing = object()

  def flag(name):
    file_flag, _, key = name.partition(".")
    return f"--{file_flag}'s {key}" if key else f"--{name}"

  def show(value):
    return "(none)" if value is missing else _show(value)

  def differs(name):
    old, new = recorded.get(name, missing), settings.get(name, missing)
    if name == "init_checkpoint" and _same_checkpoint(old, new):
      return False
    return name != TRAINING_DATA and old != new

  return "; ".join(
      f"{flag(name)} {show(recorded.get(name, missing))} (now "
      f"{show(settings.get(name, missing))})"
      for name in sorted(set(recorded) | set(settings)) if differs(name))


def _same_checkpoint(old, new):
  """Whether two ``--init_checkpoint`` values name one checkpoint: the same text, or the
  same prefix once a folder, ``.index`` or ``.data-*`` is resolved (``bert_model.ckpt``'s
  folder given where its prefix was)."""
  if old == new:
    return True
  if not isinstance(old, str) or not isinstance(new, str):
    return False
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  try:
    return (os.path.abspath(checkpoints.resolve_checkpoint_prefix(old)) ==
            os.path.abspath(checkpoints.resolve_checkpoint_prefix(new)))
  except BertTfError:  # (not a TF checkpoint: a Hugging Face folder, one gone since)
    return False


def check_settings(output_dir, settings, *, resume_with_changed_flags=False, progress=None,
                   write=True):
  """Records ``settings`` in ``output_dir/run_settings.json`` when the folder has no
  checkpoint (a fresh run); otherwise compares them with the record and raises a one-line
  ``BertTfError`` naming the flags that differ (old and new values), unless
  ``resume_with_changed_flags``. ``write``: False on a multi-worker run's non-chief tasks
  (they compare only).

  Returns:
    the settings to record once the run has gone through (``record_settings``) when the
    record changes on a resume (changed flags, or no record yet): a run that fails, e.g. on
    checkpoints that do not fit, leaves the folder as it was. Else None.
  """
  progress = progress or _warn
  path = os.path.join(output_dir, SETTINGS_FILE)
  if not _has_checkpoints(output_dir):
    if write:
      _write_settings(path, settings)
    return None
  recorded = _read_record(path)
  if recorded is None:
    progress(f"note: {path} is missing or unreadable (a folder of an older bert_tf?): the "
             "flags of its checkpoints are unknown; this run's are recorded when it ends")
    return settings if write else None
  listed = _differences(recorded, settings)
  if not listed:
    return None
  if not resume_with_changed_flags:
    raise BertTfError(f"--output_dir {output_dir!r} holds checkpoints made with other flags: "
                      f"{listed}; pass --resume_with_changed_flags to resume them anyway, or "
                      "use another --output_dir")
  progress(f"warning: resuming the checkpoints of {output_dir} with changed flags "
           f"(--resume_with_changed_flags): {listed}")
  return settings if write else None


def check_config_for_use(output_dir, settings, *, resume_with_changed_flags=False,
                         progress=None):
  """For a run that uses the folder's checkpoints without training (eval, predict): the
  ``bert_config_file.*`` entries of ``settings`` against the record, as ``check_settings``
  (its other flags decide training only). Nothing is written."""
  progress = progress or _warn
  path = os.path.join(output_dir, SETTINGS_FILE)
  recorded = {k: v for k, v in (_read_record(path) or {}).items()
              if k.startswith("bert_config_file.")}
  settings = {k: v for k, v in settings.items() if k.startswith("bert_config_file.")}
  listed = _differences(recorded, settings) if recorded else None
  if not listed:
    return
  if not resume_with_changed_flags:
    raise BertTfError(f"--output_dir {output_dir!r} holds checkpoints of another BERT config: "
                      f"{listed}; give the config they were trained with (pass "
                      "--resume_with_changed_flags to use them anyway)")
  progress(f"warning: using the checkpoints of {output_dir} with a changed BERT config "
           f"(--resume_with_changed_flags): {listed}")


def check_vocab(output_dir, vocab_file, *, resume_with_changed_flags=False, progress=None):
  """For a run over a folder with checkpoints: ``vocab_file`` against the folder's vocab.txt
  (written beside the checkpoints by the run that made them). Another vocab maps the same
  ids to other words: a one-line error naming the first line that differs, unless
  ``resume_with_changed_flags`` (then a warning). Nothing is written."""
  progress = progress or _warn
  kept_path = os.path.join(output_dir, "vocab.txt")
  if not vocab_file or not fileio.exists(kept_path) or not fileio.exists(vocab_file):
    return
  if not fileio.is_remote(vocab_file) and not fileio.is_remote(kept_path) and \
      os.path.abspath(vocab_file) == os.path.abspath(kept_path):
    return
  from bert_tf import tokenization  # pylint: disable=import-outside-toplevel
  # The token of every id (line), as every reader maps them.
  given = tokenization.load_vocab(vocab_file).lines
  kept = tokenization.load_vocab(kept_path).lines
  if given == kept:
    return
  line = next((i for i, (a, b) in enumerate(zip(given, kept)) if a != b),
              min(len(given), len(kept))) + 1
  what = (f"{len(given)} tokens against {len(kept)}" if len(given) != len(kept) else
          f"{len(given)} tokens each")
  message = (f"--vocab_file {vocab_file!r} is not the vocab of the checkpoints in "
             f"--output_dir {output_dir!r} ({kept_path}; {what}, the first difference at "
             f"line {line})")
  if not resume_with_changed_flags:
    raise BertTfError(f"{message}; give that vocab (pass --resume_with_changed_flags to use "
                      "the checkpoints anyway, or use another --output_dir)")
  progress(f"warning: {message}: going on (--resume_with_changed_flags)")


def _read_record(path):
  """run_settings.json's dict, or None (no file, or not a record)."""
  if not fileio.exists(path):
    return None
  with fileio.open_file(path) as f:
    return _parse(f.read()) or None


def record_settings(output_dir, settings):
  """Writes ``settings`` as ``output_dir/run_settings.json`` (atomically), keeping the
  record's ``training_data`` unless ``settings`` has its own."""
  path = os.path.join(output_dir, SETTINGS_FILE)
  recorded = _read_record(path) or {}
  if TRAINING_DATA in recorded and TRAINING_DATA not in settings:
    settings = dict(settings, **{TRAINING_DATA: recorded[TRAINING_DATA]})
  _write_settings(path, settings)


def _rows_fingerprint(kind, rows):
  """A short hash of ``rows`` (JSON-able, in order), row by row: no copy of a large set."""
  h = hashlib.sha256(f"{kind}\n".encode())
  for row in rows:
    h.update(json.dumps(row, sort_keys=True).encode("utf-8", "surrogatepass"))
    h.update(b"\n")
  return h.hexdigest()[:16]


def check_training_data(kind, rows, source, other=None):
  """The training examples (``rows``: what training takes from each, JSON-able, in order;
  ``kind`` names the script's; ``source``: where they were read, for the message: "other
  examples than {source}'s", or ``other`` said instead of that) against
  the record of the folder being trained (see the module docstring); call it before anything
  is written. A fresh run records their fingerprint; a resume on other examples is a
  one-line ``BertTfError`` unless ``resume_with_changed_flags`` (a warning; recorded when the
  run has gone through). Outside ``one_run_per_output_dir`` (the library called directly),
  nothing (and nothing is hashed)."""
  run = _RUN.get()
  if run is None:
    return
  fingerprint = _rows_fingerprint(kind, rows)
  output_dir = run["output_dir"]
  path = os.path.join(output_dir, SETTINGS_FILE)
  recorded = _read_record(path)
  if not _has_checkpoints(output_dir):
    if run["chief"] and recorded is not None:  # check_settings wrote it: put back on failure
      _write_settings(path, dict(recorded, **{TRAINING_DATA: fingerprint}))
    return
  old = (recorded or {}).get(TRAINING_DATA)
  if old == fingerprint:
    return
  if old is not None:
    what = other or f"other examples than {source}'s"
    message = f"--output_dir {output_dir!r} holds checkpoints trained on {what}"
    if not run["resume_with_changed_flags"]:
      raise BertTfError(f"{message}: resumed, the model would go on from their step through "
                        "these, trained on a mix of the two; pass --resume_with_changed_flags "
                        "to resume them anyway, or use another --output_dir")
    run["progress"](f"warning: {message}: resuming them on these "
                    "(--resume_with_changed_flags)")
  if run["chief"]:
    run["training_data"] = fingerprint


@contextlib.contextmanager
def _uninterrupted():
  """Ctrl-C (SIGINT) pressed again while the block runs is let go: a failed run's rollback is
  done whole (a notebook's Stop button pressed twice, 0-10 ms apart, left a fresh folder's
  files half put back). The run stops anyway: the error that started the rollback goes on.
  Only where Ctrl-C is Python's KeyboardInterrupt (a notebook, a program), in the main thread
  (where Python runs signal handlers); the scripts stop at once, and the next run cleans up."""
  if (threading.current_thread() is not threading.main_thread()
      or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
    yield
    return
  signal.signal(signal.SIGINT, lambda signum, frame: None)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _set_aside_results(output_dir, progress):
  """Renames the earlier results in ``output_dir`` (``RESULT_FILES``) to temporary names;
  returns ``{path: aside}``. Those a killed fresh run left aside are removed first."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from bert_tf.data import glue  # pylint: disable=import-outside-toplevel
  # ... and the GLUE submission files of a predict run (MRPC.tsv, MNLI-m.tsv, ...).
  submissions = sorted({name for task in glue.TASKS.values()
                        for name in task.predict_splits.values() if name})
  aside = {}
  for pattern in RESULT_FILES + tuple(submissions):
    for path in sorted(tf.io.gfile.glob(os.path.join(output_dir, pattern))):
      fileio.remove_stale_temps(path)
      aside[path] = fileio.temp_name(path)
      fileio.commit(path, aside[path])
  if aside and progress:
    progress(f"set aside {', '.join(os.path.basename(p) for p in aside)}: results of an "
             "earlier run, not of the model this run trains (removed once it saves a "
             "checkpoint, put back if it fails before)")
  return aside


def one_run_per_output_dir(trajectory):
  """Decorates a training library function (``run_pretraining``...) whose arguments include
  ``output_dir``, ``strategy``, ``do_train`` and ``progress``: the call holds the lock of
  ``output_dir`` (the chief only) and, when it trains, checks the flags named in
  ``trajectory`` against the folder's checkpoints (``check_settings``) before anything else.
  Adds the keyword argument ``resume_with_changed_flags`` (default False)."""

  def decorate(run):
    signature = inspect.signature(run)

    @functools.wraps(run)
    def wrapper(*args, resume_with_changed_flags=False, **kwargs):
      from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      arguments = bound.arguments
      from bert_tf import flag_ranges  # pylint: disable=import-outside-toplevel
      # The scripts' range checks, for a call from Python (before anything is written).
      flag_ranges.check_arguments(arguments)
      output_dir = arguments["output_dir"]
      progress = arguments.get("progress")
      chief = distribution.is_chief(arguments["strategy"])
      lock = OutputDirLock(output_dir, progress) if chief else None
      run_state = {"output_dir": output_dir, "chief": chief,
                   "resume_with_changed_flags": resume_with_changed_flags,
                   "progress": progress or _warn}
      token = _RUN.set(run_state)
      try:
        faults.point("output_dir_locked")
        changed = None
        # A fresh run records its flags now (a run killed after its first checkpoint is
        # resumed against them); if it fails before any checkpoint, the record goes back.
        fresh = chief and arguments.get("do_train") and not _has_checkpoints(output_dir)
        # So do the model files a fresh run writes beside its first checkpoint (a run
        # refused after writing them left a new folder with a config and no weights).
        before = ({name: _read(os.path.join(output_dir, name))
                   for name in (SETTINGS_FILE,) + FRESH_RUN_FILES} if fresh else {})
        if arguments.get("do_train"):
          settings = trajectory_settings(arguments, trajectory)
          changed = check_settings(output_dir, settings,
                                   resume_with_changed_flags=resume_with_changed_flags,
                                   progress=progress, write=chief)
        elif "bert_config" in trajectory and _has_checkpoints(output_dir):
          check_config_for_use(output_dir, trajectory_settings(arguments, ("bert_config",)),
                               resume_with_changed_flags=resume_with_changed_flags,
                               progress=progress)
        if _has_checkpoints(output_dir):
          check_vocab(output_dir, arguments.get("vocab_file"),
                      resume_with_changed_flags=resume_with_changed_flags, progress=progress)
        aside = _set_aside_results(output_dir, progress) if fresh else {}
        try:
          results = run(*args, **kwargs)
        except BaseException:
          if fresh and not _has_checkpoints(output_dir):
            with _uninterrupted():
              for name, text in before.items():
                path = os.path.join(output_dir, name)
                if _read(path) != text:
                  _put_back(path, text)
              for path, moved in aside.items():
                if not fileio.exists(path):
                  fileio.commit(moved, path)
          raise
        finally:
          for moved in aside.values():
            fileio.discard(moved)
        data = run_state.get("training_data")
        if changed is not None or data is not None:  # one write: flags and examples together
          record = dict(changed if changed is not None else
                        _read_record(os.path.join(output_dir, SETTINGS_FILE)) or {})
          if data is not None:
            record[TRAINING_DATA] = data
          record_settings(output_dir, record)
        return results
      finally:
        with _uninterrupted():  # (a lock left held would refuse the next run in a notebook)
          _RUN.reset(token)
          if lock is not None:
            lock.release()

    return wrapper

  return decorate
