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

- Every draw CPython makes is a function of the Mersenne Twister's 32-bit outputs
  (``ReferenceRandom``), so they are read in bulk and the draws are computed from them.
  The candidate shuffle of the masking step (most of the draws) walks the words with a
  precompiled regular expression, in C.
- Tokens are ids, not strings; each distinct word is WordPiece-tokenized once.
- Records are serialized by hand (protobuf wire format, keys in canonical order), not through
  ``tf.train.Example``.

Whole-word masking (``do_whole_word_mask``) follows the original's later version (a word's
``##`` pieces are masked together; a word that would exceed ``max_predictions_per_seq`` is
skipped); with it off, both versions make the same draws.

Sharded mode (``num_workers >= 1``): the input is cut into shards (each file, large files split
at document boundaries into pieces of about ``shard_size_mb``), and each shard is a small corpus
of its own, processed by one of ``num_workers`` processes with its own generator seeded from
``(random_seed, shard index)``: documents do not cross files and random next sentences come
from the same shard. Memory is bounded by a shard, not the corpus. The output is deterministic
for a given seed (and independent of the number of workers) but not the reference output.

Shape legend (per record):
  L = max_seq_length, P = max_predictions_per_seq, n = real tokens ([CLS] A [SEP] B [SEP])
"""

import collections
import dataclasses
import glob as _glob
import io
import logging
import multiprocessing
import os
import random
import re
import resource
import struct
import sys
import time

import numpy as np
import tensorflow as tf

from bert_tf import fileio
from bert_tf.data import features as features_lib
from bert_tf.errors import BertTfError

logger = logging.getLogger("bert_tf.data.pretraining")

CLS, SEP, MASK, UNK = "[CLS]", "[SEP]", "[MASK]", "[UNK]"
_READ_CHUNK_BYTES = 1 << 22


# --- the original's random draws --------------------------------------------------------------

_TWO_26 = 67108864.0
_TWO_M53 = 1.0 / 9007199254740992.0


class ReferenceRandom:
  """The draws of ``random.Random(seed)``, computed from a buffer of its 32-bit outputs.

  CPython builds each draw from the Mersenne Twister's 32-bit words w0, w1, ...:
    random()        two words a, b: ((a >> 5) * 2**26 + (b >> 6)) / 2**53
    randbelow(n)    k = n.bit_length(); next word w until (w >> (32 - k)) < n; that value
                    (this is getrandbits(k) with rejection, even for n = 1)
    randint(a, b)   a + randbelow(b - a + 1)
    shuffle(x)      for i = len(x)-1 .. 1: swap x[i] and x[randbelow(i + 1)]
  ``getrandbits(32 * m)`` returns the next m words as one integer, so the words are read in
  blocks and every draw is a list lookup. The hot loops of ``InstanceMaker`` read ``words``,
  ``floats`` and ``chars`` directly, at ``pos``:
    words[q]   the q-th buffered word (int)
    floats[q]  random() made of words q and q+1
    chars      str, chars[q] = chr(words[q] >> 17) (the top 15 bits), for regex walks
  """

  def __init__(self, seed, block_words=1 << 16):
    """Args:
      seed: any seed ``random.Random`` accepts (the original passes ``--random_seed``).
      block_words: words read from the generator per refill.
    """
    self._rng = random.Random(seed)
    self._block = block_words
    self.words = []
    self.floats = []
    self.chars = ""
    self.pos = 0

  def reserve(self, count):
    """Buffers at least ``count`` unread words after ``pos``; may move ``pos`` (to 0)."""
    if len(self.words) - self.pos > count:
      return
    keep = np.array(self.words[self.pos:], dtype=np.uint32)
    need = max(count + 1 - keep.size, self._block)
    raw = self._rng.getrandbits(32 * need).to_bytes(4 * need, sys.byteorder)
    w = np.concatenate([keep, np.frombuffer(raw, dtype=np.uint32)])
    self.words = w.tolist()
    self.floats = (((w[:-1] >> 5) * _TWO_26 + (w[1:] >> 6)) * _TWO_M53).tolist()
    self.chars = (w >> 17).astype("<u4").tobytes().decode("utf-32-le")
    self.pos = 0

  def grow(self):
    """Doubles what is buffered (after a draw ran past the end)."""
    self.reserve(2 * (len(self.words) - self.pos) + self._block)

  # Plain draws, one at a time (documents and instances shuffles, tests).
  def random(self):
    self.reserve(2)
    value = self.floats[self.pos]
    self.pos += 2
    return value

  def randbelow(self, n):
    shift = 32 - n.bit_length()
    while True:
      self.reserve(1)
      r = self.words[self.pos] >> shift
      self.pos += 1
      if r < n:
        return r

  def randint(self, a, b):
    return a + self.randbelow(b - a + 1)

  def shuffle(self, x):
    """Shuffles list ``x`` in place exactly as ``random.Random.shuffle``."""
    i = len(x) - 1
    while i > 0:
      self.reserve(min(i, self._block))
      words, p, stop = self.words, self.pos, len(self.words)
      while i > 0 and p < stop:
        n = i + 1
        shift = 32 - n.bit_length()
        r = words[p] >> shift
        p += 1
        if r < n:
          x[i], x[r] = x[r], x[i]
          i -= 1
      self.pos = p


class _ShuffleWalks:
  """Where the words of one candidate shuffle end and what it picks, in C (``re``).

  A shuffle of n candidates takes one accepted word per step i = n-1 .. 1, skipping rejected
  ones; a word is accepted at step i iff its top k bits (k = (i+1).bit_length()) are <= i,
  i.e. iff its top-15-bit character is below (i + 1) << (15 - k). So the whole walk is the
  regular expression  ([rejected_i]*([accepted_i]))  for i = n-1 .. 1, and the captured
  characters give the draws. Patterns are compiled for the lengths that are seen often (the
  full-length one, mostly); the others are walked in Python.
  """

  _COMPILE_AFTER = 64  # A pattern costs ~1 ms per step to compile; ~5 us saved per use.
  _MAX_N = 1 << 15

  def __init__(self):
    self._patterns = {}
    self._seen = collections.Counter()

  @staticmethod
  def _compile(n):
    parts = []
    for i in range(n - 1, 0, -1):
      t = (i + 1) << (15 - (i + 1).bit_length())
      parts.append("[\\u%04x-\\u7fff]*([\\x00-\\u%04x])" % (t, t - 1))
    return re.compile("".join(parts))

  def pattern(self, n):
    rx = self._patterns.get(n)
    if rx is None and n < self._MAX_N:
      self._seen[n] += 1
      if self._seen[n] >= self._COMPILE_AFTER:
        rx = self._patterns[n] = self._compile(n)
    return rx


# Shift that turns a top-15-bit character into the draw of step i: SHIFT15[i] = 15 - k.
def _shift15_table(n):
  return [0] + [15 - (i + 1).bit_length() for i in range(1, n)]


def shuffle_positions(stream_words, p, x, walks, shift15):
  """Shuffles list ``x`` in place from the words at ``p`` as random.shuffle; returns the end.

  ``stream_words`` is the ``ReferenceRandom`` (its buffers are read directly). Raises
  IndexError when the buffer ends first (the caller grows it and retries).
  """
  n = len(x)
  if n < 2:
    return p
  rx = walks.pattern(n)
  if rx is not None:
    m = rx.match(stream_words.chars, p)
    if m is None:
      raise IndexError("random buffer exhausted")
    i = n - 1
    for c in m.groups():
      j = ord(c) >> shift15[i]
      x[i], x[j] = x[j], x[i]
      i -= 1
    return m.end()
  words = stream_words.words
  for i in range(n - 1, 0, -1):
    m = i + 1
    shift = 32 - m.bit_length()
    r = words[p] >> shift
    p += 1
    while r >= m:
      r = words[p] >> shift
      p += 1
    x[i], x[r] = x[r], x[i]
  return p


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



class RecordEncoder:
  """Serializes pretraining records as ``tf.train.Example`` bytes, by hand.

  The bytes are the canonical serialization (``SerializeToString(deterministic=True)``: map
  keys sorted) of the Example the original builds. The original's own bytes vary from run to
  run (protobuf's map order is hash-seeded per process) but parse to the same features.

  Wire format: Example{1: Features{1: map<string, Feature>}}, each map entry {1: key,
  2: Feature}, Feature{2: FloatList | 3: Int64List}, lists packed in field 1. For a given
  feature, everything before its packed values depends only on their byte length, so those
  prefixes are built once per length.
  """

  def __init__(self, vocab_size, max_seq_length, max_predictions_per_seq):
    self.max_seq_length = max_seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    # varint bytes of every id and position (ids are < vocab_size, positions < L).
    self.varints = [_varint(i) for i in range(max(vocab_size, max_seq_length))]
    self._prefixes = {name: {} for name in features_lib.PRETRAINING_FEATURE_NAMES}

  def prefix(self, name, size):
    """The bytes of feature ``name``'s map entry before its ``size`` bytes of packed values."""
    cache = self._prefixes[name]
    prefix = cache.get(size)
    if prefix is None:
      is_float = features_lib.PRETRAINING_FEATURES[name][0] == tf.float32
      key = b"\x0a" + _varint(len(name)) + name.encode()
      values = (b"\x0a" + _varint(size)) if size else b""
      feature_len = len(values) + size
      feature = (b"\x12" if is_float else b"\x1a") + _varint(feature_len) + values
      body_len = len(key) + 1 + len(_varint(len(feature) + size)) + len(feature) + size
      prefix = (b"\x0a" + _varint(body_len) + key + b"\x12" + _varint(len(feature) + size) +
                feature)
      cache[size] = prefix
    return prefix

  def encode(self, input_ids, len_a, masked_lm_positions, masked_lm_ids, is_random_next):
    """One record, as bytes of a serialized ``tf.train.Example``.

    Args:
      input_ids: list of n ids, [CLS] A [SEP] B [SEP] after masking (n <= L).
      len_a: number of A tokens (segment 0 is [CLS] A [SEP], segment 1 is B [SEP]).
      masked_lm_positions: sorted positions of the masked tokens (k <= P of them).
      masked_lm_ids: the original ids at those positions.
      is_random_next: whether B is a random sentence (next_sentence_labels 1).
    """
    varints = self.varints
    L, P = self.max_seq_length, self.max_predictions_per_seq
    n = len(input_ids)
    k = len(masked_lm_positions)
    join = b"".join
    pad_l = b"\x00" * (L - n)
    pad_p = b"\x00" * (P - k)
    ids = join(map(varints.__getitem__, input_ids)) + pad_l
    lm_ids = join(map(varints.__getitem__, masked_lm_ids)) + pad_p
    lm_positions = join(map(varints.__getitem__, masked_lm_positions)) + pad_p
    prefix = self.prefix
    body = join((
        prefix("input_ids", len(ids)), ids,
        prefix("input_mask", L), b"\x01" * n, pad_l,
        prefix("masked_lm_ids", len(lm_ids)), lm_ids,
        prefix("masked_lm_positions", len(lm_positions)), lm_positions,
        prefix("masked_lm_weights", 4 * P), b"\x00\x00\x80\x3f" * k, b"\x00\x00\x00\x00" * (P - k),
        prefix("next_sentence_labels", 1), b"\x01" if is_random_next else b"\x00",
        prefix("segment_ids", L), b"\x00" * (len_a + 2), b"\x01" * (n - len_a - 2), pad_l,
    ))
    return b"\x0a" + _varint(len(body)) + body


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
  files = []
  for pattern in patterns:
    matched = tf.io.gfile.glob(pattern) if pattern else []
    if not matched:
      raise BertTfError(f"--input_file: no file matches {pattern!r}")
    files.extend(matched)
  return files


def _iter_lines(path, start=0, end=None):
  """Yields (byte offset, line bytes) of ``path`` from ``start`` to ``end``, as GFile.readline.

  Like TensorFlow's readline (which the original uses): lines end at "\\n", every "\\r" is
  dropped, and a last piece that is empty once "\\r" is dropped is no line.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
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
  with tf.io.gfile.GFile(path, "rb") as f:
    done = 0
    while done < offset:
      data = f.read(min(_READ_CHUNK_BYTES, offset - done))
      if not data:
        break
      count += data.count(b"\n")
      done += len(data)
  return count


class LineTokenizer:
  """Raw line -> list of ids, through a ``FullTokenizer``, each distinct word tokenized once."""

  _MAX_WORDS = 1 << 20

  def __init__(self, tokenizer):
    self.tokenizer = tokenizer
    self.vocab = tokenizer.vocab
    self._cache = {}
    # The word-level path is FullTokenizer.tokenize itself when no never_split tokens are set.
    self._by_word = not getattr(tokenizer, "never_split", ())
    self._basic = getattr(tokenizer, "basic_tokenizer", None)
    self._wordpiece = getattr(tokenizer, "wordpiece_tokenizer", None)
    if self._basic is None or not hasattr(self._wordpiece, "tokenize_word"):
      self._by_word = False

  def __call__(self, text):
    if not self._by_word:
      return self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(text))
    cache = self._cache
    ids = []
    for word in self._basic.tokenize(text):
      pieces = cache.get(word)
      if pieces is None:
        vocab = self.vocab
        pieces = [vocab[piece] for piece in self._wordpiece.tokenize_word(word)]
        if len(cache) >= self._MAX_WORDS:
          cache.clear()
        cache[word] = pieces
      ids += pieces
    return ids


def read_documents(sources, line_tokenizer, summary, skip_invalid_utf8=False, documents=None):
  """Reads sentences into documents as the original: a list of documents of lists of ids.

  Args:
    sources: iterable of (path, start byte, end byte or None).
    line_tokenizer: a ``LineTokenizer``.
    summary: a ``Summary`` whose counters are updated.
    skip_invalid_utf8: skip (and count) lines that are not UTF-8 instead of failing.
    documents: documents to continue (the original's last document goes on in the next file).
  Returns:
    the documents, empty ones included (the caller drops them, as the original).
  Raises:
    BertTfError: a line is not valid UTF-8 (unless skipped).
  """
  if documents is None:
    documents = [[]]
  for path, start, end in sources:
    tokens_before = summary.corpus_tokens
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
        documents.append([])
        continue
      ids = line_tokenizer(line)
      if ids:
        documents[-1].append(ids)
        summary.corpus_tokens += len(ids)
    if summary.corpus_tokens == tokens_before:
      summary.empty_files += 1
      logger.warning("%s: no text%s", path, "" if start == 0 and end is None else
                     f" in bytes {start}-{end}")
  return documents


def _drop_empty(documents, summary):
  kept = [d for d in documents if d]
  summary.empty_documents += len(documents) - len(kept)
  summary.documents += len(kept)
  summary.sentences += sum(len(d) for d in kept)
  summary.one_sentence_documents += sum(1 for d in kept if len(d) == 1)
  if len(kept) == 1:
    summary.one_document_corpora += 1
  return kept


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


_KEEP = -1  # A masking decision: keep the original token (else: [MASK] id or a random id).


class InstanceMaker:
  """Turns documents (lists of sentences of ids) into serialized records, draw for draw as the
  original's ``create_instances_from_document`` + ``create_masked_lm_predictions`` +
  ``write_instance_to_example_files``."""

  def __init__(self, vocab, options, summary, vocab_file="vocab"):
    """Args:
      vocab: token -> id (ordered as vocab.txt; ids 0..V-1).
      options: ``InstanceOptions``.
      summary: a ``Summary`` whose instance counters are updated.
    """
    self.options = options
    self.summary = summary
    self.cls_id, self.sep_id, self.mask_id = special_token_ids(vocab, vocab_file)
    self.vocab_size = len(vocab)
    L, P, prob = options.max_seq_length, options.max_predictions_per_seq, options.masked_lm_prob
    # num_to_predict for n tokens, and whether max_predictions_per_seq lowered it.
    self.num_to_predict = [min(P, max(1, int(round(n * prob)))) for n in range(L + 1)]
    self.capped = [max(1, int(round(n * prob))) > P for n in range(L + 1)]
    self.encoder = RecordEncoder(self.vocab_size, L, P)
    self.is_continuation = None
    if options.do_whole_word_mask:
      self.is_continuation = bytearray(self.vocab_size)
      for token, i in vocab.items():
        if token.startswith("##"):
          self.is_continuation[i] = 1
    self.walks = _ShuffleWalks()
    self.shift15 = _shift15_table(max(L, 2))
    # Enough words for one instance almost always (a draw past the end is retried).
    self._reserve = 4096 + 8 * L

  def add_document(self, documents, doc_index, rng, records):
    """Appends the records of ``documents[doc_index]`` to ``records``."""
    opts = self.options
    document = documents[doc_index]
    max_num_tokens = opts.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < opts.short_seq_prob:
      target = rng.randint(2, max_num_tokens)
    chunk = []
    length = 0
    i = 0
    while i < len(document):
      segment = document[i]
      chunk.append(segment)
      length += len(segment)
      if i == len(document) - 1 or length >= target:
        while True:
          rng.reserve(self._reserve)
          try:
            p, record, unused = self._instance(documents, doc_index, chunk, target, rng, rng.pos)
            break
          except IndexError:  # The buffered words ran out: more, and the same draws again.
            rng.grow()
        rng.pos = p
        records.append(record)
        i -= unused
        chunk = []
        length = 0
      i += 1

  def _instance(self, documents, doc_index, chunk, target, rng, p):
    """One instance from ``chunk`` with the words at ``p``: (new p, record, unused segments)."""
    words, floats = rng.words, rng.floats
    summary = self.summary
    max_num_tokens = self.options.max_seq_length - 3
    n_chunk = len(chunk)
    a_end = 1
    if n_chunk >= 2:  # randint(1, n_chunk - 1)
      n = n_chunk - 1
      shift = 32 - n.bit_length()
      r = words[p] >> shift
      p += 1
      while r >= n:
        r = words[p] >> shift
        p += 1
      a_end = 1 + r
    tokens_a = []
    for segment in chunk[:a_end]:
      tokens_a += segment
    unused = 0
    if n_chunk == 1:
      is_random_next = True
    else:
      is_random_next = floats[p] < 0.5
      p += 2
    if is_random_next:
      target_b = target - len(tokens_a)
      n = len(documents)
      shift = 32 - n.bit_length()
      for _ in range(10):  # randint(0, len(documents) - 1), up to 10 tries for another one
        r = words[p] >> shift
        p += 1
        while r >= n:
          r = words[p] >> shift
          p += 1
        if r != doc_index:
          break
      random_document = documents[r]
      n = len(random_document)
      shift = 32 - n.bit_length()
      start = words[p] >> shift
      p += 1
      while start >= n:
        start = words[p] >> shift
        p += 1
      tokens_b = []
      for j in range(start, n):
        tokens_b += random_document[j]
        if len(tokens_b) >= target_b:
          break
      unused = n_chunk - a_end
    else:
      tokens_b = []
      for segment in chunk[a_end:]:
        tokens_b += segment

    # truncate_seq_pair: trim the longer side (B on ties), front or back with probability 1/2.
    len_a, len_b = len(tokens_a), len(tokens_b)
    if len_a + len_b > max_num_tokens:
      a_lo, a_hi, b_lo, b_hi = 0, len_a, 0, len_b
      while len_a + len_b > max_num_tokens:
        front = floats[p] < 0.5
        p += 2
        if len_a > len_b:
          if front:
            a_lo += 1
          else:
            a_hi -= 1
          len_a -= 1
        else:
          if front:
            b_lo += 1
          else:
            b_hi -= 1
          len_b -= 1
      tokens_a = tokens_a[a_lo:a_hi]
      tokens_b = tokens_b[b_lo:b_hi]

    tokens = [self.cls_id] + tokens_a + [self.sep_id] + tokens_b + [self.sep_id]
    n_tokens = len(tokens)
    num_to_predict = self.num_to_predict[n_tokens]
    if self.is_continuation is None:
      # Candidates are all positions but [CLS] and the [SEP]s, as indexes 0 .. len_a+len_b-1
      # (index c is position c + 1 in A, c + 2 in B); the first num_to_predict after the
      # shuffle are masked.
      cand = list(range(len_a + len_b))
      p = shuffle_positions(rng, p, cand, self.walks, self.shift15)
      picked = [c + 1 if c < len_a else c + 2 for c in cand[:num_to_predict]]
    else:
      picked, p = self._whole_word_candidates(tokens, len_a, num_to_predict, rng, p)
    masked = []
    output = list(tokens)
    mask_id = self.mask_id
    vocab_size = self.vocab_size
    shift = 32 - vocab_size.bit_length()
    for position in picked:
      if floats[p] < 0.8:
        output[position] = mask_id
        p += 2
      elif floats[p + 2] < 0.5:
        p += 4
      else:
        p += 4
        r = words[p] >> shift
        p += 1
        while r >= vocab_size:
          r = words[p] >> shift
          p += 1
        output[position] = r
      masked.append((position, tokens[position]))
    masked.sort()
    positions = [m[0] for m in masked]
    labels = [m[1] for m in masked]
    record = self.encoder.encode(output, len_a, positions, labels, is_random_next)
    summary.instances += 1
    summary.tokens += n_tokens
    summary.masked += len(masked)
    summary.random_next += is_random_next
    summary.capped += self.capped[n_tokens]
    return p, record, unused

  def _whole_word_candidates(self, tokens, len_a, num_to_predict, rng, p):
    """The later original's whole-word selection: (positions in masking order, new p).

    Words are a piece and the ``##`` pieces after it (across the middle [SEP] too, as in the
    original); words are shuffled; a word that would take the count past num_to_predict is
    skipped. Raises IndexError when the buffer ends.
    """
    is_cont = self.is_continuation
    groups = []
    n_tokens = len(tokens)
    for position in range(1, n_tokens - 1):
      if position == len_a + 1:
        continue
      if groups and is_cont[tokens[position]]:
        groups[-1].append(position)
      else:
        groups.append([position])
    p = shuffle_positions(rng, p, groups, self.walks, self.shift15)
    picked = []
    for group in groups:
      if len(picked) >= num_to_predict:
        break
      if len(picked) + len(group) > num_to_predict:
        continue
      picked += group
    return picked, p


def records_from_documents(documents, maker, rng, dupe_factor):
  """The original's create_training_instances after reading: records, shuffled.

  ``documents`` are already without empty ones; they are shuffled in place first.
  """
  rng.shuffle(documents)
  records = []
  for _ in range(dupe_factor):
    for doc_index in range(len(documents)):
      maker.add_document(documents, doc_index, rng, records)
  rng.shuffle(records)
  return records


# --- writing -------------------------------------------------------------------------------------

class RoundRobinWriter:
  """Writes records round-robin over TFRecord files, atomically: temporary names until
  ``commit``; ``discard`` (or an exception inside ``with``) removes them."""

  def __init__(self, output_files, gzip=False):
    self.output_files = list(output_files)
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    self._temps = []
    self._writers = []
    for path in self.output_files:
      parent = os.path.dirname(path)
      if parent and not tf.io.gfile.exists(parent):
        tf.io.gfile.makedirs(parent)
      tmp = fileio.temp_name(path)
      self._temps.append(tmp)
      self._writers.append(tf.io.TFRecordWriter(tmp, options))
    self._next = 0
    self.written = 0

  def write_all(self, records):
    writers = self._writers
    count = len(writers)
    index = self._next
    for record in records:
      writers[index].write(record)
      index += 1
      if index == count:
        index = 0
    self._next = index
    self.written += len(records)

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


# --- sharded mode --------------------------------------------------------------------------------

def plan_shards(input_files, shard_bytes):
  """Cuts the input into shards: (path, start, end) byte ranges that hold whole documents.

  A file up to ``shard_bytes`` is one shard; a larger one is cut at the first document
  boundary (just after a blank line) at or after every ``shard_bytes``. Depends only on the
  files and ``shard_bytes``, never on the number of workers.
  """
  shards = []
  for path in input_files:
    size = tf.io.gfile.stat(path).length
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
      with tf.io.gfile.GFile(path, "rb") as f:
        f.seek(line_start)
        rest = f.read(min(size - line_start, 1 << 16))
      newline = rest.find(b"\n")
      if newline < 0:
        return None
      cut = line_start + newline + 1
      return cut if cut < size else None
  return None


_WORKER = {}


def _init_worker(tokenizer, options, skip_invalid_utf8, shards, vocab_file):
  _WORKER.update(tokenizer=tokenizer, options=options, skip=skip_invalid_utf8, shards=shards,
                 vocab_file=vocab_file, line_tokenizer=LineTokenizer(tokenizer))


def _shard_records(shard_index):
  """Worker: (records, summary) of one shard, with its own generator."""
  options = _WORKER["options"]
  summary = Summary(shards=1)
  path, start, end = _WORKER["shards"][shard_index]
  documents = read_documents([(path, start, end)], _WORKER["line_tokenizer"], summary,
                             _WORKER["skip"])
  documents = _drop_empty(documents, summary)
  records = []
  if documents:
    maker = InstanceMaker(_WORKER["tokenizer"].vocab, options, summary, _WORKER["vocab_file"])
    rng = ReferenceRandom(f"{options.random_seed}/{shard_index}")
    records = records_from_documents(documents, maker, rng, options.dupe_factor)
  summary.peak_rss_mb = _peak_rss_mb()
  return records, summary


def _peak_rss_mb():
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


# --- the whole job -------------------------------------------------------------------------------

def create_pretraining_data(input_files, output_files, tokenizer, options=InstanceOptions(), *,
                            num_workers=0, shard_size_mb=16.0, gzip=False,
                            skip_invalid_utf8=False, vocab_file="vocab"):
  """Reads raw text, writes pretraining TFRecords; returns a ``Summary``.

  Args:
    input_files: globs (list, or a comma-separated string as the original's --input_file).
    output_files: TFRecord paths (list or comma-separated); records go round-robin.
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
  with RoundRobinWriter(output_files, gzip) as writer:
    if num_workers <= 0:
      _reference_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer)
    else:
      _sharded_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer,
                   num_workers, max(1, int(shard_size_mb * (1 << 20))))
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
  documents = read_documents([(f, 0, None) for f in files], LineTokenizer(tokenizer), summary,
                             skip_invalid_utf8)
  documents = _drop_empty(documents, summary)
  if not documents:
    return
  maker = InstanceMaker(tokenizer.vocab, options, summary, vocab_file)
  rng = ReferenceRandom(options.random_seed)
  records = records_from_documents(documents, maker, rng, options.dupe_factor)
  del documents
  writer.write_all(records)


def _sharded_run(files, tokenizer, options, skip_invalid_utf8, vocab_file, summary, writer,
                 num_workers, shard_bytes):
  shards = plan_shards(files, shard_bytes)
  context = multiprocessing.get_context("fork" if "fork" in
                                        multiprocessing.get_all_start_methods() else "spawn")
  initargs = (tokenizer, options, skip_invalid_utf8, shards, vocab_file)
  # At most two shards per worker in flight: the parent holds only those, in order.
  window = 2 * num_workers
  with context.Pool(num_workers, _init_worker, initargs) as pool:
    pending = collections.deque()
    next_shard = 0
    while pending or next_shard < len(shards):
      while next_shard < len(shards) and len(pending) < window:
        pending.append(pool.apply_async(_shard_records, (next_shard,)))
        next_shard += 1
      records, shard_summary = pending.popleft().get()
      summary.add(shard_summary)
      writer.write_all(records)
  summary.shards = len(shards)
