"""Files that are never left half-written.

Everything bert_tf writes (TFRecords, JSON, checkpoints exported in Google's format,
predictions) goes to a temporary name beside the target and is renamed when whole, so an
interrupted job never leaves an output that looks complete.

Local paths use the standard library; paths with a scheme (``gs://...``, as on Cloud TPU VMs)
go through ``tf.io.gfile``. TensorFlow is imported only for those, so that data preparation
(``create_pretraining_data``) runs without it.
"""

import contextlib
import os
import re
import shutil
import uuid

from bert_tf import faults
from bert_tf.errors import BertTfError


def is_remote(path):
  """True for paths with a scheme (``gs://``, ``hdfs://``...): those go through tf.io.gfile."""
  return "://" in str(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def exists(path):
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def glob_chars(pattern):
  """Whether ``pattern`` is a glob (has ``*``, ``?`` or ``[``), not a file name."""
  return any(c in pattern for c in "*?[")


def is_folder(path):
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def checkpoint_folder(checkpoint):
  """The folder of a model given as a folder or as a checkpoint file/prefix in one
  (``--init_checkpoint``), or None for none."""
  if not checkpoint:
    return None
  return checkpoint if is_folder(checkpoint) else (os.path.dirname(checkpoint) or ".")


def makedirs(path):
  """Creates directory ``path`` and its parents if missing."""
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def open_file(path, mode="r"):
  """``open`` for local paths (text as UTF-8), ``tf.io.gfile.GFile`` for remote ones. A local
  folder at ``path`` is a one-line ``BertTfError``."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  try:
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
  except IsADirectoryError:
    raise BertTfError(f"{path} is a folder, not a file") from None


def file_size(path):
  return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def temp_name(path):
  """A unique temporary name in the same directory as ``path`` (so rename is atomic)."""
  return f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


_TEMP = re.compile(r"(?P<target>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]{8}")  # temp_name's


def temp_target(name):
  """``(target name, pid)`` when ``name`` is a ``temp_name`` (``<target>.tmp-<pid>-<8 hex>``,
  names only, no folder), else None."""
  match = _TEMP.fullmatch(name)
  return (match.group("target"), int(match.group("pid"))) if match else None


def output_name(path):
  """``path`` itself, or, for a ``temp_name`` (``<output>.tmp-<pid>-<hex>``), the output's path
  (what an error message names: the file the user asked for)."""
  folder, name = os.path.split(str(path))
  temp = temp_target(name)
  return os.path.join(folder, temp[0]) if temp else str(path)


def stale_temp(path):
  """Whether ``path`` is a local ``temp_name`` file whose process is no longer running (a
  write stopped by Ctrl-C or a kill)."""
  temp = temp_target(os.path.basename(path))
  return (temp is not None and not is_remote(path) and os.path.isfile(path)
          and not _running(temp[1]))


def _running(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # e.g. another user's process
    return True
  return True


def process_running(pid):
  """Whether process ``pid`` still runs (a temporary name's owner, see ``temp_target``)."""
  return _running(pid)


def remove_stale_temps(path):
  """Removes the ``temp_name`` files (and folders: a checkpoint written under a temporary
  folder) of ``path`` that stopped processes left (local paths).

  Returns:
    The removed paths (list of str).
  """
  if is_remote(path):
    return []
  folder = os.path.dirname(os.path.abspath(path))
  try:
    names = os.listdir(folder)
  except OSError:
    return []
  removed = []
  for name in names:
    temp = temp_target(name)
    full = os.path.join(folder, name)
    if not temp or temp[0] != os.path.basename(path):
      continue
    if stale_temp(full):
      try:
        os.remove(full)
        removed.append(full)
      except OSError:
        pass
    elif os.path.isdir(full) and not os.path.islink(full) and not _running(temp[1]):
      shutil.rmtree(full, ignore_errors=True)
      removed.append(full)
  return removed


def commit(tmp_path, path):
  """Renames a finished temporary file onto ``path``, replacing what was there."""
  if is_remote(path):
    _gfile().rename(tmp_path, path, overwrite=True)
  else:
    os.replace(tmp_path, path)


def discard(tmp_path):
  """Removes a temporary file left by a failed write, if any."""
  try:
    if is_remote(tmp_path):
      gfile = _gfile()
      if gfile.exists(tmp_path):
        gfile.remove(tmp_path)
    elif os.path.exists(tmp_path):
      os.remove(tmp_path)
  except Exception:  # pylint: disable=broad-except
    pass


def remove_stale_outputs(paths):
  """Removes the files of ``paths`` that are there (an earlier run's outputs that the files
  just written would be mixed with); returns the names of those removed. A file that cannot
  be removed is an error, as a failed write would be."""
  removed = []
  for path in paths:
    if exists(path):
      if is_remote(path):
        _gfile().remove(path)
      else:
        os.remove(path)
      removed.append(os.path.basename(path))
  return removed


def discard_folder(tmp_dir):
  """Removes a temporary folder and what is in it, if there."""
  try:
    if is_remote(tmp_dir):
      gfile = _gfile()
      if gfile.exists(tmp_dir):
        gfile.rmtree(tmp_dir)
    else:
      shutil.rmtree(tmp_dir, ignore_errors=True)
  except Exception:  # pylint: disable=broad-except
    pass


def make_parent(path):
  """Creates the directory ``path`` goes in, if missing."""
  parent = os.path.dirname(path)
  if parent and not exists(parent):
    makedirs(parent)


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Opens ``path`` for writing through a temporary file; renamed only on success. Temporary
  files of ``path`` that a stopped process left are removed first.

  Example:
    >>> with atomic_write("/tmp/x.json") as f:
    ...   _ = f.write("{}")
  """
  make_parent(path)
  remove_stale_temps(path)
  tmp = temp_name(path)
  try:
    with open_file(tmp, mode) as f:
      yield f
    faults.point("atomic_write")
    commit(tmp, path)
  except BaseException:
    discard(tmp)
    raise


def write_together(contents):
  """Writes several files as one output: ``{path: str or bytes}``, each under a temporary
  name first, renamed onto its path only once every one is whole. A failure (a full disk, an
  error, Ctrl-C) before then leaves every earlier file as it was and no temporary file; a kill
  leaves the earlier files as they were too (its temporary files go with the next write of
  their names). Only the renames themselves, moments, can be cut between (a rename that
  fails, say onto a folder made there meanwhile, leaves the files renamed before it).

  Returns:
    The paths written (list of str, in ``contents``'s order).
  """
  temps = {}  # the temporary files not yet renamed
  try:
    for path, data in contents.items():
      make_parent(path)
      remove_stale_temps(path)
      temps[path] = temp_name(path)
      with open_file(temps[path], "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    faults.point("write_together")
    for path, tmp in list(temps.items()):
      commit(tmp, path)
      del temps[path]
  except BaseException:
    for tmp in temps.values():
      discard(tmp)
    raise
  return list(contents)


def copy_atomically(source, target):
  """Copies ``source`` to ``target`` through a temporary name (``gs://`` paths work)."""
  remove_stale_temps(target)
  tmp = temp_name(target)
  try:
    if is_remote(source) or is_remote(target):
      _gfile().copy(source, tmp, overwrite=True)
    else:
      shutil.copyfile(source, tmp)
    commit(tmp, target)
  except BaseException:
    discard(tmp)
    raise


def dangling_link(path):
  """``"<path> is a link to '<target>', which does not exist"`` for a local symbolic link to
  nothing (which globs and exists() pass over as if no file were there), else None."""
  path = str(path)
  if is_remote(path) or not os.path.islink(path) or os.path.exists(path):
    return None
  return f"{path} is a link to {os.readlink(path)!r}, which does not exist"


def require_file(path, what="file", flag=None):
  """Raises a one-line ``BertTfError`` unless ``path`` is a file (or a link to one)."""
  where = f" (--{flag})" if flag else ""
  if path and (link := dangling_link(path)):
    raise BertTfError(f"{what}{where}: {link}")
  if not path or not exists(path):
    raise BertTfError(f"{what} not found{where}: {path!r}")
  if is_folder(path):
    raise BertTfError(f"{what}{where} is a folder, not a file: {path!r}")
  return path


def not_utf8(path, line, byte):
  """The one-line error of bytes that are not UTF-8: ``path:line``, ``byte`` of the line
  (counted from 1)."""
  return BertTfError(f"{path}:{line}: not valid UTF-8 (byte {byte} of the line)")


def read_utf8(path, strip_bom=True):
  """The text of ``path`` (local or ``gs://``) decoded as UTF-8, a leading byte-order mark
  (Windows Notepad's) dropped unless ``strip_bom`` is False; bytes that are not UTF-8 are a
  one-line ``BertTfError`` naming the file, line and byte."""
  with open_file(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8-sig" if strip_bom else "utf-8")
  except UnicodeDecodeError as e:
    raise not_utf8_at(path, data, e.start) from None


def not_utf8_at(path, data, offset):
  """``not_utf8`` of byte ``offset`` of ``data``, the bytes of ``path``."""
  line = data.count(b"\n", 0, offset) + 1
  return not_utf8(path, line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1)


def read_json(path):
  """The JSON value in ``path`` (UTF-8, a byte-order mark dropped): bytes that are not UTF-8
  or text that is not JSON are a one-line ``BertTfError`` naming the file and line."""
  import json  # pylint: disable=import-outside-toplevel
  try:
    return json.loads(read_utf8(path))
  except json.JSONDecodeError as e:
    raise BertTfError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
