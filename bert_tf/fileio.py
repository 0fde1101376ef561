"""Files that are never left half-written.

Everything bert_tf writes (TFRecords, JSON, checkpoints exported in Google's format,
predictions) goes to a temporary name beside the target and is renamed when whole, so an
interrupted job never leaves an output that looks complete. ``tf.io.gfile`` is used so that
``gs://`` paths work on Cloud TPU VMs.
"""

import contextlib
import os
import uuid

import tensorflow as tf

from bert_tf.errors import BertTfError


def temp_name(path):
  """A unique temporary name in the same directory as ``path`` (so rename is atomic)."""
  return f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def commit(tmp_path, path):
  """Renames a finished temporary file onto ``path``, replacing what was there."""
  tf.io.gfile.rename(tmp_path, path, overwrite=True)


def discard(tmp_path):
  """Removes a temporary file left by a failed write, if any."""
  try:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)
  except tf.errors.OpError:
    pass


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Opens ``path`` for writing through a temporary file; renamed only on success.

  Example:
    >>> with atomic_write("/tmp/x.json") as f:
    ...   _ = f.write("{}")
  """
  parent = os.path.dirname(path)
  if parent and not tf.io.gfile.exists(parent):
    tf.io.gfile.makedirs(parent)
  tmp = temp_name(path)
  try:
    with tf.io.gfile.GFile(tmp, mode) as f:
      yield f
    commit(tmp, path)
  except BaseException:
    discard(tmp)
    raise


def copy_atomically(source, target):
  """Copies ``source`` to ``target`` through a temporary name (``gs://`` paths work)."""
  tmp = temp_name(target)
  try:
    tf.io.gfile.copy(source, tmp, overwrite=True)
    commit(tmp, target)
  except BaseException:
    discard(tmp)
    raise


def require_file(path, what="file", flag=None):
  """Raises a one-line ``BertTfError`` unless ``path`` exists."""
  if not path or not tf.io.gfile.exists(path):
    where = f" (--{flag})" if flag else ""
    raise BertTfError(f"{what} not found{where}: {path!r}")
  return path
