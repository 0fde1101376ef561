"""Writing an export folder whole, and replacing a previous export without a moment of loss:
the one swap that the SavedModel exports (``saved_models.write_atomically``), the Hugging
Face export (``hugging_face.export_hugging_face``) and the Google export
(``google.export_google``) go through.

An export of ``<target>`` is written into ``<target>.tmp-<pid>-<8 hex>`` (``fileio.temp_name``)
beside it; when whole, the previous export (if any) is renamed aside to
``<target>.previous.tmp-<pid>-<8 hex>``, the new one renamed in, and the previous one removed.
At no moment is ``<target>`` a mix of both. A kill between the two renames leaves the previous
export whole under the aside name, and the next export of ``<target>`` (or its check) puts it
back first (``restore_interrupted_overwrite``); an exception there (Ctrl-C) puts it back at
once. Which folders count as a previous export is the caller's ``is_previous`` (a SavedModel,
a Hugging Face folder): an aside folder that is not one (set aside by an export of another
kind) is never deleted.
"""

import os

import tensorflow as tf
from absl import logging

from bert_tf import faults, fileio
from bert_tf.errors import BertTfError

PREVIOUS = ".previous"  # <target>.previous.tmp-<pid>-<8 hex>: a previous export set aside


def _is_empty(path):
  return not tf.io.gfile.listdir(path)


def _another_running_process(path):
  """The pid of the running process (not this one) whose temporary folder ``path`` is, when it
  is local; else None. Such a folder is an export still being written (or swapped): it is not
  a leftover. On gs:// the writer may be another host, so its pid tells nothing."""
  temp = fileio.temp_target(os.path.basename(path))
  if temp is None or fileio.is_remote(path) or temp[1] == os.getpid():
    return None
  return temp[1] if fileio.process_running(temp[1]) else None


def leftovers(target):
  """{path: True if it is a previous export set aside, False if a new export being written}
  of the temporary folders an export of ``target`` leaves beside it, sorted by name."""
  target = os.path.normpath(target)
  parent = os.path.dirname(target) or "."
  try:
    names = tf.io.gfile.listdir(parent)
  except tf.errors.NotFoundError:
    return {}
  base = os.path.basename(target)
  found = {}
  for name in sorted(n.rstrip("/") for n in names):  # gs:// lists "dir/"
    path = os.path.join(parent, name)
    temp = fileio.temp_target(name)
    if temp and temp[0] in (base, base + PREVIOUS) and tf.io.gfile.isdir(path):
      found[path] = temp[0] == base + PREVIOUS
  return found


def restore_interrupted_overwrite(target, is_previous):
  """When ``target`` is missing but a previous export that an overwrite renamed aside is there
  (``is_previous(path)`` recognises it: the overwrite was killed before its new export was
  renamed in; not one whose process still runs, which is between its two renames), renames it
  back, with a warning. Returns the folder it came from, or None."""
  target = os.path.normpath(target)
  if tf.io.gfile.exists(target):
    return None
  for path, aside in leftovers(target).items():
    if aside and is_previous(path) and _another_running_process(path) is None:
      tf.io.gfile.rename(path, target)
      logging.warning("restored the previous export %s from %s: an overwrite was stopped "
                      "before its new export was in place", target, path)
      return path
  return None


def remove_leftovers(target, is_previous):
  """Removes what an export of ``target`` killed half-way left beside it: the new export being
  written (``<target>.tmp-<pid>-<8 hex>``), and a previous export set aside
  (``<target>.previous.tmp-<pid>-<8 hex>``) once ``target`` is in place (first put back if
  ``target`` is missing, ``restore_interrupted_overwrite``). An aside folder that
  ``is_previous`` does not recognise and that is not empty is left, with a warning; so is a
  local folder whose process still runs (another export of ``target`` under way); other names
  (a user's) are left alone.

  Returns:
    The removed paths (list of str, sorted).
  """
  target = os.path.normpath(target)
  restore_interrupted_overwrite(target, is_previous)
  removed = []
  for path, aside in leftovers(target).items():
    pid = _another_running_process(path)
    if pid is not None:
      logging.warning("left %s as it is: process %d, still running, is writing it (another "
                      "export of %s)", path, pid, target)
      continue
    if aside and not (is_previous(path) or _is_empty(path)):
      logging.warning("left %s as it is: a previous export of another kind that an overwrite "
                      "of %s set aside", path, target)
      continue
    tf.io.gfile.rmtree(path)
    removed.append(path)
  return sorted(removed)


def check_not_around_working_folder(target, flag):
  """Raises a one-line ``BertTfError`` if ``target`` is the working folder or holds it: an
  export replaces its folder whole (a new folder renamed in its place), which the working
  folder cannot be (its temporary sibling would be named inside it)."""
  if fileio.is_remote(target):
    return
  folder = os.path.realpath(os.path.abspath(target))
  here = os.path.realpath(os.getcwd())
  if here == folder or here.startswith(folder.rstrip("/") + "/"):
    where = "the working folder" if here == folder else "a folder holding the working folder"
    raise BertTfError(f"{flag} {target!r} is {where}: an export replaces its folder whole; "
                      f"give it a folder of its own, e.g. {os.path.join(target, 'export')!r}")


def write_atomically(target, write, *, check, is_previous):
  """Calls ``write(tmp_dir)``, then swaps tmp_dir in as ``target`` (see the module docstring).

  Args:
    target: the export folder (missing, empty, or a previous export that ``check`` allows to
      be replaced).
    write: ``write(tmp_dir)`` writes the whole export into the new folder ``tmp_dir``.
    check: ``check(target)`` raises (a one-line ``BertTfError``) unless replacing what is at
      ``target`` loses nothing the user had; called before ``write`` (after an interrupted
      overwrite is put back) and again just before the swap (nothing new appeared meanwhile).
    is_previous: ``is_previous(path)``: folder ``path`` is a previous export of this kind.
  Returns:
    ``target``, normalised.

  A failed ``write`` leaves everything as it was; the temporary folders of a killed one are
  removed by the next call (``remove_leftovers``).
  """
  restore_interrupted_overwrite(target, is_previous)
  check(target)
  normalised = os.path.normpath(target)
  # Absolute: the temporary sibling of "." would be named inside it.
  folder = normalised if fileio.is_remote(target) else os.path.abspath(normalised)
  parent = os.path.dirname(folder)
  if parent:
    tf.io.gfile.makedirs(parent)
  remove_leftovers(folder, is_previous)
  tmp = fileio.temp_name(folder)
  old = None
  try:
    write(tmp)
    check(target)
    if tf.io.gfile.exists(folder):
      old = fileio.temp_name(folder + PREVIOUS)
      tf.io.gfile.rename(folder, old)
      faults.point("export_swap")  # tests: a kill between the two renames
    tf.io.gfile.rename(tmp, folder)
  except BaseException:
    if old is not None and not tf.io.gfile.exists(folder):
      try:  # Stopped between the renames: the previous export goes back at once.
        tf.io.gfile.rename(old, folder)
      except Exception:  # pylint: disable=broad-except
        pass  # It stays aside, whole; the next export puts it back.
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)
    raise
  if old is not None:
    tf.io.gfile.rmtree(old)
  return normalised
