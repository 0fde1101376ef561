"""TFRecord files written without TensorFlow: the framing and its CRC32C in numpy.

A TFRecord file is a sequence of records, each framed as
  uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data |
  uint32 masked_crc32c(data)
with masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32), c the CRC-32C
(Castagnoli) of x. ``tf.io.TFRecordWriter`` writes exactly these bytes (tests compare);
``create_pretraining_data`` uses this module so that it never imports TensorFlow (about 5 s of
CPU and 700 MB of memory per process).

The CRCs of a batch of records are computed together: rows sorted by length, four bytes per
step (slicing-by-4 tables) for the rows that still have four, then the last 0-3 bytes.
GZIP files are standard gzip streams (what TensorFlow's ``GZIP`` option reads and writes).

Shape legend: B records in a batch, W 32-bit words of the longest.
"""

import gzip
import io
import itertools
import os
import shutil

import numpy as np

from bert_tf import faults
from bert_tf import fileio

_POLY = 0x82F63B78  # CRC-32C, reflected.
_MASK_DELTA = 0xA282EAD8
_BATCH = 8192


def _tables():
  t0 = np.arange(256, dtype=np.uint32)
  for _ in range(8):
    t0 = np.where(t0 & 1, (t0 >> 1) ^ np.uint32(_POLY), t0 >> 1).astype(np.uint32)
  tables = [t0]
  for _ in range(3):
    prev = tables[-1]
    tables.append((prev >> 8) ^ t0[prev & 0xFF])
  return tables  # T0..T3: T_k[i] is byte i followed by k zero bytes.


_T0, _T1, _T2, _T3 = _tables()
_I = np.arange(1 << 16, dtype=np.uint32)
# Four bytes x (little-endian) advance the CRC as _LO[x & 0xFFFF] ^ _HI[x >> 16].
_LO = _T3[_I & 0xFF] ^ _T2[_I >> 8]
_HI = _T1[_I & 0xFF] ^ _T0[_I >> 8]
del _I


def crc32c(data, crc=0):
  """CRC-32C of ``data`` (bytes), one byte at a time (for checks and short inputs)."""
  crc ^= 0xFFFFFFFF
  table = _T0.tolist()
  for byte in data:
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  return crc ^ 0xFFFFFFFF


def mask(crc):
  """TFRecord's masked CRC (numpy uint32 arrays or ints)."""
  crc = np.asarray(crc, np.uint32)
  return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def crc32c_rows(data, lengths):
  """CRC-32C of each row's first ``lengths[b]`` bytes: [B] uint32.

  Args:
    data: [B, N] uint8, N >= max(lengths); the bytes past a row's length are ignored.
    lengths: [B] ints.
  """
  data = np.asarray(data, np.uint8)
  B, N = data.shape
  flat = np.concatenate([data.ravel(), np.zeros([N + 4], np.uint8)])
  return crc32c_spans(flat, np.arange(B, dtype=np.int64) * N, lengths)


def crc32c_spans(flat, starts, lengths):
  """CRC-32C of ``flat[starts[b]:starts[b] + lengths[b]]`` for every b: [B] uint32.

  Args:
    flat: [F] uint8 with at least max(lengths) + 4 readable bytes after every start (the
      bytes past a span are read but ignored).
    starts, lengths: [B] ints.
  """
  lengths = np.asarray(lengths, np.int64)
  B = lengths.size
  crc = np.full([B], 0xFFFFFFFF, np.uint32)
  if B == 0:
    return crc
  order = np.argsort(-lengths, kind="stable")                          # longest first
  sorted_len = lengths[order]
  n_words = sorted_len // 4                                            # [B]
  W = int(n_words[0])
  # Row b's bytes, sorted by length: windows of flat (a copy of W + 1 words per row).
  width = 4 * W + 4
  rows = np.lib.stride_tricks.sliding_window_view(flat, width)[
      np.asarray(starts, np.int64)[order]]                             # [B, 4W + 4]
  if W:
    words = np.ascontiguousarray(rows[:, :4 * W].view("<u4").T)       # [W, B]
    # Rows with more than s whole words: a prefix (sorted by length).
    active = np.searchsorted(-n_words, -np.arange(W), side="left")    # [W]
    for s in range(W):
      a = int(active[s])
      if a == B:
        x = crc ^ words[s]
        crc = _LO[x & 0xFFFF] ^ _HI[x >> 16]
      else:
        x = crc[:a] ^ words[s, :a]
        crc[:a] = _LO[x & 0xFFFF] ^ _HI[x >> 16]
  tail = sorted_len - 4 * n_words                                      # [B] 0..3 bytes
  for t in range(3):
    r = np.flatnonzero(tail > t)
    if r.size:
      byte = rows[r, 4 * n_words[r] + t]
      c = crc[r]
      crc[r] = _T0[(c ^ byte) & 0xFF] ^ (c >> 8)
  crc ^= np.uint32(0xFFFFFFFF)
  out = np.empty_like(crc)
  out[order] = crc
  return out


def frame_heads(lengths):
  """The 12 bytes before each record's data: uint64 length, masked CRC of it. [B, 12] uint8."""
  lengths = np.asarray(lengths, np.int64)
  B = lengths.size
  head = np.zeros([B, 12], np.uint8)
  head[:, :8] = lengths.astype("<u8").view(np.uint8).reshape(B, 8)
  head[:, 8:] = mask(crc32c_rows(head, np.full([B], 8))).astype("<u4").view(
      np.uint8).reshape(B, 4)
  return head


def frame(records):
  """The TFRecord bytes of ``records`` (a list of bytes), framed and end to end."""
  if not records:
    return b""
  lengths = np.fromiter(map(len, records), np.int64, len(records))     # [B]
  B, N = lengths.size, int(lengths.max())
  flat = np.frombuffer(b"".join(records) + bytes(N + 8), np.uint8)    # records end to end
  starts = np.cumsum(lengths) - lengths                                # [B]
  data_crc = mask(crc32c_spans(flat, starts, lengths)).astype("<u4")   # [B]
  head = frame_heads(lengths).tobytes()
  foot = data_crc.tobytes()
  heads = [head[i:i + 12] for i in range(0, 12 * B, 12)]
  feet = [foot[i:i + 4] for i in range(0, 4 * B, 4)]
  return b"".join(itertools.chain.from_iterable(zip(heads, records, feet)))


def gzip_member(fileobj):
  """A GZIP member written into ``fileobj``, deterministic (no time, no name); close it to
  end the member. Members written one after another are one GZIP stream to its readers
  (TensorFlow's ``GZIP`` option included)."""
  return gzip.GzipFile(fileobj=fileobj, mode="wb", compresslevel=6, mtime=0, filename="")


class TFRecordWriter:
  """Writes framed records to ``path`` (local or ``gs://``), optionally GZIP-compressed.

  Like ``tf.io.TFRecordWriter``; records are written in batches (``write_all``).
  """

  def __init__(self, path, gzip_compress=False):
    self._path = path
    self._file = fileio.open_file(path, "wb")
    limit = faults.full_disk_after()
    if limit is not None:  # A test's full disk (off unless BERT_TF_FAULT asks for it).
      self._file = faults.FullDisk(self._file, path, limit)
    self._gzip_compress = gzip_compress
    self._member = None  # The GZIP member being written.
    self._members = 0

  @property
  def _stream(self):
    if not self._gzip_compress:
      return self._file
    if self._member is None:
      self._member = gzip_member(self._file)
      self._members += 1
    return self._member

  def _end_member(self):
    if self._member is not None:
      self._member.close()  # Ends the member; leaves the file open.
      self._member = None

  def _write(self, data):
    try:
      self._stream.write(data)
    except OSError as e:
      if e.filename is None:  # write() names no file (a full disk): say which one it was
        raise OSError(e.errno, e.strerror, self._path) from None
      raise

  def write_all(self, records):
    for start in range(0, len(records), _BATCH):
      self._write(frame(records[start:start + _BATCH]))

  def write(self, record):
    self._write(frame([record]))

  def write_framed(self, data):
    """Writes bytes that are already framed records (``frame``'s output)."""
    self._write(data)

  def write_file(self, path, compressed=False):
    """Appends the local file ``path``: framed records, or, with ``compressed`` (GZIP writers
    only), GZIP members of framed records, which are appended as they are. Into a plain local
    file the kernel copies (``os.copy_file_range``), never through this process."""
    if compressed:
      if not self._gzip_compress:
        raise ValueError(f"{path}: compressed records for a writer without GZIP")
      self._end_member()
      self._members += 1
      _append(path, self._file)
    elif self._gzip_compress:
      with open(path, "rb") as source:
        shutil.copyfileobj(source, self._stream, 1 << 22)
    else:
      _append(path, self._file)

  def close(self):
    if self._gzip_compress and not self._members:
      self._stream  # pylint: disable=pointless-statement  # An empty member: a GZIP file.
    self._end_member()
    self._file.close()


def _append(path, target):
  """Appends the file ``path`` to the open binary file ``target``: in the kernel where it can
  (``os.copy_file_range``, local files), else through a buffer."""
  target.flush()
  with open(path, "rb") as source:
    if hasattr(os, "copy_file_range") and hasattr(target, "fileno"):
      size = os.fstat(source.fileno()).st_size
      try:
        while size > 0:
          copied = os.copy_file_range(source.fileno(), target.fileno(), size)
          if copied == 0:
            break
          size -= copied
      except (OSError, io.UnsupportedOperation):  # Not here: copy what is left by hand.
        pass
      if size == 0:
        return
    shutil.copyfileobj(source, target, 1 << 22)
