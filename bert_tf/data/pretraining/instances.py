"""Pretraining instances: Google's create_pretraining_data.py, draw for draw, many times faster.

Reference mode (``num_workers=0``) gives the original's records exactly: the same input files,
vocab, flags and seed produce the same instances in the same order in the same output files,
every feature of every record (tests/data/ checks this against bert-tensorflow 1.0.4). The
algorithm is the original's (REFERENCE.md "Pretraining data"):

  read every line of every file (one sentence per line, blank line = new document; documents
  continue across files), tokenize; drop empty documents; shuffle the documents; for each of
  ``dupe_factor`` passes, for each document, cut it into [CLS] A [SEP] B [SEP] instances
  (B random with probability 0.5) and mask them (80% [MASK], 10% kept, 10% random word);
  shuffle all instances; write them round-robin over the output files.

One ``random.Random(random_seed)`` makes every draw, in the original's order. What makes it
fast without changing a single draw:

- Every draw CPython makes is a function of the Mersenne Twister's 32-bit words
  (``ReferenceRandom``): the words are made in bulk and the draws computed from them.
- Instances are made in two passes (``InstanceMaker``). The first makes the draws in order but
  keeps only what it needs: token ranges, truncation counts, and where the words of the
  candidate shuffle and mask decisions end, found by precompiled regular expressions (in C);
  which candidates the shuffle picks changes no later draw. The second replays the shuffles
  and decisions of thousands of instances at once in numpy.
- The corpus is flat arrays of ids; each distinct word is WordPiece-tokenized once.
- Records are serialized by hand (protobuf wire format, keys in canonical order), in batches.

Whole-word masking (``do_whole_word_mask``) follows the original's later version (a word's
``##`` pieces are masked together; a word that would exceed ``max_predictions_per_seq`` is
skipped); with it off, both versions make the same draws.

Sharded mode (``num_workers >= 1``): the input is cut into shards (each file, large files split
at document boundaries into pieces of about ``shard_size_mb``), and each shard is a small corpus
of its own, processed by one of ``num_workers`` processes with its own generator seeded with
``f"{random_seed}/{shard index}"``: documents do not cross files and random next sentences
come from the same shard. Record i of a shard goes to output file ``i % len(output_files)``:
each worker writes each file's share, framed (and compressed with ``gzip``: GZIP members), to a
temporary file beside the outputs, and the parent appends those to the outputs in shard order
(a copy in the kernel), so the parent does almost no work. Memory is bounded by a few shards,
not the corpus. The output is deterministic for a given seed and shard size (and independent
of the number of workers) but not the reference output.

Shape legend (per record):
  L = max_seq_length, P = max_predictions_per_seq, n = real tokens ([CLS] A [SEP] B [SEP])
"""

import array
import bisect
import codecs
import collections
import contextlib
import dataclasses
import glob
import itertools
import logging
import multiprocessing
import os
import random
import re
import struct
import sys
import tempfile
import time

import numpy as np

from bert_tf import fileio
from bert_tf.data import features as features_lib
from bert_tf.data import tfrecord
from bert_tf.errors import BertTfError

logger = logging.getLogger("bert_tf.data.pretraining")

CLS, SEP, MASK, UNK = "[CLS]", "[SEP]", "[MASK]", "[UNK]"
_READ_CHUNK_BYTES = 1 << 22


# --- the original's random draws --------------------------------------------------------------

CHAR_BASE = 0x10000
_TOP_BYTE = 3 if sys.byteorder == "little" else 0  # Of a uint32 in memory.
_TWO_26 = 67108864.0
_TWO_M53 = 1.0 / 9007199254740992.0


class ReferenceRandom:
  """The draws of ``random.Random(seed)``, computed from a buffer of its 32-bit outputs.

  CPython builds each draw from the Mersenne Twister's 32-bit words w0, w1, ...:
    random()        two words a, b: ((a >> 5) * 2**26 + (b >> 6)) / 2**53
    randbelow(n)    k = n.bit_length(); the next word w until (w >> (32 - k)) < n; that value
                    (getrandbits(k) with rejection; even n = 1 takes a word)
    randint(a, b)   a + randbelow(b - a + 1)
    shuffle(x)      for i = len(x)-1 .. 1: swap x[i] and x[randbelow(i + 1)]
  The words are made in blocks by numpy's MT19937 started from the state of
  ``random.Random(seed)`` (the same generator, so the same words; tests check it), and the
  hot loops of ``InstanceMaker`` read them at ``pos`` through three views:
    top8[q]    the top 8 bits of word q (bytes). random() made of words q, q+1 lies in
               [top8[q] / 256, (top8[q] + 1) / 256): ``random() < 0.5`` is ``top8[q] < 128``
               exactly, and ``random() < c`` needs the whole words only when
               top8[q] == floor(256 c) (see ``threshold``).
    chars[q]   the top 15 bits of word q as a character, chr(CHAR_BASE + top15) (str), for
               walks in ``re`` and for randbelow(n) with n < 2**15. The characters are
               outside the BMP because ``re`` compiles a class of such characters as a plain
               range, but one of BMP characters as a bitmap, one character at a time.
    words[q]   the word itself (numpy uint32), for everything else.
  A read past the buffer raises IndexError (or a walk finds no match): the caller calls
  ``grow`` and makes the same draws again.

  Each buffer gets addresses of its own, ``base`` + index; with ``keep_history`` the buffers
  since ``forget_before`` was last called stay in ``history`` (base, words), so that words can
  be read back later by address (``history_since``).
  """

  def __init__(self, seed, block_words=1 << 16):
    """Args:
      seed: any seed ``random.Random`` accepts (the original passes ``--random_seed``).
      block_words: words read from the generator per refill.
    """
    # numpy's MT19937 from the same state makes the same words as random.Random, faster.
    version, state, _ = random.Random(seed).getstate()
    del version
    self._bit_generator = np.random.MT19937()
    self._bit_generator.state = {"bit_generator": "MT19937", "state": {
        "key": np.array(state[:624], dtype=np.uint32), "pos": state[624]}}
    self._block = block_words
    self.words = np.zeros([0], np.uint32)
    self.top8 = b""
    self.chars = ""
    self.pos = 0
    self.base = 0
    self.history = []
    self.keep_history = False

  def reserve(self, count):
    """Buffers at least ``count`` unread words at ``pos``; may move ``pos`` (to 0)."""
    if self.words.size - self.pos >= count:
      return
    keep = self.words[self.pos:]
    skip = max(0, self.pos - self.words.size)  # Words consumed that were never buffered.
    need = max(count - keep.size, self._block) + skip
    w = np.empty([keep.size + need - skip], np.uint32)
    w[:keep.size] = keep
    w[keep.size:] = self._bit_generator.random_raw(need)[skip:]
    self.base += self.words.size
    self.words = w
    if self.keep_history:
      self.history.append((self.base, w))
    else:
      self.history = [(self.base, w)]
    self.top8 = w.view(np.uint8)[_TOP_BYTE::4].tobytes()
    top15 = w >> 17
    top15 += CHAR_BASE
    self.chars = codecs.utf_32_le_decode(top15.astype("<u4", copy=False))[0]
    self.pos = 0

  def grow(self):
    """Buffers twice as many words (after a draw ran past the end)."""
    self.reserve(2 * max(0, self.words.size - self.pos) + self._block)

  def forget_before(self, address):
    """Drops the buffers of ``history`` that end before ``address``."""
    self.history = [(b, w) for b, w in self.history if b + w.size > address]

  def history_since(self, address):
    """(words, base): the buffers of ``history`` from the one holding ``address`` on, end to
    end, and the address of words[0] (the buffers' addresses are consecutive)."""
    buffers = [(b, w) for b, w in self.history if b + w.size > address]
    if not buffers:
      return self.words, self.base
    return np.concatenate([w for _, w in buffers]), buffers[0][0]

  def random_at(self, p):
    """random() made of the words at ``p`` and ``p + 1`` (exact)."""
    return ((int(self.words[p]) >> 5) * _TWO_26 + (int(self.words[p + 1]) >> 6)) * _TWO_M53

  def randbelow_at(self, n, p):
    """(randbelow(n), new p) from the words at ``p``."""
    k = n.bit_length()
    if k <= 8:
      top8, shift = self.top8, 8 - k
      r = top8[p] >> shift
      p += 1
      while r >= n:
        r = top8[p] >> shift
        p += 1
    elif k <= 15:
      chars, shift = self.chars, 15 - k
      r = (ord(chars[p]) - CHAR_BASE) >> shift
      p += 1
      while r >= n:
        r = (ord(chars[p]) - CHAR_BASE) >> shift
        p += 1
    else:
      words, shift = self.words, 32 - k
      r = int(words[p]) >> shift
      p += 1
      while r >= n:
        r = int(words[p]) >> shift
        p += 1
    return r, p

  def _draw(self, fn, *args):
    while True:
      self.reserve(64)
      try:
        value, p = fn(*args, self.pos)
        self.pos = p
        return value
      except IndexError:
        self.grow()

  # Plain draws, one at a time (documents and instances shuffles, tests).
  def random(self):
    return self._draw(lambda p: (self.random_at(p), p + 2))

  def randbelow(self, n):
    return self._draw(self.randbelow_at, n)

  def randint(self, a, b):
    return a + self.randbelow(b - a + 1)

  def shuffle(self, x):
    """Shuffles list ``x`` in place exactly as ``random.Random.shuffle``.

    Steps n = len(x) .. 2 (randbelow(n)) are taken in runs of equal n.bit_length(), where the
    draw is one shift of a word; a rejected word is consumed like any other.
    """
    n = len(x)
    while n > 1:
      self.reserve(min(n, self._block) + 64)
      words, p = self.words.tolist(), self.pos
      stop = len(words)
      while n > 1 and p < stop:
        k = n.bit_length()
        shift, low = 32 - k, max(1 << (k - 1), 2)
        while n >= low and p < stop:
          j = words[p] >> shift
          p += 1
          if j < n:
            n -= 1
            x[n], x[j] = x[j], x[n]
      self.pos = p


def threshold(c, bits=8):
  """(lo, exact): with h the top ``bits`` bits of random()'s first word, ``random() < c`` is
  True when h < lo, False when h > lo, and needs the whole words when h == lo and ``exact``
  (c * 2**bits is not an integer)."""
  scale = float(1 << bits)
  lo = min(int(c * scale), 1 << bits) if c > 0 else 0
  return lo, c * scale != lo


def _chars(lo, hi):
  """A regex class of the ``ReferenceRandom.chars`` whose top 15 bits are in [lo, hi]."""
  return "[\\U%08x-\\U%08x]" % (CHAR_BASE + lo, CHAR_BASE + hi)


class _Walks:
  """Where the words of a candidate shuffle and of the mask decisions after it end, in ``re``.

  A shuffle of n candidates takes one accepted word per step: at step m = n .. 2 (randbelow(m)
  with k = m.bit_length() bits) a word is accepted iff its top k bits are below m, i.e. iff
  its top 15 bits are below t_m = m << (15 - k); rejected words are skipped. So the walk is
  the regular expression  [>= t_m]*+[< t_m]  for m = n .. 2, on ``ReferenceRandom.chars``.
  It is matched in two pieces so that few patterns are compiled (~40 us per step): the steps
  m = n .. m0 + 1 (m0 = n rounded down to a multiple of 16; one pattern per n, < 16 steps)
  and the steps m0 .. 2 (one pattern per m0). The lengths seen most (the full-length one)
  get a single pattern of walk and decisions.

  The mask decisions are regular too when the top 15 bits decide them: random() < 0.8 is
  certain for top15 < 26214 and excluded for top15 > 26214 (26214 needs all the bits: no
  match, Python decides); random() < 0.5 is top15 < 16384; randbelow(V) (V < 2**15) takes the
  first word whose top k = V.bit_length() bits are < V. One pattern per number of masks
  (a repeat of one decision; the single patterns repeat it inline, which matches faster).
  """

  BLOCK = 16
  HOT_AFTER = 1000  # Uses after which a length gets its single pattern (~5 ms to compile).

  def __init__(self, num_masked, mask_below, vocab_size):
    """Args:
      num_masked: n candidates -> number of masks k.
      mask_below: the 0.8 threshold in top-15-bit units, (lo, exact) = threshold(0.8, 15).
      vocab_size: V, for the random-word draws.
    """
    self._num_masked = num_masked
    self.hot = {}         # n -> walk "()" decisions, one match
    self._head = {}       # n -> steps n .. m0+1
    self._tail = {}       # m0 -> steps m0 .. 2
    self._decisions = {}  # k -> k decisions
    self._seen = collections.Counter()
    self._decision = None
    lo, exact = mask_below
    # randbelow(V) accepts a word iff its top k = V.bit_length() bits are < V.
    if vocab_size < 1 << 15 and 0 < lo < 0x7FFF:
      below = vocab_size << (15 - vocab_size.bit_length())
      any_char = _chars(0, 0x7FFF)
      self._decision = "(?:%s%s|%s%s(?:%s%s|%s%s%s*+%s))" % (
          _chars(0, lo - 1), any_char,                        # [MASK]
          _chars(lo + 1 if exact else lo, 0x7FFF), any_char,  # not [MASK], then:
          _chars(0, 0x3FFF), any_char,                        # kept
          _chars(0x4000, 0x7FFF), any_char,                   # random id: randbelow(V)
          _chars(below, 0x7FFF), _chars(0, below - 1))

  @staticmethod
  def thresholds(n):
    """thresholds[i] = t_{i+1}: the bound for the draw that picks the partner of item i."""
    return [0] + [(i + 1) << (15 - (i + 1).bit_length()) for i in range(1, n)]

  @staticmethod
  def _steps(m_hi, m_lo):
    """The regex of steps m = m_hi .. m_lo."""
    out = []
    for m in range(m_hi, m_lo - 1, -1):
      t = m << (15 - m.bit_length())
      out.append("%s*+%s" % (_chars(t, 0x7FFF), _chars(0, t - 1)))
    return "".join(out)

  def match(self, chars, p, n):
    """(end of the walk, end of the decisions) of n candidates from ``p``, or None when no
    regex decides (a decision needs all bits, or the buffer ends): then walk in Python."""
    rx = self.hot.get(n)
    if rx is not None:
      m = rx.match(chars, p)
      return None if m is None else (m.end(1), m.end())
    seen = self._seen[n] = self._seen[n] + 1
    if self._decision is None or n >= 1 << 15:
      return None
    k = self._num_masked(n)
    if seen >= self.HOT_AFTER:
      self.hot[n] = re.compile(self._steps(n, 2) + "()" + self._decision * k)
      return self.match(chars, p, n)
    walk_end = self._walk_end(chars, p, n)
    if walk_end is None:
      return None
    decisions = self._decisions.get(k)
    if decisions is None:  # A repeat compiles in ~0.3 ms; k copies would take ~0.2 ms each.
      decisions = self._decisions[k] = re.compile("(?:%s){%d}" % (self._decision, k))
    m = decisions.match(chars, walk_end)
    return None if m is None else (walk_end, m.end())

  def _walk_end(self, chars, p, n):
    """The end of the walk of n candidates from ``p`` (head and tail patterns), or None."""
    m0 = n - n % self.BLOCK
    head = self._head.get(n)
    if head is None:
      head = self._head[n] = re.compile(self._steps(n, max(m0 + 1, 2)))
    m = head.match(chars, p)
    if m is None:
      return None
    p = m.end()
    if m0 >= 2:
      tail = self._tail.get(m0)
      if tail is None:
        tail = self._tail[m0] = re.compile(self._steps(m0, 2))
      m = tail.match(chars, p)
      if m is None:
        return None
      p = m.end()
    return p

  def walk(self, chars, p, n, thresholds):
    """The end of the walk of n candidates from ``p``; IndexError past the end."""
    if n < 2:
      return p
    if n < 1 << 15:
      end = self._walk_end(chars, p, n)
      if end is not None:
        return end
    for i in range(n - 1, 0, -1):
      t = CHAR_BASE + thresholds[i]
      while ord(chars[p]) >= t:
        p += 1
      p += 1
    return p


def shuffle_from_walk(x, walk, thresholds, shift15):
  """Shuffles list ``x`` in place with the words of its walk (a str of top-15-bit chars)."""
  q = 0
  for i in range(len(x) - 1, 0, -1):
    t = thresholds[i]
    c = ord(walk[q]) - CHAR_BASE
    q += 1
    while c >= t:
      c = ord(walk[q]) - CHAR_BASE
      q += 1
    j = c >> shift15[i]
    x[i], x[j] = x[j], x[i]


def _shift15_table(n):
  """SHIFT15[i] = 15 - (i + 1).bit_length(): a top-15-bit char -> the draw of step i."""
  return [0] + [15 - (i + 1).bit_length() for i in range(1, n)]


# --- records -----------------------------------------------------------------------------------

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


# --- reading documents ---------------------------------------------------------------------------

@dataclasses.dataclass
class Summary:
  """What a run read and wrote. ``tokens`` counts real tokens in the instances ([CLS], [SEP]
  included); ``masked`` the masked ones; ``capped`` the instances whose masks were limited by
  max_predictions_per_seq."""
  files: int = 0
  shards: int = 0
  lines: int = 0
  invalid_lines: int = 0
  empty_files: int = 0
  documents: int = 0
  empty_documents: int = 0
  one_sentence_documents: int = 0
  one_document_corpora: int = 0
  sentences: int = 0
  corpus_tokens: int = 0
  instances: int = 0
  random_next: int = 0
  tokens: int = 0
  masked: int = 0
  capped: int = 0
  seconds: float = 0.0
  peak_rss_mb: float = 0.0
  worker_peak_rss_mb: float = 0.0
  output_files: tuple = ()

  _ADDITIVE = ("files", "shards", "lines", "invalid_lines", "empty_files", "documents",
               "empty_documents", "one_sentence_documents", "one_document_corpora", "sentences",
               "corpus_tokens", "instances", "random_next", "tokens", "masked", "capped")

  def add(self, other):
    for name in self._ADDITIVE:
      setattr(self, name, getattr(self, name) + getattr(other, name))
    self.worker_peak_rss_mb = max(self.worker_peak_rss_mb, other.peak_rss_mb)

  @property
  def masked_fraction(self):
    return self.masked / self.tokens if self.tokens else 0.0

  def lines_of_text(self):
    """The end-of-run summary, a few lines for the log."""
    rate = self.instances / self.seconds if self.seconds else 0.0
    out = [
        f"read {self.files} files ({self.shards} shards), {self.lines} lines, "
        f"{self.documents} documents, {self.sentences} sentences, {self.corpus_tokens} tokens",
        f"wrote {self.instances} instances to {len(self.output_files)} files: "
        f"{self.tokens} tokens, {self.masked} masked ({self.masked_fraction:.2%}), "
        f"{self.random_next} random next sentences",
        f"time {self.seconds:.1f} s ({rate:.0f} instances/s), peak memory "
        f"{self.peak_rss_mb:.0f} MB" +
        (f" (largest worker {self.worker_peak_rss_mb:.0f} MB)" if self.worker_peak_rss_mb else ""),
    ]
    skips = []
    if self.empty_documents:
      skips.append(f"{self.empty_documents} empty documents dropped")
    if self.invalid_lines:
      skips.append(f"{self.invalid_lines} lines of invalid UTF-8 skipped")
    if self.empty_files:
      skips.append(f"{self.empty_files} input files without text")
    if self.one_sentence_documents:
      skips.append(f"{self.one_sentence_documents} one-sentence documents (random next only)")
    if self.one_document_corpora:
      skips.append(f"{self.one_document_corpora} corpora/shards of one document (random next "
                   "sentences from the same document)")
    if self.capped:
      skips.append(f"{self.capped} instances with masks capped at max_predictions_per_seq")
    if skips:
      out.append("; ".join(skips))
    return out


def expand_input_files(patterns):
  """Comma-separated list or list of globs -> files, in the original's order (tf glob).

  Raises:
    BertTfError: a pattern matches no file.
  """
  if isinstance(patterns, str):
    patterns = patterns.split(",")
  patterns = [p for p in patterns if p]  # "a.txt," is a.txt, as in the original
  if not patterns:
    raise BertTfError("--input_file: no input file given")
  files = []
  for pattern in patterns:
    matched = _glob(pattern)
    if not matched:
      raise BertTfError(f"--input_file: no file matches {pattern!r}")
    files.extend(matched)
  return files


def _glob(pattern):
  """``tf.io.gfile.glob(pattern)`` (the original's order: the directory's), locally without TF."""
  if fileio.is_remote(pattern):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.io.gfile.glob(pattern)
  if not glob.has_magic(pattern):
    return [pattern] if os.path.exists(pattern) else []
  # tf.io.gfile.glob matches names starting with "." too, and returns files and directories.
  return glob.glob(pattern, include_hidden=True)


def _iter_lines(path, start=0, end=None):
  """Yields (byte offset, line bytes) of ``path`` from ``start`` to ``end``, as GFile.readline.

  Like TensorFlow's readline (which the original uses): lines end at "\\n", every "\\r" is
  dropped, and a last piece that is empty once "\\r" is dropped is no line.
  """
  with fileio.open_file(path, "rb") as f:
    if start:
      f.seek(start)
    pos = start
    tail = b""
    while True:
      size = _READ_CHUNK_BYTES if end is None else min(_READ_CHUNK_BYTES, end - pos)
      data = f.read(size) if size > 0 else b""
      if not data:
        break
      offset = pos - len(tail)
      pos += len(data)
      data = tail + data
      has_cr = b"\r" in data
      lines = data.split(b"\n")
      tail = lines.pop()
      for line in lines:
        yield offset, line.replace(b"\r", b"") if has_cr else line
        offset += len(line) + 1
    tail = tail.replace(b"\r", b"")
    if tail:
      yield pos - len(tail), tail


def _line_number(path, offset):
  """1-based number of the line starting at byte ``offset`` (only for error messages)."""
  count = 1
  with fileio.open_file(path, "rb") as f:
    done = 0
    while done < offset:
      data = f.read(min(_READ_CHUNK_BYTES, offset - done))
      if not data:
        break
      count += data.count(b"\n")
      done += len(data)
  return count


class _WordIds(dict):
  """word -> bytes of its WordPiece ids (int32, native order), computed on first use."""

  def __init__(self, tokenizer, max_words):
    super().__init__()
    self._vocab = tokenizer.vocab
    self._tokenize_word = tokenizer.wordpiece_tokenizer.tokenize_word
    self._max_words = max_words

  def __missing__(self, word):
    vocab = self._vocab
    ids = array.array("i", [vocab[piece] for piece in self._tokenize_word(word)]).tobytes()
    if len(self) >= self._max_words:
      self.clear()
    self[word] = ids
    return ids


class LineTokenizer:
  """Raw line -> its ids as bytes of int32, through a ``FullTokenizer``.

  With no ``never_split`` tokens, ``FullTokenizer.tokenize`` is basic tokenization then
  WordPiece word by word, so the ids of each distinct word are computed once and a line's
  ids are the join of its words' (in C).
  """

  def __init__(self, tokenizer, max_words=1 << 20):
    self.tokenizer = tokenizer
    basic = getattr(tokenizer, "basic_tokenizer", None)
    wordpiece = getattr(tokenizer, "wordpiece_tokenizer", None)
    self._by_word = (not getattr(tokenizer, "never_split", ()) and basic is not None and
                     hasattr(wordpiece, "tokenize_word"))
    if self._by_word:
      self._basic = basic.tokenize
      self._ids = _WordIds(tokenizer, max_words).__getitem__

  def __call__(self, text):
    if not self._by_word:
      ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))
      return array.array("i", ids).tobytes()
    return b"".join(map(self._ids, self._basic(text)))


class Corpus:
  """Documents of sentences of ids, stored flat (the original holds lists of lists of tokens).

    tokens           bytearray of int32: the ids of every sentence, one after the other
    sentence_start   list: sentence s is ids sentence_start[s] .. sentence_start[s + 1] - 1
                     (a list, not an array, because bisecting it is the hot loop)
    documents        list of (first sentence, end sentence): document d is sentences
                     documents[d][0] .. documents[d][1] - 1
  """

  def __init__(self):
    self.tokens = bytearray()
    self.sentence_start = [0]
    self.documents = []
    self._open = 0  # First sentence of the document being read.

  def add_sentence(self, ids):
    """Appends a sentence, its ids as bytes of int32."""
    self.tokens += ids
    self.sentence_start.append(len(self.tokens) >> 2)

  def token_array(self):
    """[T] int32 view of all the ids."""
    return np.frombuffer(self.tokens, np.int32) if self.tokens else np.zeros([0], np.int32)

  def end_document(self):
    """A blank line: the document being read ends (maybe empty) and another one starts."""
    end = len(self.sentence_start) - 1
    self.documents.append((self._open, end))
    self._open = end

  def close(self, summary):
    """Ends the last document, drops the empty ones (counted in ``summary``, but for a last
    one that only means the input ended with a blank line)."""
    last_open = self._open < len(self.sentence_start) - 1
    self.end_document()
    kept = [d for d in self.documents if d[1] > d[0]]
    summary.empty_documents += len(self.documents) - len(kept) - (not last_open)
    summary.documents += len(kept)
    summary.sentences += len(self.sentence_start) - 1
    summary.one_sentence_documents += sum(1 for s, e in kept if e - s == 1)
    summary.one_document_corpora += len(kept) == 1
    summary.corpus_tokens += len(self.tokens) >> 2
    self.documents = kept
    return self


def read_corpus(sources, line_tokenizer, summary, skip_invalid_utf8=False):
  """Reads one-sentence-per-line text as the original: a ``Corpus``.

  A blank line (empty once stripped) ends a document; a document goes on from one file to the
  next; a line that tokenizes to nothing is no sentence; empty documents are dropped.

  Args:
    sources: iterable of (path, start byte, end byte or None).
    line_tokenizer: a ``LineTokenizer``.
    summary: a ``Summary`` whose counters are updated.
    skip_invalid_utf8: skip (and count) lines that are not UTF-8 instead of failing.
  Raises:
    BertTfError: a line is not valid UTF-8 (unless skipped).
  """
  corpus = Corpus()
  for path, start, end in sources:
    tokens_before = len(corpus.tokens)
    for offset, raw in _iter_lines(path, start, end):
      summary.lines += 1
      try:
        line = raw.decode("utf-8").strip()
      except UnicodeDecodeError as e:
        if skip_invalid_utf8:
          summary.invalid_lines += 1
          logger.warning("%s:%d: skipped a line of invalid UTF-8 (byte %d)",
                         path, _line_number(path, offset), e.start + 1)
          continue
        raise BertTfError(
            f"{path}:{_line_number(path, offset)}: invalid UTF-8 at byte {e.start + 1} of the "
            "line (fix the file or pass --skip_invalid_utf8)") from None
      if not line:
        corpus.end_document()
        continue
      ids = line_tokenizer(line)
      if ids:
        corpus.add_sentence(ids)
    if len(corpus.tokens) == tokens_before:
      summary.empty_files += 1
      logger.warning("%s: no text%s", path, "" if start == 0 and end is None else
                     f" in bytes {start}-{end}")
  return corpus.close(summary)


# --- instances -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  """The original's flags for instance creation (same names, same defaults)."""
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  dupe_factor: int = 10
  do_whole_word_mask: bool = False
  random_seed: int = 12345

  def validate(self):
    """Raises a one-line ``BertTfError`` naming the flag for values the algorithm cannot use."""
    if self.max_seq_length < 5:
      raise BertTfError(f"--max_seq_length={self.max_seq_length}: must be at least 5 "
                        "([CLS] A [SEP] B [SEP] with at least 2 tokens for A and B)")
    if self.max_seq_length > 1 << 15:
      raise BertTfError(f"--max_seq_length={self.max_seq_length}: at most 32768 is supported")
    if self.max_predictions_per_seq < 1:
      raise BertTfError(f"--max_predictions_per_seq={self.max_predictions_per_seq}: must be "
                        "at least 1")
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise BertTfError(f"--masked_lm_prob={self.masked_lm_prob}: must be in (0, 1]")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise BertTfError(f"--short_seq_prob={self.short_seq_prob}: must be in [0, 1]")
    if self.dupe_factor < 1:
      raise BertTfError(f"--dupe_factor={self.dupe_factor}: must be at least 1")

  def mask_cap_warning(self):
    """A one-line warning when max_predictions_per_seq caps the masking rate, else None."""
    wanted = int(round(self.max_seq_length * self.masked_lm_prob))
    if self.max_predictions_per_seq < wanted:
      return (f"--max_predictions_per_seq={self.max_predictions_per_seq} is below "
              f"max_seq_length * masked_lm_prob = {wanted}: full-length sequences get "
              f"{self.max_predictions_per_seq} masks, not {self.masked_lm_prob:.0%} (capped "
              "instances are counted in the summary)")
    return None


def special_token_ids(vocab, vocab_file="vocab"):
  """(cls, sep, mask) ids; raises a one-line BertTfError naming what the vocab lacks."""
  missing = [t for t in (CLS, SEP, MASK, UNK) if t not in vocab]
  if missing:
    raise BertTfError(f"vocab file {vocab_file!r} lacks {', '.join(missing)} (a BERT vocab "
                      "needs [CLS], [SEP], [MASK] and [UNK])")
  return vocab[CLS], vocab[SEP], vocab[MASK]


_MASKED = -1  # Masking decisions: [MASK], keep the original, or (>= 0) a random id.
_KEPT = -2
# random() < 0.5 is top8 < 128; translate() marks those bytes with 1.
_BELOW_HALF = bytes(1 if i < 128 else 0 for i in range(256))


class _Batch:
  """What ``InstanceMaker.add_document`` leaves for ``_encode_batch``.

  Instance tokens are [CLS] A [SEP] B [SEP], A and B being ranges of ``Corpus.tokens``.
  """

  def __init__(self):
    self.ranges = []       # flat: a_start, a_stop, b_start, b_stop of every instance
    self.random_next = []  # per instance: bool
    self.num_masked = []   # per instance: k
    # No WWM: the words (ReferenceRandom.chars) of the candidate shuffle and, unless the
    # decisions were made in Python, of the mask decisions after it.
    self.region_start = []  # per instance: address (ReferenceRandom.base + index) of the words
    self.walk_len = []      # per instance: words of the shuffle (the decisions' come after)
    # Decisions made in Python (_MASKED, _KEPT or a random id, in masking order).
    self.explicit = []     # the instances (batch rows) that have them
    self.decisions = []    # flat, for those instances in order
    self.picked = []       # flat: masked positions in masking order (WWM only)

  def __len__(self):
    return len(self.random_next)


class InstanceMaker:
  """Turns a ``Corpus`` into framed TFRecord records, draw for draw as the original's
  ``create_instances_from_document`` + ``create_masked_lm_predictions`` +
  ``write_instance_to_example_files``.

  Two passes. ``add_document`` makes every draw, in order, and keeps only what later steps
  need: token ranges (chunks and random-next segments are found by bisecting sentence
  offsets), how much truncation cuts at each end (the side follows from the lengths, only
  front/back is drawn), where the words of the candidate shuffle and of the mask decisions
  end (found by regexes: which candidates the shuffle picks changes no later draw).
  ``_encode_batch`` then gathers the tokens, replays the shuffles and decisions of a batch of
  instances together in numpy, applies the masks and serializes. With whole-word masking the
  picks decide later draws, so the shuffle is replayed at once.
  """

  BATCH = 8192

  def __init__(self, corpus, vocab, options, summary, vocab_file="vocab"):
    """Args:
      corpus: the ``Corpus`` (its documents may be reordered by the caller).
      vocab: token -> id (ordered as vocab.txt; ids 0..V-1).
      options: ``InstanceOptions``.
      summary: a ``Summary`` whose instance counters are updated.
    """
    self.corpus = corpus
    self.corpus_tokens = corpus.token_array()
    self.options = options
    self.summary = summary
    self.cls_id, self.sep_id, self.mask_id = special_token_ids(vocab, vocab_file)
    self.vocab_size = len(vocab)
    L, P, prob = options.max_seq_length, options.max_predictions_per_seq, options.masked_lm_prob
    # num_to_predict for n tokens, and whether max_predictions_per_seq lowered it.
    self.num_to_predict = [min(P, max(1, int(round(n * prob)))) for n in range(L + 1)]
    self.capped = np.array([max(1, int(round(n * prob))) > P for n in range(L + 1)])
    self.encoder = RecordEncoder(self.vocab_size, L, P)
    self.continuation = None
    if options.do_whole_word_mask:
      is_continuation = np.zeros([self.vocab_size], np.uint8)
      for token, i in vocab.items():
        if token.startswith("##"):
          is_continuation[i] = 1
      self.continuation = is_continuation[self.corpus_tokens].tobytes()  # per corpus token
    self._mask8 = threshold(0.8, 8)
    self._mask15 = threshold(0.8, 15)
    # Masks for n candidates.
    self.num_masked = [min(self.num_to_predict[min(n + 3, L)], n) for n in range(L + 1)]
    self.walks = _Walks(self.num_masked.__getitem__, self._mask15, self.vocab_size)
    self.thresholds = _Walks.thresholds(max(L, 2))
    self.shift15 = _shift15_table(max(L, 2))
    # Runs of masks that are [MASK] for sure (random() < 0.8: top8 < 204), two bytes each.
    self._mask_run = re.compile(b"(?:[\\x00-\\x%02x][\\x00-\\xff])*" % (self._mask8[0] - 1))
    # Enough words for one instance almost always (a draw past the end is retried).
    self._reserve = 4096 + 16 * L
    self._batch = _Batch()

  def flush(self, records, rng):
    """Serializes the instances made so far (from the words of ``rng``) into ``records``, framed."""
    if len(self._batch):
      records.extend(self._encode_batch(self._batch, rng))
      self._batch = _Batch()
    rng.forget_before(rng.base)

  def add_document(self, doc_index, rng, records):
    """Makes the instances of document ``doc_index``; their records go to ``records``.

    One loop per instance, in the original's order of draws. The words are read at ``p``
    (rng.pos is brought up to date at the end); a read past the buffered words raises
    IndexError before anything is recorded, and the instance is made again with more words.
    """
    opts = self.options
    documents = self.corpus.documents
    n_documents = len(documents)
    doc_bits = n_documents.bit_length()
    doc_shift = 15 - doc_bits
    starts = self.corpus.sentence_start
    bisect_left = bisect.bisect_left
    first, end = documents[doc_index]
    max_num_tokens = opts.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < opts.short_seq_prob:
      target = rng.randint(2, max_num_tokens)
    batch = self._batch
    ranges, random_nexts, num_maskeds = batch.ranges, batch.random_next, batch.num_masked
    region_starts, walk_lens = batch.region_start, batch.walk_len
    batch_size = self.BATCH
    wwm = self.continuation is not None
    hot, match = self.walks.hot, self.walks.match
    num_masked_of = self.num_masked
    reserve = self._reserve
    rng.keep_history = True
    p = rng.pos
    top8, chars, base = rng.top8, rng.chars, rng.base
    chunk = first
    while chunk < end:
      # The chunk is sentences chunk .. chunk_end-1: up to the first that brings it to
      # ``target`` tokens, or to the end of the document.
      chunk_end = bisect_left(starts, starts[chunk] + target, chunk + 1, end)
      n_chunk = chunk_end - chunk
      if len(top8) - p < reserve:
        rng.pos = p
        rng.reserve(reserve)
        p, top8, chars, base = rng.pos, rng.top8, rng.chars, rng.base
      while True:
        try:
          q = p
          a_end = 1
          if n_chunk >= 2:  # randint(1, n_chunk - 1); getrandbits(k) is top8 >> (8 - k).
            n = n_chunk - 1
            if n < 256:
              shift = 8 - n.bit_length()
              a_end = top8[q] >> shift
              q += 1
              while a_end >= n:
                a_end = top8[q] >> shift
                q += 1
            else:
              a_end, q = rng.randbelow_at(n, q)
            a_end += 1
          a_start, a_stop = starts[chunk], starts[chunk + a_end]
          unused = 0
          if n_chunk == 1:
            is_random_next = True
          else:
            is_random_next = top8[q] < 128  # random() < 0.5
            q += 2
          if is_random_next:
            for _ in range(10):  # randint(0, len(documents) - 1), up to 10 tries
              if doc_bits <= 15:  # getrandbits(k) is the top k of the 15 bits of chars.
                random_index = (ord(chars[q]) - CHAR_BASE) >> doc_shift
                q += 1
                while random_index >= n_documents:
                  random_index = (ord(chars[q]) - CHAR_BASE) >> doc_shift
                  q += 1
              else:
                random_index, q = rng.randbelow_at(n_documents, q)
              if random_index != doc_index:
                break
            random_first, random_end = documents[random_index]
            n = random_end - random_first
            if n < 256:
              shift = 8 - n.bit_length()
              random_start = top8[q] >> shift
              q += 1
              while random_start >= n:
                random_start = top8[q] >> shift
                q += 1
            else:
              random_start, q = rng.randbelow_at(n, q)
            random_start += random_first
            # From random_start until B has target - len(A) tokens or the document ends.
            b_end = bisect_left(starts, starts[random_start] + target - (a_stop - a_start),
                                random_start + 1, random_end)
            b_start, b_stop = starts[random_start], starts[b_end]
            unused = n_chunk - a_end
          else:
            b_start, b_stop = a_stop, starts[chunk_end]

          # truncate_seq_pair: pop from the longer side (B on ties), at the front or the back
          # with probability 1/2, one draw (two words) per pop. The sides follow from the
          # lengths: the longer side until the two are level, then the other and this one in
          # turn; so only the numbers of front pops are counted.
          len_a, len_b = a_stop - a_start, b_stop - b_start
          pops = len_a + len_b - max_num_tokens
          if pops > 0:
            if q + 2 * pops - 2 >= len(top8):
              raise IndexError("random buffer exhausted")
            fronts = top8[q:q + 2 * pops - 1:2].translate(_BELOW_HALF)  # 1: pop the front
            q += 2 * pops
            first_side = min(len_a - len_b if len_a > len_b else len_b - len_a + 1, pops)
            rest = fronts[first_side:]
            first_fronts = fronts[:first_side].count(1) + rest[1::2].count(1)
            first_pops = first_side + len(rest) // 2
            other_fronts = rest[0::2].count(1)
            other_pops = (len(rest) + 1) // 2
            if len_a > len_b:
              a_start += first_fronts
              a_stop -= first_pops - first_fronts
              b_start += other_fronts
              b_stop -= other_pops - other_fronts
            else:
              b_start += first_fronts
              b_stop -= first_pops - first_fronts
              a_start += other_fronts
              a_stop -= other_pops - other_fronts
            len_a, len_b = a_stop - a_start, b_stop - b_start

          n_cand = len_a + len_b
          decisions = picked = None
          if not wwm:
            # The candidate shuffle and the mask decisions: only where their words end.
            num_masked = num_masked_of[n_cand]
            rx = hot.get(n_cand)
            m = rx.match(chars, q) if rx is not None else None
            if m is not None:
              walk_end, q_end = m.end(1), m.end()
            else:
              ends = match(chars, q, n_cand) if rx is None else None
              if ends is None:  # A decision needs all the bits (or the buffer ended).
                walk_end = self.walks.walk(chars, q, n_cand, self.thresholds)
                decisions, q_end = self._decide(num_masked, rng, walk_end)
              else:
                walk_end, q_end = ends
            region_start = base + q
            walk_len = walk_end - q
            q = q_end
          else:
            picked, q = self._whole_word_picks(a_start, len_a, b_start, len_b,
                                               self.num_to_predict[n_cand + 3], chars, q)
            num_masked = len(picked)
            decisions, q = self._decide(num_masked, rng, q)
          break
        except IndexError:  # The buffered words ran out: more, and the same draws again.
          rng.pos = p
          rng.grow()
          p, top8, chars, base = rng.pos, rng.top8, rng.chars, rng.base

      p = q
      ranges += (a_start, a_stop, b_start, b_stop)
      random_nexts.append(is_random_next)
      num_maskeds.append(num_masked)
      if decisions is not None:
        batch.explicit.append(len(random_nexts) - 1)
        batch.decisions += decisions
      if wwm:
        batch.picked += picked
      else:
        region_starts.append(region_start)
        walk_lens.append(walk_len)
      if len(random_nexts) >= batch_size:
        rng.pos = p
        self.flush(records, rng)
        batch = self._batch
        ranges, random_nexts, num_maskeds = batch.ranges, batch.random_next, batch.num_masked
        region_starts, walk_lens = batch.region_start, batch.walk_len
      chunk = chunk_end - unused
    rng.pos = p

  def _decide(self, num_masked, rng, p):
    """The mask decisions in Python: (list of _MASKED, _KEPT or a random id; new p).

    Per mask: random() < 0.8 -> [MASK]; else random() < 0.5 -> kept; else a random id.
    """
    top8 = rng.top8
    decisions = []
    remaining = num_masked
    lo8, exact8 = self._mask8
    mask_run = self._mask_run.match
    while remaining:
      run = (mask_run(top8, p, p + 2 * remaining).end() - p) >> 1
      if run:
        decisions += [_MASKED] * run
        p += 2 * run
        remaining -= run
        if not remaining:
          break
      h = top8[p]
      if h < lo8 or (h == lo8 and exact8 and rng.random_at(p) < 0.8):
        decisions.append(_MASKED)
        p += 2
      elif top8[p + 2] < 128:
        decisions.append(_KEPT)
        p += 4
      else:
        r, p = rng.randbelow_at(self.vocab_size, p + 4)
        decisions.append(r)
      remaining -= 1
    return decisions, p

  def _whole_word_picks(self, a_start, len_a, b_start, len_b, num_to_predict, chars, p):
    """The later original's whole-word selection: (positions in masking order, new p).

    A word is a piece and the ``##`` pieces after it (across the middle [SEP] too, as in the
    original); words are shuffled; a word that would take the count past num_to_predict is
    skipped.
    """
    cont = self.continuation
    flags = cont[a_start:a_start + len_a] + b"\x00" + cont[b_start:b_start + len_b]
    groups = []
    for k, is_cont in enumerate(flags):
      if k == len_a:  # The middle [SEP].
        continue
      if is_cont and groups:
        groups[-1].append(k + 1)
      else:
        groups.append([k + 1])
    start = p
    p = self.walks.walk(chars, p, len(groups), self.thresholds)
    shuffle_from_walk(groups, chars[start:p], self.thresholds, self.shift15)
    picked = []
    for group in groups:
      if len(picked) >= num_to_predict:
        break
      if len(picked) + len(group) > num_to_predict:
        continue
      picked += group
    return picked, p

  def _encode_batch(self, batch, rng):
    """Gathers tokens, replays the candidate shuffles, applies the masks, serializes.

    Shapes: B instances, T = their tokens in all, P = max_predictions_per_seq.
    """
    L, P = self.options.max_seq_length, self.options.max_predictions_per_seq
    B = len(batch)
    ranges = np.array(batch.ranges, np.int64).reshape(B, 4)            # [B, 4]
    a_start, b_start = ranges[:, 0], ranges[:, 2]
    len_a = ranges[:, 1] - a_start                                     # [B]
    len_b = ranges[:, 3] - b_start                                     # [B]
    n_tokens = len_a + len_b + 3                                       # [B]
    row_start = np.cumsum(n_tokens) - n_tokens                         # [B] into the T tokens
    # [CLS] A [SEP] B [SEP]: five pieces per row, gathered from the corpus (the 1-token
    # pieces read token 0 and are overwritten).
    ones = np.ones_like(len_a)
    zeros = np.zeros_like(a_start)
    piece_len = np.stack([ones, len_a, ones, len_b, ones], axis=1).ravel()      # [5B]
    piece_src = np.stack([zeros, a_start, zeros, b_start, zeros], axis=1).ravel()  # [5B]
    piece_out = np.cumsum(piece_len) - piece_len
    total = int(n_tokens.sum())
    index = np.repeat(piece_src - piece_out, piece_len) + np.arange(total)  # [T]
    tokens = self.corpus_tokens[index] if total else np.zeros([0], np.int32)  # [T]
    tokens[row_start] = self.cls_id
    tokens[row_start + len_a + 1] = self.sep_id
    tokens[row_start + n_tokens - 1] = self.sep_id

    num_masked = np.array(batch.num_masked, np.int64)                  # [B]
    slot = np.arange(P)[None, :] < num_masked[:, None]                 # [B, P] real predictions
    explicit = np.zeros([B], bool)                                     # [B] decided in Python
    explicit[batch.explicit] = True
    decisions = np.zeros([B, P], np.int64)
    if self.continuation is None:
      # The top 15 bits of every region's words, end to end (zeros after, for reads past the
      # end).
      region_start = np.array(batch.region_start, np.int64)            # [B] addresses
      words, base = rng.history_since(int(region_start.min()))         # [W]
      # int16: half the memory traffic of the replay's reads.
      top15 = np.zeros([words.size + 8], np.int16)                     # [W + 8]
      np.right_shift(words, 17, out=top15[:words.size], casting="unsafe")
      words = top15
      region_start -= base                                             # [B] into words
      cand = _first_picks(words, region_start, len_a + len_b, P, self.thresholds,
                          self.shift15)                                # [B, P]
      positions = cand + 1 + (cand >= len_a[:, None])                  # skip [CLS], middle [SEP]
      implicit = ~explicit
      if implicit.any():
        decisions[implicit] = _decode_decisions(
            words, (region_start + np.array(batch.walk_len, np.int64))[implicit],
            num_masked[implicit], P, self._mask15[0], self.vocab_size)
    else:
      positions = np.zeros([B, P], np.int64)
      positions[slot] = batch.picked
    decisions[slot & explicit[:, None]] = batch.decisions
    # Sorted by position (positions are distinct); then padding (position 0, id 0).
    keyed = np.where(slot, positions * P + np.arange(P), (L + 1) * P)  # position, then slot
    keyed.sort(axis=1)
    positions = np.where(slot, keyed // P, 0)                          # [B, P]
    decisions = np.take_along_axis(decisions, keyed % P, axis=1)       # [B, P]
    flat = (row_start[:, None] + positions)[slot]                      # [K] masked, in T
    masked_lm_ids = np.zeros([B, P], np.int64)
    masked_lm_ids[slot] = tokens[flat]
    decided = decisions[slot]
    tokens[flat] = np.where(decided == _MASKED, self.mask_id,
                            np.where(decided == _KEPT, tokens[flat], decided))

    summary = self.summary
    summary.instances += B
    summary.tokens += total
    summary.masked += int(num_masked.sum())
    summary.random_next += sum(batch.random_next)
    summary.capped += int(self.capped[n_tokens].sum())
    return self.encoder.encode_batch(tokens, row_start, n_tokens, len_a, positions,
                                     masked_lm_ids, num_masked, batch.random_next)


def _first_picks(words, start, n_cand, count, thresholds, shift15):
  """The first ``count`` items of each ``random.shuffle(list(range(n_cand[b])))``, replayed
  from the words of its walk, for all rows at once: [B, count] (-1 past n_cand).

  Fisher-Yates in lockstep: step i (i = n_max-1 .. 1) swaps pool[i] and pool[j] in every row
  with n_cand > i, j read from the row's next accepted word (rejected ones are skipped).

  Args:
    words: [W] top-15-bit words; row b's walk starts at words[start[b]].
    start, n_cand: [B].
  """
  B = len(n_cand)
  order = np.argsort(-n_cand, kind="stable")                           # longest first
  n_sorted = n_cand[order]
  ptr = start[order].copy()                                            # [B] next word per row
  n_max = int(n_sorted[0]) if B else 0
  size = max(n_max, count)
  pool = np.repeat(np.arange(size, dtype=np.int32)[:, None], B, axis=1).ravel()  # [size * B]
  active = np.searchsorted(-n_sorted, -np.arange(n_max + 1), side="left")  # rows with n > i
  cols = np.arange(B)
  for i in range(n_max - 1, 0, -1):
    a = int(active[i])
    t = thresholds[i]
    ptr_a = ptr[:a]
    v = words[ptr_a]
    bad = np.flatnonzero(v >= t)
    while bad.size:
      ptr_a[bad] += 1
      vb = words[ptr_a[bad]]
      v[bad] = vb
      bad = bad[vb >= t]
    ptr_a += 1
    there = (v >> shift15[i]).astype(np.int64)
    there *= B
    there += cols[:a]                                                  # pool[j, row]
    here = pool[i * B:i * B + a]                                       # pool[i, row], a view
    if i >= count:  # Position i is final and not wanted: only its item moves (to j).
      pool[there] = here
    else:
      item = pool[there]
      pool[there] = here
      here[:] = item
  picks = np.empty([B, count], np.int64)
  picks[order] = pool.reshape(size, B)[:count].T
  picks[np.arange(count)[None, :] >= n_cand[:, None]] = -1
  return picks


def _decode_decisions(words, start, count, width, mask_below, vocab_size):
  """Mask decisions read back from words a regex validated: [B, width] (0 past count).

  Per mask: top15 < mask_below -> _MASKED (2 words); else top15 of the third word < 2**14 ->
  _KEPT (4 words); else a random id: the first later word whose top k bits (k =
  V.bit_length()) are < V, those bits.
  """
  B = len(count)
  decisions = np.zeros([B, width], np.int64)
  ptr = start.copy()
  shift = 15 - vocab_size.bit_length()
  below = vocab_size << shift  # randbelow(V) accepts top15 < below (top k bits < V).
  for t in range(int(count.max()) if B else 0):
    rows = np.flatnonzero(count > t)
    q = ptr[rows]
    masked = words[q] < mask_below
    kept = ~masked & (words[q + 2] < 0x4000)
    drawn = ~masked & ~kept
    decisions[rows[masked], t] = _MASKED
    decisions[rows[kept], t] = _KEPT
    q = q + np.where(masked, 2, 4)
    d = q[drawn]
    v = words[d]
    bad = np.flatnonzero(v >= below)
    while bad.size:
      d[bad] += 1
      vb = words[d[bad]]
      v[bad] = vb
      bad = bad[vb >= below]
    decisions[rows[drawn], t] = v >> shift
    q[drawn] = d + 1
    ptr[rows] = q
  return decisions


def records_from_corpus(corpus, maker, rng, dupe_factor):
  """The original's create_training_instances after reading: all framed records, shuffled.

  The corpus's documents are shuffled in place first.
  """
  rng.shuffle(corpus.documents)
  records = []
  for _ in range(dupe_factor):
    for doc_index in range(len(corpus.documents)):
      maker.add_document(doc_index, rng, records)
  maker.flush(records, rng)
  rng.keep_history = False
  rng.shuffle(records)
  return records


# --- writing -------------------------------------------------------------------------------------

class RoundRobinWriter:
  """Writes records round-robin over TFRecord files, atomically: temporary names until
  ``commit``; ``discard`` (or an exception inside ``with``) removes them."""

  def __init__(self, output_files, gzip=False):
    self.output_files = list(output_files)
    self._temps = []
    self._writers = []
    for path in self.output_files:
      fileio.make_parent(path)
      tmp = fileio.temp_name(path)
      self._temps.append(tmp)
      self._writers.append(tfrecord.TFRecordWriter(tmp, gzip))
    self._next = 0
    self.written = 0

  def write_framed(self, records):
    """Writes framed records (a list of bytes, ``tfrecord.frame`` of each record), continuing
    the round-robin where the last call left it."""
    count = len(self._writers)
    for k, writer in enumerate(self._writers):
      # Each file's share in order, file by file: the same files as one record at a time.
      _write_joined(writer, records[(k - self._next) % count::count])
    self._next = (self._next + len(records)) % count
    self.written += len(records)

  def append_shard(self, paths, counts, compressed=False):
    """Appends a shard's records, written by a worker: ``paths[k]`` holds the ``counts[k]``
    framed records for output file k (GZIP members if ``compressed``). The kernel copies
    them where it can."""
    for writer, path in zip(self._writers, paths):
      writer.write_file(path, compressed)
    self.written += sum(counts)

  def commit(self):
    for writer in self._writers:
      writer.close()
    for tmp, path in zip(self._temps, self.output_files):
      fileio.commit(tmp, path)
    self._temps = []

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


def _write_joined(writer, records):
  """Writes framed records (a list of bytes) to a ``tfrecord.TFRecordWriter``, joined a few MB
  at a time."""
  for start in range(0, len(records), 8192):
    writer.write_framed(b"".join(records[start:start + 8192]))


# --- sharded mode --------------------------------------------------------------------------------

def plan_shards(input_files, shard_bytes):
  """Cuts the input into shards: (path, start, end) byte ranges that hold whole documents.

  A file up to ``shard_bytes`` is one shard; a larger one is cut at the first document
  boundary (just after a blank line) at or after every ``shard_bytes``. Depends only on the
  files and ``shard_bytes``, never on the number of workers.
  """
  shards = []
  for path in input_files:
    size = fileio.file_size(path)
    start = 0
    while size - start > shard_bytes:
      cut = _document_boundary(path, start + shard_bytes, size)
      if cut is None:
        break
      shards.append((path, start, cut))
      start = cut
    shards.append((path, start, None))
  return shards


def _document_boundary(path, offset, size):
  """The byte after the first blank line that ends at or after ``offset``, or None."""
  for line_start, raw in _iter_lines(path, offset, size):
    if line_start < offset:  # Skip the line ``offset`` falls in.
      continue
    try:
      blank = not raw.decode("utf-8").strip()
    except UnicodeDecodeError:
      blank = False
    if blank:
      # The next line starts after this one's "\n" (and any "\r" that readline dropped).
      with fileio.open_file(path, "rb") as f:
        f.seek(line_start)
        rest = f.read(min(size - line_start, 1 << 16))
      newline = rest.find(b"\n")
      if newline < 0:
        return None
      cut = line_start + newline + 1
      return cut if cut < size else None
  return None


_WORKER = {}


def _init_worker(tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
                 num_outputs, gzip):
  _WORKER.update(tokenizer=tokenizer, options=options, skip=skip_invalid_utf8, shards=shards,
                 vocab_file=vocab_file, line_tokenizer=LineTokenizer(tokenizer),
                 spill_dir=spill_dir, num_outputs=num_outputs, gzip=gzip)


def _shard_records(shard_index):
  """Worker: makes one shard's records, with its own generator, and writes them out for the
  parent to append: record i goes to output file ``i % num_outputs``, each file's share framed
  (and GZIP-compressed with ``gzip``) end to end in a file of ``spill_dir``.

  Returns (those files, their record counts, summary). Framing, compressing and writing here
  keep the work off the parent, which only appends files: sending the records back through a
  pipe made the parent the bottleneck (receiving and writing them cost it about an eighth of
  all the workers' work, and compressing them would cost more than all of it).
  """
  options = _WORKER["options"]
  summary = Summary(shards=1)
  path, start, end = _WORKER["shards"][shard_index]
  corpus = read_corpus([(path, start, end)], _WORKER["line_tokenizer"], summary,
                       _WORKER["skip"])
  records = []
  if corpus.documents:
    maker = InstanceMaker(corpus, _WORKER["tokenizer"].vocab, options, summary,
                          _WORKER["vocab_file"])
    rng = ReferenceRandom(f"{options.random_seed}/{shard_index}")
    records = records_from_corpus(corpus, maker, rng, options.dupe_factor)
    del corpus, maker
  paths, counts = [], []
  num_outputs = _WORKER["num_outputs"]
  for k in range(num_outputs):
    share = records[k::num_outputs]
    paths.append(os.path.join(_WORKER["spill_dir"], f"shard-{shard_index}-{k}.records"))
    counts.append(len(share))
    writer = tfrecord.TFRecordWriter(paths[-1], _WORKER["gzip"])
    _write_joined(writer, share)
    writer.close()
  summary.peak_rss_mb = _peak_rss_mb()
  return paths, counts, summary


def _peak_rss_mb():
  """Peak resident memory of this process in MB (0 where ``resource`` is unavailable)."""
  try:
    import resource  # pylint: disable=import-outside-toplevel
  except ImportError:
    return 0.0
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


# --- the whole job -------------------------------------------------------------------------------

def create_pretraining_data(input_files, output_files, tokenizer, options=InstanceOptions(), *,
                            num_workers=0, shard_size_mb=16.0, gzip=False,
                            skip_invalid_utf8=False, vocab_file="vocab"):
  """Reads raw text, writes pretraining TFRecords; returns a ``Summary``.

  Args:
    input_files: globs (list, or a comma-separated string as the original's --input_file).
    output_files: TFRecord paths (list or comma-separated); records go round-robin (in
      sharded mode, round-robin within each shard).
    tokenizer: a ``bert_tf.tokenization.FullTokenizer`` (or anything with ``vocab``,
      ``tokenize`` and ``convert_tokens_to_ids``).
    options: ``InstanceOptions`` (the original's flags).
    num_workers: 0 for the original's exact output in this process; N >= 1 for sharded mode
      with N worker processes (deterministic, not the original's output).
    shard_size_mb: sharded mode: larger files are cut into shards of about this size.
    gzip: write GZIP-compressed TFRecords.
    skip_invalid_utf8: skip and count lines that are not UTF-8 instead of failing.
    vocab_file: the vocab's path, for messages.
  Raises:
    BertTfError: no input file, no text, a bad flag or vocab, invalid UTF-8. Nothing is left
      under an output name then.
  """
  t0 = time.time()
  options.validate()
  if num_workers < 0:
    raise BertTfError(f"--num_workers={num_workers}: must be 0 (the original's output) or more")
  if shard_size_mb <= 0:
    raise BertTfError(f"--shard_size_mb={shard_size_mb}: must be positive")
  if isinstance(output_files, str):
    output_files = [f for f in output_files.split(",") if f]
  if not output_files:
    raise BertTfError("--output_file: no output file given")
  special_token_ids(tokenizer.vocab, vocab_file)
  files = expand_input_files(input_files)
  warning = options.mask_cap_warning()
  if warning:
    logger.warning("%s", warning)
  summary = Summary(files=len(files), output_files=tuple(output_files))
  pool = contextlib.nullcontext()
  spill = contextlib.nullcontext()
  if num_workers > 0:
    shards = plan_shards(files, max(1, int(shard_size_mb * (1 << 20))))
    spill = _spill_dir(output_files[0])
    pool = _worker_pool(num_workers, tokenizer, options, skip_invalid_utf8, shards, vocab_file,
                        spill.name, len(output_files), gzip)
  # The workers start before any output file is opened (they are forked on Linux).
  with spill, pool, RoundRobinWriter(output_files, gzip) as writer:
    if num_workers <= 0:
      _reference_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer)
    else:
      _sharded_run(pool, shards, num_workers, summary, writer, gzip)
    if summary.instances == 0:
      raise BertTfError(f"--input_file: no text in {len(files)} input files (expected one "
                        "sentence per line, blank lines between documents)")
    if summary.one_document_corpora:
      logger.warning("%d corpus/shard(s) hold a single document: its random next sentences "
                     "come from the same document", summary.one_document_corpora)
  summary.seconds = time.time() - t0
  summary.peak_rss_mb = _peak_rss_mb()
  return summary


def _reference_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer):
  summary.shards = 1
  corpus = read_corpus([(f, 0, None) for f in files], LineTokenizer(tokenizer), summary,
                       skip_invalid_utf8)
  if not corpus.documents:
    return
  maker = InstanceMaker(corpus, tokenizer.vocab, options, summary, vocab_file)
  rng = ReferenceRandom(options.random_seed)
  records = records_from_corpus(corpus, maker, rng, options.dupe_factor)
  del corpus, maker
  writer.write_framed(records)


def _spill_dir(output_file):
  """A temporary directory for the workers' shard files, removed at the end: beside the
  output when it is local (the same file system, so appending is a copy in the kernel), else
  the system's temporary directory."""
  local_dir = None if fileio.is_remote(output_file) else (
      os.path.dirname(os.path.abspath(output_file)))
  return tempfile.TemporaryDirectory(prefix=".bert_tf-shards-", dir=local_dir)


def _worker_pool(num_workers, tokenizer, options, skip_invalid_utf8, shards, vocab_file,
                 spill_dir, num_outputs, gzip):
  context = multiprocessing.get_context(
      "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
  return context.Pool(num_workers, _init_worker,
                      (tokenizer, options, skip_invalid_utf8, shards, vocab_file, spill_dir,
                       num_outputs, gzip))


def _sharded_run(pool, shards, num_workers, summary, writer, gzip):
  """Shards to the workers, their records appended in shard order as they come back.

  At most two shards per worker are in flight, so at most that many shards' records wait in
  temporary files, and each worker holds one shard's corpus and records.
  """
  window = 2 * num_workers
  pending = collections.deque()
  next_shard = 0
  while pending or next_shard < len(shards):
    while next_shard < len(shards) and len(pending) < window:
      pending.append(pool.apply_async(_shard_records, (next_shard,)))
      next_shard += 1
    paths, counts, shard_summary = pending.popleft().get()
    summary.add(shard_summary)
    writer.append_shard(paths, counts, compressed=gzip)
    for path in paths:
      os.remove(path)
  summary.shards = len(shards)
