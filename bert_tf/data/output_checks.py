"""Checks on create_pretraining_data's output paths, made before any work starts.

Every check raises a one-line ``BertTfError`` naming the path and the flag, so that a bad
command fails at once and writes nothing (rather than after minutes of work, or with half the
records silently lost when one path is given twice).
"""

import contextlib
import os
import re
import shutil

from bert_tf import fileio
from bert_tf.errors import BertTfError


def _real(path):
  return os.path.realpath(os.path.abspath(path))


def check_outputs(output_files, input_files=(), vocab_file=None):
  """Validates output paths against each other, the inputs and the vocab; makes parent dirs.

  Args:
    output_files: list of output paths (local or ``gs://``).
    input_files: the expanded input files (list of paths).
    vocab_file: the vocab path, or None.

  Returns:
    The output paths, unchanged (list of str).

  Raises:
    BertTfError: a path given twice, an output that is an input or the vocab, an output that
      is a directory, an input that is a directory, or an output folder that cannot be made
      or written.
  """
  for path in input_files:
    if not fileio.is_remote(path) and os.path.isdir(path):
      raise BertTfError(f"--input_file: {path!r} is a directory, not a file")
  sources = {_real(p): f"--input_file {p!r}" for p in input_files
             if not fileio.is_remote(p)}
  if vocab_file and not fileio.is_remote(vocab_file):
    sources[_real(vocab_file)] = f"--vocab_file {vocab_file!r}"
  seen = {}
  for path in output_files:
    if fileio.is_remote(path):
      continue
    real = _real(path)
    if real in seen:
      raise BertTfError(f"--output_file: {path!r} is given twice (as {seen[real]!r} too)")
    seen[real] = path
    if real in sources:
      raise BertTfError(f"--output_file: {path!r} would overwrite {sources[real]}")
    if os.path.isdir(path):
      raise BertTfError(f"--output_file: {path!r} is a directory")
    parent = os.path.dirname(real)
    try:
      os.makedirs(parent, exist_ok=True)
    except OSError as e:
      raise BertTfError(f"--output_file: cannot make the folder of {path!r}: "
                        f"{e.strerror or e}") from None
    if not os.access(parent, os.W_OK | os.X_OK):
      raise BertTfError(f"--output_file: the folder of {path!r} is not writable")
  return list(output_files)


# Our own temporary names only: fileio.temp_name's "<output>.tmp-<pid>-<8 hex>" and
# the spill directories of sharded mode: tempfile's ".bert_tf-shards-<8 of [a-z0-9_]>"
# (pretraining.run._spill_dir) and --runner's ".bert_tf-shards-<12 hex>" beside the output
# (pretraining_beam._spill_dir).
_SPILL = re.compile(r"\.bert_tf-shards-(?:[a-z0-9_]{8}|[0-9a-f]{12})")


def remove_leftovers(output_files):
  """Removes what a killed run of the same command left beside ``output_files``: their
  ``fileio.temp_name`` temp files and the spill directories of sharded mode. Names that do not
  match those patterns exactly (a user's files) are left alone.

  Returns:
    The removed paths (list of str, sorted).
  """
  removed = []
  folders = set()
  for path in output_files:
    if fileio.is_remote(path):
      continue
    folder = os.path.dirname(os.path.abspath(path))
    folders.add(folder)
    for name in _names(folder):
      full = os.path.join(folder, name)
      temp = fileio.temp_target(name)
      if temp and temp[0] == os.path.basename(path) and os.path.isfile(full):
        os.remove(full)
        removed.append(full)
  for folder in folders:
    for name in _names(folder):
      full = os.path.join(folder, name)
      if _SPILL.fullmatch(name) and os.path.isdir(full) and not os.path.islink(full):
        shutil.rmtree(full, ignore_errors=True)
        removed.append(full)
  return sorted(removed)


_DIGITS = re.compile(r"\d+")


def earlier_shards(output_files):
  """Files beside ``output_files`` numbered as they are but not among them, when the outputs
  form a numbered series (two or more names that differ only in their numbers:
  ``train-0.tfrecord``, ``train-1.tfrecord``; ``part-00000-of-00002``, ...): an earlier run's
  shards (``train-7.tfrecord``, ``part-00003-of-00004``), which a glob of the outputs
  (``train-*.tfrecord``, run_pretraining's ``--input_file``) reads with this run's records.
  A single output is no series (``wiki_seq128`` beside ``wiki_seq512`` is another data set).
  Local folders only.

  Returns:
    (paths, the glob that takes them and the outputs): paths sorted, [] if none.
  """
  series = {}
  for path in output_files:
    if fileio.is_remote(path):
      continue
    folder, name = os.path.split(path)
    series.setdefault((folder, _DIGITS.sub("#", name)), []).append(name)
  outputs = {_real(p) for p in output_files if not fileio.is_remote(p)}
  found, globs = set(), []
  for (folder, skeleton), names in series.items():
    if len(set(names)) < 2 or "#" not in skeleton:
      continue
    numbered = re.compile(r"\d+".join(map(re.escape, skeleton.split("#"))))
    for other in _names(folder or "."):
      full = os.path.join(folder, other)
      if (numbered.fullmatch(other) and _real(full) not in outputs
          and os.path.isfile(full)):
        found.add(full)
        globs.append(os.path.join(folder, skeleton.replace("#", "*")))
  return sorted(found), (globs[0] if globs else None)


def _names(folder):
  try:
    return os.listdir(folder)
  except OSError:
    return []


@contextlib.contextmanager
def os_errors_as_bert_tf_errors():
  """An ``OSError`` (a full disk, a folder made read-only meanwhile) becomes a one-line
  ``BertTfError`` naming the file; the writers have discarded their temp files by then."""
  try:
    yield
  except OSError as e:
    # The output's name, not its temporary one.
    where = f"{fileio.output_name(e.filename)}: " if e.filename else ""
    raise BertTfError(f"{where}{e.strerror or e}") from None
