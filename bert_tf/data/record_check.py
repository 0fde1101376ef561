"""Damaged TFRecord files found and named: which file, which byte, which record.

TensorFlow's reader stops at a damaged record with a ``DataLossError`` ("corrupted record at
2933") that names no file, from deep inside a training step; the same command then fails again
at the same place after every resume. Here the framing of ``bert_tf.data.tfrecord``
(uint64 length | masked CRC-32C of it | data | masked CRC-32C of data) is checked without
TensorFlow, so that a damaged file is one line:

  data-3.tfrecord: damaged TFRecord at byte 2933 (record 23): the data's CRC-32C does not
  match; regenerate this file or leave it out of --input_file

``scan_file`` walks a file's records (lengths in Python, one unpack each; the CRCs of a batch
of records together in numpy, ``tfrecord.crc32c_spans``) and returns the first damage;
``record_at`` checks the one record at a byte offset (what TensorFlow's error names: finding
the file it meant costs one read per input file); ``naming_damaged_records`` turns a
``DataLossError`` raised inside its block into that one line. A ``.gz`` file is checked after
decompression (offsets in the decompressed stream); a broken GZIP stream is damage too.

No TensorFlow import here (data_prep/check_tfrecords.py runs without it); remote paths
(``gs://``) are read through ``fileio``.
"""

import contextlib
import dataclasses
import gzip
import os
import re
import struct
import zlib

import numpy as np

from bert_tf import fileio
from bert_tf.data import tfrecord
from bert_tf.errors import BertTfError

_HEAD = 12  # uint64 length + uint32 masked CRC of the length
_FOOT = 4   # uint32 masked CRC of the data
_CRC_BATCH_BYTES = 32 << 20  # records whose CRCs are computed in one numpy pass
ADVICE = "regenerate this file or leave it out of --input_file"


@dataclasses.dataclass
class Damage:
  """The first damaged record of a file: ``offset`` is the byte where its frame starts
  (in the decompressed stream for ``.gz``), ``record`` its index counting from 0."""
  path: str
  offset: int
  record: int
  reason: str

  def __str__(self):
    where = "decompressed byte" if self.path.endswith(".gz") else "byte"
    return (f"{self.path}: damaged TFRecord at {where} {self.offset} (record {self.record}): "
            f"{self.reason}")


@dataclasses.dataclass
class ScanResult:
  path: str
  records: int   # whole, valid records before the first damage (all of them if none)
  size: int      # bytes scanned (decompressed for .gz)
  damage: Damage = None


def _masked(crcs):
  return tfrecord.mask(crcs).astype(np.uint32)


def _contents(path):
  """(uint8 array of the file's framed bytes, GZIP error or None). Local plain files are
  memory-mapped (no copy); ``.gz`` is decompressed up to where its stream breaks."""
  if path.endswith(".gz"):
    out, error = [], None
    with fileio.open_file(path, "rb") as raw:
      try:
        with gzip.GzipFile(fileobj=raw) as f:
          while True:
            block = f.read(1 << 24)
            if not block:
              break
            out.append(block)
      except (OSError, EOFError, zlib.error) as e:
        error = f"the GZIP stream is damaged ({e})"
    return np.frombuffer(b"".join(out), np.uint8), error
  if not fileio.is_remote(path):
    if os.path.getsize(path) == 0:
      return np.zeros([0], np.uint8), None
    return np.memmap(path, np.uint8, mode="r"), None
  with fileio.open_file(path, "rb") as f:
    return np.frombuffer(f.read(), np.uint8), None


def _walk(buf):
  """Frame starts and lengths, walking the length fields: ([R] int64 offsets, [R] int64 data
  lengths, the offset where the walk stopped). The walk stops at the end of the bytes or at
  the first frame that does not fit in them (truncated, or a damaged length field: the
  header CRCs, checked afterwards, tell which)."""
  size = buf.size
  view = memoryview(buf)
  unpack = struct.Struct("<Q").unpack_from
  offsets, lengths = [], []
  offset = 0
  while offset < size:
    if size - offset < _HEAD:
      break
    (length,) = unpack(view, offset)
    offsets.append(offset)
    lengths.append(length)
    if length > size - offset - _HEAD - _FOOT:
      break
    offset += _HEAD + length + _FOOT
  # A damaged length field can hold any uint64: kept below 2**62 so that sums stay int64.
  lengths = np.minimum(np.asarray(lengths, np.uint64), np.uint64(1 << 62)).astype(np.int64)
  return np.asarray(offsets, np.int64), lengths, offset


def _first_bad_heads(buf, offsets):
  """Index of the first frame whose length field fails its CRC, or None."""
  if not offsets.size:
    return None
  heads = np.lib.stride_tricks.sliding_window_view(buf, _HEAD)[offsets]  # [R, 12]
  want = np.ascontiguousarray(heads[:, 8:12]).view("<u4").ravel()
  got = _masked(tfrecord.crc32c_rows(heads, np.full([offsets.size], 8)))
  bad = np.flatnonzero(got != want)
  return int(bad[0]) if bad.size else None


def _first_bad_data(buf, offsets, lengths):
  """Index of the first whole frame whose data fails its CRC, or None (batches of records,
  each batch's bytes copied once)."""
  start = 0
  while start < offsets.size:
    first = int(offsets[start])
    # A batch of about _CRC_BATCH_BYTES (at least one record).
    end = max(start + 1, int(np.searchsorted(offsets, first + _CRC_BATCH_BYTES, "right")))
    last = int(offsets[end - 1] + _HEAD + lengths[end - 1] + _FOOT)
    longest = int(lengths[start:end].max())
    flat = np.concatenate([np.asarray(buf[first:last]), np.zeros([longest + 8], np.uint8)])
    starts = offsets[start:end] - first + _HEAD
    got = _masked(tfrecord.crc32c_spans(flat, starts, lengths[start:end]))
    feet = starts + lengths[start:end]
    want = np.lib.stride_tricks.sliding_window_view(flat, _FOOT)[feet]
    want = np.ascontiguousarray(want).view("<u4").ravel()
    bad = np.flatnonzero(got != want)
    if bad.size:
      return start + int(bad[0])
    start = end
  return None


def scan_file(path):
  """Checks every record of the TFRecord file ``path`` (length CRC, data CRC, whole frames):
  a ``ScanResult`` whose ``damage`` is the first damaged record, or None."""
  buf, gzip_error = _contents(path)
  offsets, lengths, stop = _walk(buf)
  size = int(buf.size)
  bad_head = _first_bad_heads(buf, offsets)
  whole = int(np.sum(offsets + _HEAD + lengths + _FOOT <= size))  # frames inside the bytes
  if bad_head is not None:
    whole = min(whole, bad_head)
  bad_data = _first_bad_data(buf, offsets[:whole], lengths[:whole])
  damage = None
  if bad_data is not None:
    damage = Damage(path, int(offsets[bad_data]), bad_data,
                    "the data's CRC-32C does not match (a changed byte)")
  elif bad_head is not None:
    damage = Damage(path, int(offsets[bad_head]), bad_head,
                    "the length field's CRC-32C does not match (a changed byte, or not a "
                    "TFRecord file)")
  elif stop < size or whole < offsets.size:
    at = int(offsets[whole]) if whole < offsets.size else stop
    need = int(_HEAD + lengths[whole] + _FOOT) if whole < offsets.size else _HEAD
    damage = Damage(path, at, whole, f"the file ends inside the record (cut short: it needs "
                    f"{need} bytes, {size - at} are left)")
  elif gzip_error:
    damage = Damage(path, size, whole, gzip_error)
  records = damage.record if damage else whole
  return ScanResult(path, records, size, damage)


def record_at(path, offset):
  """The ``Damage`` of the record whose frame starts at byte ``offset`` of ``path``, or None
  when that record is whole and sound (or ``offset`` is past the end). Reads that record only
  (a plain file; a ``.gz`` is decompressed)."""
  buf, gzip_error = _contents(path)
  if offset >= buf.size:
    return None
  # The record's index is unknown without a walk; found by one below when damaged.
  piece = np.asarray(buf[offset:offset + _HEAD])
  suspect = piece.size < _HEAD
  if not suspect:
    (length,) = struct.unpack("<Q", piece[:8].tobytes())
    head_ok = _first_bad_heads(piece, np.zeros([1], np.int64)) is None
    suspect = not head_ok or length > buf.size - offset - _HEAD - _FOOT
    if not suspect:
      frame = np.asarray(buf[offset + _HEAD:offset + _HEAD + length + _FOOT])
      flat = np.concatenate([frame, np.zeros([length + 8], np.uint8)])
      got = _masked(tfrecord.crc32c_spans(flat, np.zeros([1], np.int64), [length]))[0]
      suspect = got != frame[length:length + _FOOT].view("<u4")[0]
  if not suspect:
    return None
  damage = scan_file(path).damage
  return damage if damage is not None and damage.offset == offset else None


def _quietly(function, path, *args):
  """``function(path, *args)``, or None when ``path`` cannot be read (gone, unreadable): the
  search for the damaged file goes on with the others."""
  try:
    return function(path, *args)
  except OSError:
    return None


_TF_OFFSET = re.compile(r"(?:corrupted|truncated) record at (\d+)")


def describe_data_loss(files, message, advice=ADVICE):
  """One line naming the damaged file among ``files`` for TensorFlow's ``DataLossError``
  ``message``: the file whose record at the byte offset the message names is damaged (one
  record read per file), else the first damage a full scan of the files finds, else
  TensorFlow's line naming the record; None when the error is not about a record."""
  match = _TF_OFFSET.search(message or "")
  if match:
    # TensorFlow names the frame's start (a bad length field, a cut) or its data's (a bad
    # data CRC).
    at = int(match.group(1))
    for path in files:
      for offset in (at, at - _HEAD):
        damage = _quietly(record_at, path, offset) if offset >= 0 else None
        if damage is not None:
          return f"{damage}; {advice}"
  for path in files:
    result = _quietly(scan_file, path)
    if result is not None and result.damage is not None:
      return f"{result.damage}; {advice}"
  if not match:  # not a TFRecord's error (a damaged checkpoint...): not ours to name
    return None
  first = next((line.strip() for line in message.splitlines() if _TF_OFFSET.search(line)), "")
  first = re.sub(r"^\{\{.*?\}\}\s*|\s*\[Op:.*$", "", first)
  names = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
  return f"damaged input data in {names}: {first}"


@contextlib.contextmanager
def naming_damaged_records(files, advice=ADVICE):
  """A ``DataLossError`` inside the block (TensorFlow reading ``files``) becomes a one-line
  ``BertTfError`` naming the file and byte offset (``describe_data_loss``), then ``advice``.
  Its start is the fault point ``records_read`` (tests: the files are damaged there)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from bert_tf import faults  # pylint: disable=import-outside-toplevel
  faults.point("records_read")
  try:
    yield
  except tf.errors.DataLossError as e:
    line = describe_data_loss(list(files), e.message, advice)
    if line is None:
      raise
    raise BertTfError(line) from None


CACHE_ADVICE = "the next run writes it again"


def reusable(path):
  """Whether a TFRecord a script wrote earlier as a cache (run_classifier's and run_squad's
  ``train.tf_record``) is whole and sound; a damaged one is a one-line warning, and the
  caller writes it again (else the same run would fail again after every resume)."""
  result = _quietly(scan_file, path)
  if result is not None and result.damage is None:
    return True
  from absl import logging  # pylint: disable=import-outside-toplevel
  logging.warning("%s: writing it again", result.damage if result else f"{path}: unreadable")
  return False


def check_files(files, progress=None):
  """Scans every file in ``files``; raises a one-line ``BertTfError`` at the first damaged
  record. Returns the ``ScanResult``s. ``progress`` (optional) gets one line per file."""
  results = []
  for path in files:
    result = scan_file(path)
    if result.damage is not None:
      raise BertTfError(f"{result.damage}; {ADVICE}")
    if progress:
      progress(f"{path}: {result.records} records, every CRC matches")
    results.append(result)
  return results


def expand_patterns(patterns):
  """Comma-separated string or list of files/globs -> the files, each pattern's sorted
  (local globs without TensorFlow), as run_pretraining reads them: a glob leaves out the
  ``fileio.temp_name`` files of a data preparation running or killed (training never reads
  them). A pattern that matches nothing, or no pattern, is a ``BertTfError``."""
  import glob  # pylint: disable=import-outside-toplevel
  if isinstance(patterns, str):
    patterns = patterns.split(",")
  patterns = [p.strip() for p in patterns if p.strip()]
  if not patterns:
    raise BertTfError("--input_file names no file")
  files = []
  for pattern in patterns:
    if fileio.is_remote(pattern):
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      matched = tf.io.gfile.glob(pattern)
    else:
      matched = [p for p in glob.glob(pattern) if os.path.isfile(p)]
    if fileio.glob_chars(pattern):
      matched = [p for p in matched if fileio.temp_target(os.path.basename(p)) is None]
    if not matched and (link := fileio.dangling_link(pattern)):
      raise BertTfError(f"--input_file: {link}")
    if not matched:
      folder = not fileio.is_remote(pattern) and os.path.isdir(pattern)
      raise BertTfError(f"no input files match {pattern!r} (--input_file)" +
                        (": a folder; give its files, e.g. " +
                         repr(os.path.join(pattern, "*")) if folder else ""))
    files.extend(sorted(matched))
  return files
