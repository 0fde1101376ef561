"""The paths a run reads and writes, checked before any work: no output over its own input,
output folders that can be written, ``gs://`` reachable.

Every script (and each ``run_*`` library function, which knows its own files) calls
``check_paths`` once, before a model is built. Each refusal is a one-line ``BertTfError``
naming the flag and path at fault (and, for an overwrite, both the output and the input):

  an output equal to an input          ``--output_file a.txt is --input_file a.txt``, after
                                       resolving links (``os.path.realpath``)
  an output folder equal to an input   ``--output_dir`` equal to ``--data_dir``
  folder
  an input the run would write over    an input file inside an output folder whose name is
                                       one of the names the run writes there (``written``
                                       patterns: ``--init_checkpoint out/google/
                                       bert_model.ckpt`` with ``--output_dir out``)
  an output folder that is a file, or under a file, or cannot be written (read-only mount,
  permissions): probed by writing and removing a temporary file in it (or in its nearest
  existing parent, which is where it would be made: nothing is created by a refused run)
  a ``gs://`` path that cannot be reached (no network, no credentials): TensorFlow's own
  error's first line. A probe that has not answered after ``REMOTE_TIMEOUT_S`` seconds
  (60, or $BERT_TF_REMOTE_TIMEOUT_S) is an error too, not a hang: where packets are dropped
  or refused, TensorFlow's GCS client retries for many minutes.

Files a run rewrites with the same content (``vocab.txt`` and ``bert_config.json`` beside the
checkpoints) are not in ``written``: ``--vocab_file out/vocab.txt --output_dir out`` is the
usual way to go on from a finished run.
"""

import fnmatch
import glob
import os
import threading

from bert_tf import fileio
from bert_tf.errors import BertTfError

# Seconds a remote file system has to answer the first probe ($BERT_TF_REMOTE_TIMEOUT_S).
REMOTE_TIMEOUT_S = 60.0


def _remote_timeout_s():
  text = os.environ.get("BERT_TF_REMOTE_TIMEOUT_S")
  if not text:
    return REMOTE_TIMEOUT_S
  try:
    return float(text)
  except ValueError:
    raise BertTfError(f"BERT_TF_REMOTE_TIMEOUT_S must be a number of seconds, got {text!r}") \
        from None


class Folder:
  """An output folder and the names (``fnmatch`` patterns relative to it, ``/`` separated) of
  what the run may write over in it; ``("*",)``: anything in it."""

  def __init__(self, path, written=("*",)):
    self.path = path
    self.written = tuple(written)


def _real(path):
  if fileio.is_remote(path):
    return str(path).rstrip("/")
  return os.path.realpath(os.path.abspath(os.path.expanduser(str(path))))


def _listed(paths):
  """Paths from a path, comma-separated paths or a list; local globs expanded (a glob that
  matches nothing stays as given)."""
  if paths is None:
    return []
  given = paths if isinstance(paths, (list, tuple)) else str(paths).split(",")
  listed = []
  for path in (str(p) for p in given if p):
    matches = [] if fileio.is_remote(path) else sorted(glob.glob(os.path.expanduser(path)))
    listed.extend(matches or [path])
  return listed


def _inside(path, folder):
  """``path`` relative to ``folder`` ('/'-separated) when it is inside it, else None."""
  if fileio.is_remote(path) != fileio.is_remote(folder):
    return None
  if fileio.is_remote(path):
    return path[len(folder) + 1:] if path.startswith(folder + "/") else None
  rel = os.path.relpath(path, folder)
  # Outside: ".." itself or a path through it; "..cache/x" is a folder inside.
  if rel in (os.curdir, os.pardir) or rel.startswith(os.pardir + os.sep):
    return None
  return rel.replace(os.sep, "/")


def check_no_overwrite(inputs, outputs):
  """Refuses an output that is, or would write over, an input.

  Args:
    inputs: {label: path, comma-separated paths, list of paths, or None}; a label is what
      the user typed it as (``"--input_file"``). Globs should be expanded by the caller;
      paths that do not exist still count (a file that is not there cannot be lost, but a
      path given as both is a mistake either way).
    outputs: {label: file path, ``Folder``, or None}.

  Raises:
    BertTfError: naming both the output and the input.
  """
  sources = [(label, path, _real(path)) for label, given in inputs.items()
             for path in _listed(given)]
  for out_label, out in outputs.items():
    if not out:
      continue
    folder = out if isinstance(out, Folder) else None
    out_path = folder.path if folder else out
    out_real = _real(out_path)
    for in_label, in_path, in_real in sources:
      if in_real == out_real:
        raise BertTfError(f"{out_label} {out_path} is {in_label} {in_path}: the run would "
                          "write over its own input")
      if folder is None:
        continue
      rel = _inside(in_real, out_real)
      if rel is not None and any(fnmatch.fnmatchcase(rel, p) for p in folder.written):
        raise BertTfError(f"{in_label} {in_path} is inside {out_label} {out_path}, where the "
                          f"run writes {rel}: it would write over its own input")


# === Output folders that can be written ===

def _nearest_existing(path):
  """The nearest existing path among ``path`` and its parents."""
  current = path
  while not os.path.lexists(current):
    parent = os.path.dirname(current)
    if parent == current:
      break
    current = parent
  return current


def _probe_write(folder):
  """Writes and removes a temporary file in ``folder``: None, or the OSError's reason."""
  probe = fileio.temp_name(os.path.join(folder, ".bert_tf-write-probe"))
  try:
    with open(probe, "wb"):
      pass
  except OSError as e:
    return e.strerror or str(e)
  try:
    os.remove(probe)
  except OSError:
    pass
  return None


def check_writable(label, path, is_folder):
  """Refuses an output (folder or file) whose place cannot be written; makes nothing.

  Raises:
    BertTfError: the path (or, for a folder, a parent of it) is a file, a file output is a
      folder, or the folder that would hold it cannot be written.
  """
  if fileio.is_remote(path):
    return
  full = os.path.abspath(os.path.expanduser(str(path)))
  if is_folder and os.path.exists(full) and not os.path.isdir(full):
    raise BertTfError(f"{label} {path} is a file, not a folder")
  if not is_folder and os.path.isdir(full):
    raise BertTfError(f"{label} {path} is a folder, not a file")
  folder = full if is_folder else os.path.dirname(full)
  existing = _nearest_existing(folder)
  if link := fileio.dangling_link(existing):
    raise BertTfError(f"{label} {path}: {link}")
  if not os.path.isdir(existing):
    raise BertTfError(f"{label} {path}: {existing} is a file, not a folder")
  reason = _probe_write(existing)
  if reason:
    where = "" if existing == folder else f" (in {existing}, where it would be made)"
    raise BertTfError(f"{label} {path}: cannot write there{where}: {reason}")


# === gs:// and other remote paths ===

def _first_line(error):
  text = str(getattr(error, "message", "") or error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def check_reachable(label, path, timeout_s=None, probe=None):
  """Refuses a ``gs://`` path whose file system does not answer (other paths pass).

  ``probe(path)`` (default ``tf.io.gfile.exists``) runs in a daemon thread; an error is the
  first line of TensorFlow's message, and no answer within ``timeout_s`` (default
  $BERT_TF_REMOTE_TIMEOUT_S, else ``REMOTE_TIMEOUT_S``) is an error too, not a hang.
  """
  if not str(path).startswith("gs://"):
    return  # local, or a scheme bert_tf does not read through TensorFlow's file systems
  if probe is None:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    probe = tf.io.gfile.exists
  timeout_s = _remote_timeout_s() if timeout_s is None else timeout_s
  outcome = {}

  def run():
    try:
      probe(path)
      outcome["ok"] = True
    except Exception as e:  # pylint: disable=broad-except  # reported below, as one line
      outcome["error"] = e

  thread = threading.Thread(target=run, name="bert_tf-remote-probe", daemon=True)
  thread.start()
  thread.join(timeout_s)
  if "error" in outcome:
    raise BertTfError(f"{label} {path}: cannot reach it: {_first_line(outcome['error'])}")
  if "ok" not in outcome:
    raise BertTfError(f"{label} {path}: no answer within {timeout_s:g} s (no network?)")


def check_paths(inputs=None, outputs=None):
  """``check_no_overwrite``, then every output's place writable (``check_writable``) and every
  remote path reachable (``check_reachable``, once per bucket). See the module docstring.

  Args:
    inputs: {label: path(s) or None}, as ``check_no_overwrite``.
    outputs: {label: file path, ``Folder``, or None}.
  """
  inputs = inputs or {}
  outputs = {k: v for k, v in (outputs or {}).items() if v}
  check_no_overwrite(inputs, outputs)
  for label, out in outputs.items():
    if isinstance(out, Folder):
      check_writable(label, out.path, is_folder=True)
    else:
      check_writable(label, out, is_folder=False)
  probed = set()
  everything = [(label, path) for label, given in inputs.items() for path in _listed(given)]
  everything += [(label, out.path if isinstance(out, Folder) else out)
                 for label, out in outputs.items()]
  for label, path in everything:
    if str(path).startswith("gs://"):
      bucket = "/".join(str(path).split("/")[:3])  # gs://bucket
      if bucket not in probed:
        probed.add(bucket)
        check_reachable(label, path)
