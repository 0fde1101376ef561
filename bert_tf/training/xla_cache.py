"""XLA's compiled programs kept on disk between runs (TensorFlow's persistent XLA cache).

A BERT train step is one large XLA program: compiling it (and, on a GPU, autotuning its
kernels) is what a run spends before its first step, and every restart or resume spends it
again. TensorFlow can keep each compiled program in a folder
(``TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR``) and load it instead of compiling
when a later process compiles the same program: same HLO, same arguments, same device type.
A changed model, batch size, sequence length or flag that changes the program compiles anew
(and adds a file).

Two things stand between that and a resumed run actually loading its step, both handled here:

- TensorFlow names each entry after the traced function (``__inference__update_<uid>``), and
  the uid is a process-wide counter: a resumed run restores its checkpoint before tracing,
  which takes a few hundred uids more than a fresh run, so its step gets another name and
  misses. ``align_function_names`` moves the counter to the next multiple of 2**20 just before
  the train loop is first traced, so the same command traces the same names fresh or resumed.
- TensorFlow writes entries in place and fails the step on one it cannot read (a run killed
  while writing, a disk that filled up): ``enable`` first checks every entry's framing and
  removes the damaged ones, so they are compiled and written again.

Entries are not removed otherwise: a folder grows by one entry per program (tens of MB for a
BERT-Large step on a GPU). Give each concurrent run its own folder (the multi-worker tasks of
one TF_CONFIG get subfolders of their own by themselves).
"""

import json
import os
import re

import tensorflow as tf

from bert_tf.errors import BertTfError

FLAG = "--tf_xla_persistent_cache_directory"
# TensorFlow's file names: xla_compile_cache__<signature>__<program>__<device type>.pb
_ENTRY = re.compile(r"^xla_compile_cache__(\d+)__(\d+)__(\w+)\.pb$")
_ALIGN = 1 << 20


def configured_directory(environ=None):
  """The folder TF_XLA_FLAGS names for the cache, or None."""
  flags = (os.environ if environ is None else environ).get("TF_XLA_FLAGS", "")
  match = re.search(re.escape(FLAG) + r"=(\S+)", flags)
  return match.group(1) if match else None


def task_directory(directory, environ=None):
  """``directory``, or its ``<type>-<index>`` subfolder for a task of TF_CONFIG's cluster
  (tasks on one machine would otherwise write and read the same files at once)."""
  text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
  try:
    task = json.loads(text)["task"] if text else None
    name = f"{task['type']}-{int(task['index'])}" if task else None
  except (ValueError, KeyError, TypeError):
    name = None  # an unusable TF_CONFIG is preflight's to name
  return os.path.join(directory, name) if name else directory


def enable(directory, progress=None, environ=None):
  """Keeps this process's XLA programs in ``directory`` (its task's subfolder under a
  multi-worker TF_CONFIG) and loads them from there when they are compiled again; returns
  the folder used. Damaged entries are removed first, each named through ``progress``.

  Call it before the process compiles its first XLA program: TensorFlow reads TF_XLA_FLAGS
  once, at that first compile.
  """
  environ = os.environ if environ is None else environ
  directory = task_directory(directory, environ)
  if tf.io.gfile.exists(directory) and not tf.io.gfile.isdir(directory):
    raise BertTfError(f"--xla_cache_dir {directory} is a file, not a folder")
  given = configured_directory(environ)
  if given is not None and given != directory:
    raise BertTfError(f"--xla_cache_dir {directory}: TF_XLA_FLAGS already names another XLA "
                      f"cache folder, {given}")
  if given is None and tensorflow_started():
    raise BertTfError(f"--xla_cache_dir {directory}: TensorFlow has started already and read "
                      "TF_XLA_FLAGS; enable the XLA cache first")
  for path in damaged_entries(directory):
    tf.io.gfile.remove(path)
    if progress:
      progress(f"removed a damaged XLA cache entry (compiled again): {path}")
  if given is None:
    environ["TF_XLA_FLAGS"] = tf_xla_flags_with(directory, environ)
  return directory


def tf_xla_flags_with(directory, environ=None):
  """``environ``'s TF_XLA_FLAGS with the cache folder ``directory`` added."""
  flags = (os.environ if environ is None else environ).get("TF_XLA_FLAGS", "")
  return f"{flags} {FLAG}={directory}".strip()


def tensorflow_started():
  """Whether TensorFlow's runtime has started (its devices made), which is when it reads
  TF_XLA_FLAGS."""
  from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel
  return bool(getattr(context.context(), "_initialized", False))


def damaged_entries(directory):
  """The entries of ``directory`` that TensorFlow could not load: see ``entry_is_whole``."""
  if not tf.io.gfile.isdir(directory):
    return []
  return [os.path.join(directory, name) for name in sorted(tf.io.gfile.listdir(directory))
          if _ENTRY.match(name) and not entry_is_whole(os.path.join(directory, name))]


def entry_is_whole(path):
  """Whether the file at ``path`` holds one whole ``XlaSerializedCacheEntry``
  (tensorflow/compiler/jit/xla_compilation_cache.proto): a key (field 1) whose signature
  and program fingerprints and device type are the file name's, the program's HLO (field 2)
  and a non-empty executable (field 3), each field's length within the file. A file cut
  anywhere fails: every cut lands inside a field or drops a later one. Only the framing and
  the key are read; the HLO and the executable are skipped over."""
  match = _ENTRY.match(os.path.basename(path))
  if not match:
    return False
  with tf.io.gfile.GFile(path, "rb") as f:
    size = f.size()
    fields = {}
    offset = 0
    while offset < size:
      f.seek(offset)
      header = f.read(min(20, size - offset))
      parsed = _field_header(header)
      if parsed is None:
        return False
      number, length, used = parsed
      offset += used
      if offset + length > size:
        return False
      if number == 1:
        f.seek(offset)
        fields[1] = f.read(length)
      else:
        fields[number] = length
      offset += length
  if fields.get(2) is None or not fields.get(3) or fields.get(1) is None:
    return False
  return _key_fields(fields[1]) == (int(match.group(1)), int(match.group(2)), match.group(3))


def _varint(data, offset):
  """(value, next offset) of the varint at ``offset``, or None where it runs off the end."""
  value = shift = 0
  while offset < len(data) and shift < 64:
    byte = data[offset]
    value |= (byte & 0x7F) << shift
    offset += 1
    if not byte & 0x80:
      return value, offset
    shift += 7
  return None


def _field_header(data):
  """(field number, payload length, header bytes) of a length-delimited field at the start
  of ``data``, or None (another wire type, or cut)."""
  tag = _varint(data, 0)
  if tag is None or tag[0] & 7 != 2:
    return None
  length = _varint(data, tag[1])
  if length is None:
    return None
  return tag[0] >> 3, length[0], length[1]


def _key_fields(data):
  """(signature fingerprint, program fingerprint, device type) of a serialized
  ``XlaSerializedCacheKey``, or None where it does not parse."""
  values, offset = {}, 0
  while offset < len(data):
    tag = _varint(data, offset)
    if tag is None:
      return None
    number, wire, offset = tag[0] >> 3, tag[0] & 7, tag[1]
    if wire == 0:
      value = _varint(data, offset)
      if value is None:
        return None
      values[number], offset = value
    elif wire == 2:
      length = _varint(data, offset)
      if length is None or length[1] + length[0] > len(data):
        return None
      values[number] = data[length[1]:length[1] + length[0]]
      offset = length[1] + length[0]
    else:
      return None
  try:
    return values[1], values[2], values[3].decode()
  except (KeyError, AttributeError, UnicodeDecodeError):
    return None


def align_function_names():
  """Moves TensorFlow's uid counter, which numbers traced functions, to the next multiple of
  2**20 where a cache folder is configured (no-op otherwise): called just before the train
  loop is first traced, the same command gives its functions the same names whatever ran
  before (a checkpoint restored or not), so a resumed run finds the entries a fresh one wrote.
  """
  if configured_directory() is None:
    return
  from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
  target = (ops.uid() // _ALIGN + 1) * _ALIGN
  while ops.uid() < target - 1:
    pass
