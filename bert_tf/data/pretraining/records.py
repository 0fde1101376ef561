"""Writing: instances -> serialized ``tf.train.Example`` records -> TFRecord files.

Mirrors ``write_instance_to_example_files`` of Google's create_pretraining_data.py (with its
``create_int_feature`` / ``create_float_feature``): the features of each instance, padded to
max_seq_length / max_predictions_per_seq, and the records written round-robin over the output
files. The records are serialized by hand, a batch at a time (``RecordEncoder``), and written
to temporary names renamed when whole (``RoundRobinWriter``).

Shape legend (per record):
  L = max_seq_length, P = max_predictions_per_seq, n = real tokens ([CLS] A [SEP] B [SEP])
"""

import itertools
import struct

import numpy as np

from bert_tf import faults
from bert_tf import fileio
from bert_tf.data import features as features_lib
from bert_tf.data import tfrecord
from bert_tf.errors import BertTfError


def _varint(value):
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    if value:
      out.append(byte | 0x80)
    else:
      out.append(byte)
      return bytes(out)


class _VarintTable:
  """Protobuf varints of the ints in [0, size) (size < 2**21), looked up for whole arrays."""

  def __init__(self, size):
    v = np.arange(max(size, 1), dtype=np.uint32)
    # Each int's (up to three) varint bytes as one little-endian word, and which are used.
    self.packed = ((v & 0x7F) | ((v >= 1 << 7) << 7) |
                   ((((v >> 7) & 0x7F) | ((v >= 1 << 14) << 7)) << 8) |
                   (((v >> 14) & 0x7F) << 16)).astype("<u4")                # [size]
    self.size = (1 + (v >= 1 << 7) + (v >= 1 << 14)).astype(np.uint8)      # [size]
    self.used = np.arange(4)[None, :] < self.size[:, None]                 # [size, 4]

  def encode(self, values, row_start):
    """Ints of rows laid end to end -> (their varints as bytes, [B] int64 byte size of each row).

    Args:
      values: [T] ints; row b is values[row_start[b]:row_start[b + 1]] (rows not empty).
      row_start: [B] increasing offsets, row_start[0] == 0.
    """
    used = self.used.take(values, axis=0).ravel()                       # [4T]
    data = self.packed.take(values).view(np.uint8).compress(used).tobytes()
    return data, np.add.reduceat(self.size.take(values), row_start, dtype=np.int64)


class RecordEncoder:
  """Serializes pretraining records as ``tf.train.Example`` bytes, by hand, a batch at a time.

  The bytes are the canonical serialization (``SerializeToString(deterministic=True)``: map
  keys sorted) of the Example the original builds. The original's own bytes vary from run to
  run (protobuf's map order is hash-seeded per process) but parse to the same features.

  Wire format: Example{1: Features{1: map<string, Feature>}}, each map entry {1: key,
  2: Feature}, Feature{2: FloatList | 3: Int64List}, values packed in field 1 of the list.
  Everything before a feature's packed values depends only on their byte size, so those
  prefixes are built once per size.
  """

  def __init__(self, vocab_size, max_seq_length, max_predictions_per_seq):
    L, P = max_seq_length, max_predictions_per_seq
    self.max_seq_length, self.max_predictions_per_seq = L, P
    if max(vocab_size, L) >= 1 << 21:
      raise BertTfError(f"vocab of {vocab_size} tokens: at most 2**21 are supported")
    self._varints = _VarintTable(max(vocab_size, L))
    self._prefixes = {name: {} for name in features_lib.PRETRAINING_FEATURE_NAMES}
    self._input_mask = [self.entry("input_mask", b"\x01" * n + b"\x00" * (L - n))
                        for n in range(L + 1)]
    self._weights = [self.entry("masked_lm_weights", struct.pack("<%df" % P,
                                                                 *([1.0] * k + [0.0] * (P - k))))
                     for k in range(P + 1)]
    self._next_sentence = [self.entry("next_sentence_labels", b"\x00"),
                           self.entry("next_sentence_labels", b"\x01")]
    self._segment_prefix = self.prefix("segment_ids", L)
    # Runs of whole entries that follow each other in every record, joined ahead:
    # input_ids' padding + input_mask (by n), and masked_lm_weights + next_sentence_labels +
    # segment_ids' prefix (by 2 k + random_next).
    self._padding_and_mask = [b"\x00" * (L - n) + self._input_mask[n] for n in range(L + 1)]
    self._weights_to_segments = [self._weights[k] + self._next_sentence[r] + self._segment_prefix
                                 for k in range(P + 1) for r in (0, 1)]
    # Prefixes (and their sizes) of the entries whose size varies, for every possible size.
    most = 3 * max(L, P) + 1
    self._prefix_list = {name: [self.prefix(name, size) for size in range(most)]
                         for name in ("input_ids", "masked_lm_ids", "masked_lm_positions")}
    self._prefix_size = {name: np.array([len(x) for x in prefixes])
                         for name, prefixes in self._prefix_list.items()}
    self._fixed_size = (len(self._input_mask[0]) + len(self._weights[0]) +
                        len(self._next_sentence[0]) + len(self._segment_prefix) + L)
    # b"\x0a" + varint(record size): the Example's one field, Features; after the TFRecord
    # frame's head (uint64 length, masked CRC of it), which depends on the size alone.
    heads = [b"\x0a" + _varint(size) for size in range(
        self._fixed_size + 3 * most + 3 * (max(self._prefix_size["input_ids"]) + 1))]
    self._head_size = np.array([len(head) for head in heads], np.int64)
    frame = tfrecord.frame_heads(np.arange(len(heads)) + self._head_size)
    self._frame_and_head = [frame[size].tobytes() + head for size, head in enumerate(heads)]

  def prefix(self, name, size):
    """The bytes of feature ``name``'s map entry before its ``size`` bytes of packed values."""
    cache = self._prefixes[name]
    prefix = cache.get(size)
    if prefix is None:
      is_float = features_lib.PRETRAINING_FEATURES[name][0] == "float32"
      values = (b"\x0a" + _varint(size)) if size else b""             # FloatList/Int64List
      feature = (b"\x12" if is_float else b"\x1a") + _varint(len(values) + size) + values
      key = b"\x0a" + _varint(len(name)) + name.encode()
      body_size = len(key) + 1 + len(_varint(len(feature) + size)) + len(feature) + size
      prefix = (b"\x0a" + _varint(body_size) + key + b"\x12" + _varint(len(feature) + size) +
                feature)
      cache[size] = prefix
    return prefix

  def entry(self, name, packed):
    """A whole map entry of feature ``name`` with packed values ``packed``."""
    return self.prefix(name, len(packed)) + packed

  def encode_batch(self, tokens, row_start, n_tokens, len_a, masked_lm_positions,
                   masked_lm_ids, num_masked, random_next):
    """Records of a batch, framed: a list of B TFRecord-framed serialized ``tf.train.Example``
    (``tfrecord.frame`` of each; written end to end they are a TFRecord file).

    Args:
      tokens: [T] ids after masking of all rows, end to end: row b is
        tokens[row_start[b]:row_start[b] + n_tokens[b]], [CLS] A [SEP] B [SEP].
      row_start, n_tokens, len_a: [B] int64; len_a is the number of A tokens (segment 0 is
        [CLS] A [SEP], segment 1 is B [SEP]).
      masked_lm_positions, masked_lm_ids: [B, P], sorted by position, 0-padded.
      num_masked: [B] real predictions per row; random_next: B bools.

    The pieces of all records are joined at once, with room for each record's data CRC; the
    CRCs are then computed for the batch and written in.
    """
    L, P = self.max_seq_length, self.max_predictions_per_seq
    B = len(random_next)
    varints = self._varints
    ids, ids_size = varints.encode(tokens, row_start)                  # [B] sizes
    step = np.arange(B) * P
    lm_ids, lm_ids_size = varints.encode(masked_lm_ids.ravel(), step)
    lm_positions, lm_positions_size = varints.encode(masked_lm_positions.ravel(), step)
    # segment_ids' values, then 4 bytes for the frame's data CRC: [B, L + 4].
    span = np.arange(L + 4)[None, :]
    segments = ((span >= (len_a + 2)[:, None]) & (span < n_tokens[:, None])).astype(np.uint8)
    # Every record's size, for its length prefix: the fixed entries plus the three whose
    # size varies (input_ids is its varints and L - n zeros).
    ids_total = ids_size + (L - n_tokens)                              # [B]
    sizes = (self._fixed_size + ids_total + self._prefix_size["input_ids"][ids_total] +
             lm_ids_size + self._prefix_size["masked_lm_ids"][lm_ids_size] +
             lm_positions_size +
             self._prefix_size["masked_lm_positions"][lm_positions_size])  # [B]
    record_size = sizes + self._head_size[sizes]                       # [B]
    ends = np.cumsum(record_size + 16)                                 # [B] framed, end to end
    kr = 2 * num_masked + np.asarray(random_next, np.int64)            # [B]
    pieces = zip(
        map(self._frame_and_head.__getitem__, sizes.tolist()),
        map(self._prefix_list["input_ids"].__getitem__, ids_total.tolist()),
        _split(ids, ids_size),
        map(self._padding_and_mask.__getitem__, n_tokens.tolist()),
        map(self._prefix_list["masked_lm_ids"].__getitem__, lm_ids_size.tolist()),
        _split(lm_ids, lm_ids_size),
        map(self._prefix_list["masked_lm_positions"].__getitem__, lm_positions_size.tolist()),
        _split(lm_positions, lm_positions_size),
        map(self._weights_to_segments.__getitem__, kr.tolist()),
        _split(segments.tobytes(), np.full([B], L + 4)))
    data = bytearray().join(itertools.chain.from_iterable(pieces))
    flat = np.frombuffer(data, np.uint8)
    readable = np.concatenate([flat, np.zeros([int(record_size.max()) + 8], np.uint8)])
    crc = tfrecord.mask(tfrecord.crc32c_spans(readable, ends - record_size - 4, record_size))
    crc = crc.astype("<u4").view(np.uint8).reshape(B, 4)
    for k in range(4):
      flat[ends - 4 + k] = crc[:, k]
    return _split(bytes(data), record_size + 16)


def _split(data, sizes):
  """``data`` (bytes) cut into consecutive pieces of ``sizes`` bytes: a list."""
  ends = np.cumsum(sizes).tolist()
  return list(map(data.__getitem__, map(slice, [0] + ends[:-1], ends)))


class RoundRobinWriter:
  """Writes records round-robin over TFRecord files, atomically: temporary names until
  ``commit``; ``discard`` (or an exception inside ``with``) removes them."""

  def __init__(self, output_files, gzip=False):
    self.output_files = list(output_files)
    self._temps = []
    self._writers = []
    try:
      for path in self.output_files:
        fileio.make_parent(path)
        tmp = fileio.temp_name(path)
        self._temps.append(tmp)
        self._writers.append(tfrecord.TFRecordWriter(tmp, gzip))
    except BaseException:  # A failure or Ctrl-C half-way: no temp file stays behind.
      self.discard()
      raise
    self._next = 0
    self.written = 0

  def write_framed(self, records):
    """Writes framed records (a list of bytes, ``tfrecord.frame`` of each record), continuing
    the round-robin where the last call left it."""
    count = len(self._writers)
    for k, writer in enumerate(self._writers):
      # Each file's share in order, file by file: the same files as one record at a time.
      write_joined(writer, records[(k - self._next) % count::count])
      faults.point("records_written")
    self._next = (self._next + len(records)) % count
    self.written += len(records)

  def append_shard(self, paths, counts, compressed=False):
    """Appends a shard's records, written by a worker: ``paths[k]`` holds the ``counts[k]``
    framed records for output file k (GZIP members if ``compressed``). The kernel copies
    them where it can."""
    for writer, path in zip(self._writers, paths):
      writer.write_file(path, compressed)
    self.written += sum(counts)
    faults.point("records_written")

  def commit(self):
    try:
      for writer in self._writers:
        writer.close()
      for tmp, path in list(zip(self._temps, self.output_files)):
        fileio.commit(tmp, path)
        self._temps.remove(tmp)
    except BaseException:
      self.discard()
      raise

  def discard(self):
    for writer in self._writers:
      try:
        writer.close()
      except Exception:  # pylint: disable=broad-except
        pass
    for tmp in self._temps:
      fileio.discard(tmp)
    self._temps = []

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      self.commit()
    else:
      self.discard()
    return False


def write_joined(writer, records):
  """Writes framed records (a list of bytes) to a ``tfrecord.TFRecordWriter``, joined a few MB
  at a time."""
  for start in range(0, len(records), 8192):
    writer.write_framed(b"".join(records[start:start + 8192]))
