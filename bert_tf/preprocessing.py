"""In-graph BERT preprocessing: raw strings -> input_word_ids, input_mask, input_type_ids.

``BertPreprocessor`` is a Keras layer made of TensorFlow ops only (tensorflow-text's
``FastWordpieceTokenizer`` for WordPiece), so it runs inside ``tf.function``, ``tf.data`` and a
SavedModel serving signature, and its ids equal ``bert_tf.tokenization.FullTokenizer``'s (and so
Google's) for the same vocab and casing.

How it stays exact. tensorflow-text's own normalisers (``case_fold_utf8``, ICU NFD, its
punctuation classes) follow ICU, whose case folding and Unicode version differ from Python's
``str.lower`` / ``unicodedata``, which define the original. So this layer does not use them:
at construction it asks the Python tokenizer (``bert_tf.tokenization``, the same rules
``BasicTokenizer`` applies) what becomes of every code point on its own, and stores the answer
as a two-level lookup table:

  - dropped (control characters, NUL, U+FFFD) -> nothing; whitespace -> a space;
  - CJK ideographs and punctuation -> themselves, standing alone as a word;
  - with ``do_lower_case``: ``lower()``, NFD and accent removal (e.g. "É" -> "e",
    Hangul syllable -> its 2-3 jamo, "≠" -> "=" standing alone).

In the graph: UTF-8 decode (invalid bytes dropped, as the original) -> table lookup -> expand
each code point to its replacement -> split into words at spaces and around standalone
characters -> words over 200 characters become [UNK] -> ``FastWordpieceTokenizer`` (greedy
longest match, the same result as the original's loop) -> truncation, [CLS]/[SEP], padding.

Per-character rules compose to the original's whole-text result except in two places, both
context rules of Unicode: (1) the final sigma of ``str.lower`` ("ΟΔΟΣ" -> "οδος"), which this
layer implements in the graph with Python's own cased / case-ignorable classes; (2) NFD's
canonical reordering of two adjacent spacing combining marks (Mc) with nonzero, different
combining classes, e.g. U+302E U+1715: 25 code points in all, none of them ever adjacent in
real text. (2) is the one known mismatch; tests/tokenization/test_preprocessing.py pins it.

Shape legend:
  B = batch size (strings per call)
  N = code points in the batch, M = code points after replacement, W = words in the batch
  P = word pieces in the batch, T = word pieces of one text, S = ``max_seq_length``
"""

import functools
import os
import unicodedata

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from bert_tf.errors import BertTfError

_NUM_CODE_POINTS = 0x110000
_BLOCK_BITS = 8  # Two-level table: 4352 blocks of 256 code points, identical blocks shared.
_SPACE = 0x20
_CAPITAL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2
# Table entry = replacement index << 3 | standalone << 2 | sigma context class.
_OTHER, _CASED, _TRANSPARENT = 0, 1, 2


def _single_char_outputs(chars, do_lower_case):
  """What BasicTokenizer makes of each of ``chars`` alone: strings where " " separates words.

  All characters go through ``BasicTokenizer.normalize`` in one string, between separators
  that every step leaves alone and that stop context rules (U+10FFFF: unassigned, neither
  cased nor case-ignorable, combining class 0).
  """
  separator = "\U0010ffff"
  text = tokenization.BasicTokenizer(do_lower_case).normalize(separator.join(chars))
  outputs = text.split(separator)
  assert len(outputs) == len(chars)
  # Words are split on whatever str.split() splits on, so every such character becomes " ".
  return [out if out.isascii() or not any(c.isspace() for c in out) else
          "".join(" " if c.isspace() else c for c in out) for out in outputs]


def _sigma_classes(chars):
  """Case classes for the final-sigma rule of ``str.lower``, asked of ``str.lower`` itself.

  Returns one of _OTHER, _CASED, _TRANSPARENT (case-ignorable, skipped by the rule) per char.
  A Σ right after ``c`` is final iff ``c`` is cased and not case-ignorable; after "A" ``c`` it is
  final iff ``c`` is case-ignorable or cased. NUL separates the probes (it is neither).
  """
  assert "\x00" not in chars
  after_c = "\x00".join(c + "Σ" for c in chars).lower().split("\x00")
  after_a_c = "\x00".join("A" + c + "Σ" for c in chars).lower().split("\x00")
  classes = []
  for probe_c, probe_a_c in zip(after_c, after_a_c):
    if probe_c[-1] == "ς":
      classes.append(_CASED)
    elif probe_a_c[-1] == "ς":
      classes.append(_TRANSPARENT)
    else:
      classes.append(_OTHER)
  return classes


@functools.lru_cache(maxsize=2)
def _char_tables(do_lower_case):
  """Builds the code point table (about 1.5 s, once per process and casing).

  Returns:
    blocks: int32 [4352], block index of code point >> 8.
    entries: int32 [num_unique_blocks * 256], the table entry of each code point.
    replacement_values: int32, all replacements' code points, concatenated.
    replacement_splits: int64 [num_replacements + 1] (row 0 is unused: index 0 = none).
    final_sigma_index: the replacement index of [ς].
  """
  entries = np.zeros([_NUM_CODE_POINTS], np.int32)
  for lo, hi in tokenization.CJK_RANGES:
    entries[lo:hi + 1] = 1 << 2  # Standalone, unchanged, not cased.
  replacements = {}  # Code point tuple -> index (>= 1).

  def replacement_index(cps):
    return replacements.setdefault(cps, len(replacements) + 1)

  chars = [chr(cp) for cp in range(_NUM_CODE_POINTS)
           if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]
  # Unassigned code points and surrogates stay unchanged (standalone if CJK).
  kept = []  # Assigned characters that cleaning keeps: the final-sigma rule looks at them.
  for char, out in zip(chars, _single_char_outputs(chars, do_lower_case)):
    if out == char:
      kept.append(char)
    elif out == f" {char} ":
      kept.append(char)
      entries[ord(char)] = 1 << 2
    else:  # (CJK compatibility ideographs too, when NFD maps them to unified ones.)
      if out:
        kept.append(char)
      # A dropped character is transparent to the final-sigma rule: lower() never sees it.
      entries[ord(char)] = (replacement_index(tuple(map(ord, out))) << 3 |
                            (0 if out else _TRANSPARENT))
  final_sigma_index = replacement_index((_FINAL_SIGMA,))
  if do_lower_case:
    entries[[ord(c) for c in kept]] |= np.array(_sigma_classes(kept), np.int32)

  unique, blocks = np.unique(entries.reshape([-1, 1 << _BLOCK_BITS]), axis=0,
                             return_inverse=True)
  ordered = sorted(replacements.items(), key=lambda item: item[1])
  lengths = [1] + [len(cps) for cps, _ in ordered]
  values = [_SPACE] + [cp for cps, _ in ordered for cp in cps]
  return (blocks.reshape([-1]).astype(np.int32), unique.reshape([-1]).astype(np.int32),
          np.array(values, np.int32), np.cumsum([0] + lengths).astype(np.int64),
          final_sigma_index)


def _utf8_lengths(cps):
  """Bytes of each code point in UTF-8 (same shape, int64)."""
  cps = tf.cast(cps, tf.int64)
  return (1 + tf.cast(cps >= 0x80, tf.int64) + tf.cast(cps >= 0x800, tf.int64) +
          tf.cast(cps >= 0x10000, tf.int64))


def truncated_pair_lengths(length_a, length_b, max_length):
  """Lengths after the original's ``_truncate_seq_pair`` (pop from the longer; ties pop b).

  Closed form, elementwise on int tensors: if the shorter side fits in half of ``max_length``
  it is kept and the longer side takes the rest; otherwise a gets ceil(half), b floor(half).
  """
  half_down = max_length // 2
  half_up = max_length - half_down
  fits = length_a + length_b <= max_length
  a_longer = length_a >= length_b
  new_b = tf.where(a_longer, tf.minimum(length_b, half_down),
                   max_length - tf.minimum(length_a, half_up))
  new_a = max_length - new_b
  return tf.where(fits, length_a, new_a), tf.where(fits, length_b, new_b)


def assert_same_batch(where, named, dims=1):
  """Checks in the graph that tensors agree on their first ``dims`` dimensions.

  ``named``: (name, tensor) pairs, dense or ragged (ragged: dims=1, the row count); each is
  compared with the first. dims=1 compares batch sizes ([B] texts), dims=2 shapes ([B, S]
  ids). Without it a [1] text_a beside a [3] text_b is broadcast (3 pairs of one text_a)
  and [B, S] ids of different shapes fail deep in the model; with it the call raises
  ``InvalidArgumentError`` "``where``: text_b has batch size 3 but text_a has batch size 1
  (...)".

  Returns:
    the tensors of ``named``, in order, made to wait for the check (otherwise an op computed
    from them may fail first, with its raw shape error).
  """
  def leading(x):
    if isinstance(x, tf.RaggedTensor):
      return x.nrows(out_type=tf.int64)
    size = tf.shape(x, out_type=tf.int64)
    return size[0] if dims == 1 else size[:dims]
  what = "batch size" if dims == 1 else "shape"
  first_name, first = named[0]
  first_size = leading(first)
  checks = []
  for name, x in named[1:]:
    size = leading(x)
    checks.append(tf.debugging.Assert(
        tf.reduce_all(tf.equal(size, first_size)),
        [tf.strings.format(f"{where}: {name} has {what} {{}} but {first_name} has {what} {{}} "
                           "(one row per example in each)", (size, first_size))]))
  checks = [c for c in checks if c is not None]  # Eagerly, Assert has raised or passed.
  with tf.control_dependencies(checks):
    return [tf.nest.map_structure(tf.identity, x, expand_composites=True) for _, x in named]


def _vocabulary_list(vocabulary):
  """A vocab file path or a token list -> the token of every id (as ``load_vocab`` reads a
  file: id = position; a repeated token's id is its last position's)."""
  if isinstance(vocabulary, (str, os.PathLike)):
    return list(tokenization.load_vocab(os.fspath(vocabulary)).lines)
  return [str(t).strip() for t in vocabulary]


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPreprocessor(keras.layers.Layer):
  """Strings (or pairs of strings) -> BERT's int32 inputs, exactly as ``FullTokenizer`` + the
  original's ``convert_single_example``.

  Call with a [B] string tensor (one segment) or a pair ``(text_a, text_b)`` of [B] tensors.
  Returns a dict of int32 [B, S] tensors:
    input_word_ids: [CLS] a [SEP] (b [SEP]) then 0s (the original pads with id 0);
    input_mask: 1 on real tokens, 0 on padding;
    input_type_ids: 0 for [CLS] a [SEP], 1 for b [SEP], 0 on padding.
  Truncation as the original: one segment is cut to S - 2 word pieces; a pair loses pieces
  from the end of the longer segment (b on ties) until both fit in S - 3. As in the original,
  a second segment that has no word pieces (e.g. "") counts as absent.

  Example:
    >>> pre = BertPreprocessor("vocab.txt", max_seq_length=8)  # doctest: +SKIP
    >>> pre(tf.constant(["Hello world!"]))["input_word_ids"]  # doctest: +SKIP
    <tf.Tensor: shape=(1, 8), dtype=int32, numpy=array([[101, 7592, 2088, 999, 102, 0, 0, 0]])>
  """

  def __init__(self, vocabulary, do_lower_case=True, max_seq_length=128, **kwargs):
    """Args:
      vocabulary: path of a vocab.txt, or the tokens in id order.
      do_lower_case: True for uncased models, False for cased ones.
      max_seq_length: S, the fixed output length (>= 3 for pairs, >= 2 for single segments).

    Raises:
      BertTfError: missing vocab file, a vocab without [UNK] / [CLS] / [SEP], or S < 2.
    """
    super().__init__(**kwargs)
    # === Config ===
    self.vocabulary = _vocabulary_list(vocabulary)
    self.do_lower_case = bool(do_lower_case)
    self.max_seq_length = int(max_seq_length)
    if self.max_seq_length < 2:
      raise BertTfError(f"max_seq_length must be at least 2, got {self.max_seq_length}")
    ids = {token: i for i, token in enumerate(self.vocabulary)}
    for token in ("[UNK]", "[CLS]", "[SEP]"):
      if token not in ids:
        raise BertTfError(f"vocabulary has no {token} token (needed by BertPreprocessor)")
    self.cls_id, self.sep_id = ids["[CLS]"], ids["[SEP]"]

    # === Tables ===
    (blocks, entries, values, splits, self._final_sigma_index) = _char_tables(self.do_lower_case)
    self._blocks = tf.constant(blocks)
    self._entries = tf.constant(entries)
    self._replacement_values = tf.constant(values)
    self._replacement_starts = tf.constant(splits[:-1].astype(np.int32))
    self._replacement_lengths = tf.constant(np.diff(splits).astype(np.int32))
    # A word over 200 characters is replaced by this one-character word, which WordPiece
    # makes [UNK]: the character is not a vocab token (and no longer token fits one char).
    self._too_long_word = next(chr(cp) for cp in range(0xE000, 0xF900) if chr(cp) not in ids)
    # An empty line keeps its id (load_vocab gives "" one) but the WordPiece builder rejects
    # "": a token with a space in it takes its place, as words never contain spaces.
    # So does a repeated token's earlier line: its id belongs to no text (the last line's does).
    wordpiece_vocab = [(token if ids[token] == i else f" repeated line {i}") or f" blank line {i}"
                       for i, token in enumerate(self.vocabulary)]
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        wordpiece_vocab, suffix_indicator="##",
        max_bytes_per_word=4 * tokenization.MAX_INPUT_CHARS_PER_WORD + 4,
        token_out_type=tf.int64, unknown_token=tokenization.UNK_TOKEN, no_pretokenization=True)

  def get_config(self):
    config = super().get_config()
    config.update(vocabulary=list(self.vocabulary), do_lower_case=self.do_lower_case,
                  max_seq_length=self.max_seq_length)
    return config

  def _final_sigmas(self, cps, row_ids, sigma_class):
    """Positions (in [N]) of capital sigmas that ``str.lower`` makes final ("ς")."""
    opaque = sigma_class != _TRANSPARENT                                       # [N]
    opaque_positions = tf.cast(tf.where(opaque)[:, 0], tf.int32)               # [K]
    opaque_before = tf.cumsum(tf.cast(opaque, tf.int32), exclusive=True)       # [N]
    sigmas = tf.cast(tf.where(cps == _CAPITAL_SIGMA)[:, 0], tf.int32)          # [Σ]
    num_opaque = tf.size(opaque_positions)
    before = tf.gather(opaque_before, sigmas) - 1      # Index into opaque_positions, or -1.
    after = before + 2                                 # Σ itself is opaque.

    def neighbour_is_cased(k):
      valid = (k >= 0) & (k < num_opaque)
      position = tf.gather(opaque_positions, tf.clip_by_value(k, 0, num_opaque - 1))
      same_row = tf.gather(row_ids, position) == tf.gather(row_ids, sigmas)
      return valid & same_row & (tf.gather(sigma_class, position) == _CASED)

    final = neighbour_is_cased(before) & ~neighbour_is_cased(after)
    return tf.boolean_mask(sigmas, final)

  def tokenize(self, texts):
    """[B] strings -> [B, (T)] int32 word-piece ids, without special tokens or truncation."""
    return self._tokenize(texts, with_offsets=False)

  def tokenize_with_offsets(self, texts):
    """``tokenize`` plus where each word piece comes from in its text.

    Args:
      texts: [B] strings (or [B, 1]).
    Returns:
      (ids, begin, end): [B, (T)] int32 word-piece ids (equal to ``tokenize``'s) and [B, (T)]
      int64 byte offsets into each text: the piece came from ``text[begin:end]``. ``begin``
      is the start of the source character of the piece's first normalised character; ``end``
      the end of the source of its last one, moved over any following characters that
      normalisation drops (up to the next one it keeps, or the text's end). Where a character
      expands into several normalised ones (a Hangul syllable into jamo) and a piece boundary
      falls inside it, the spans of both pieces take the whole character. A word over 200
      characters ([UNK]) spans the whole word.
    """
    return self._tokenize(texts, with_offsets=True)

  def _tokenize(self, texts, with_offsets):
    """``tokenize`` (ids) or ``tokenize_with_offsets`` (ids, begin, end): one set of steps;
    ``with_offsets=False`` leaves out the offset bookkeeping (no extra ops in the graph)."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 2:
      texts = tf.squeeze(texts, 1)                                       # [B, 1] -> [B]
    batch = tf.shape(texts, out_type=tf.int64)[0]
    if with_offsets:
      chars, char_offsets = tf.strings.unicode_decode_with_offsets(
          texts, "UTF-8", errors="ignore")                               # [B, (C)]
    else:
      chars = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")   # [B, (C)]
    cps = chars.flat_values                                              # [N]
    row_ids = tf.cast(chars.value_rowids(), tf.int32)                    # [N]
    shift, mask = tf.bitwise.right_shift, tf.bitwise.bitwise_and
    entry = tf.gather(self._entries, tf.gather(self._blocks, shift(cps, _BLOCK_BITS)) *
                      (1 << _BLOCK_BITS) + mask(cps, (1 << _BLOCK_BITS) - 1))
    replacement = shift(entry, 3)                                        # [N], 0 = none
    standalone = mask(entry, 4) > 0
    if self.do_lower_case:
      finals = self._final_sigmas(cps, row_ids, mask(entry, 3))
      replacement = tf.tensor_scatter_nd_update(
          replacement, finals[:, None], tf.fill(tf.shape(finals), self._final_sigma_index))

    # Expand every code point to its output: itself, or its replacement (maybe empty).
    replaced = replacement > 0
    num_values = tf.size(self._replacement_values)
    lengths = tf.where(replaced, tf.gather(self._replacement_lengths, replacement), 1)  # [N]
    sources = tf.where(replaced, tf.gather(self._replacement_starts, replacement),
                       num_values + tf.range(tf.size(cps)))
    out_starts = tf.cumsum(lengths, exclusive=True)
    total = tf.reduce_sum(lengths)
    gather_at = tf.repeat(sources - out_starts, lengths) + tf.range(total)
    out = tf.gather(tf.concat([self._replacement_values, cps], 0), gather_at)   # [M]
    out_rows = tf.repeat(row_ids, lengths)                                      # [M]
    out_alone = tf.repeat(standalone & ~replaced, lengths)                      # [M]

    # Words: runs of non-spaces; a standalone character is a word of its own.
    is_char = out != _SPACE
    prev_space = tf.concat([[True], ~is_char], 0)[:-1]       # (Sliced after, so M = 0 works.)
    prev_row = tf.concat([[-1], out_rows], 0)[:-1]
    prev_alone = tf.concat([[False], out_alone], 0)[:-1]
    starts = is_char & (prev_space | (prev_row != out_rows) | out_alone | prev_alone)
    word_ids = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    num_words = tf.reduce_sum(tf.cast(starts, tf.int32))
    word_chars = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(out, is_char), tf.boolean_mask(word_ids, is_char), nrows=num_words)
    word_rows = tf.boolean_mask(out_rows, starts)                                # [W]
    words = tf.strings.unicode_encode(word_chars, "UTF-8")                       # [W]
    too_long = word_chars.row_lengths() > tokenization.MAX_INPUT_CHARS_PER_WORD
    words = tf.where(too_long, self._too_long_word, words)

    if with_offsets:
      pieces, piece_begin, piece_end = self._wordpiece.tokenize_with_offsets(words)
    else:
      pieces = self._wordpiece.tokenize(words)                                   # [W, (P)]
    pieces_per_row = tf.math.unsorted_segment_sum(
        pieces.row_lengths(), word_rows, tf.cast(batch, tf.int32))

    def per_row(values):  # [P] -> [B, (T)]
      return tf.RaggedTensor.from_row_lengths(values, pieces_per_row)

    ids = per_row(tf.cast(pieces.flat_values, tf.int32))
    if not with_offsets:
      return ids

    # Piece byte offsets (within its normalised word) -> first/last normalised character.
    char_src = tf.boolean_mask(tf.repeat(tf.range(tf.size(cps)), lengths), is_char)  # [M']
    char_byte_start = tf.cumsum(_utf8_lengths(word_chars.flat_values),
                                exclusive=True)                    # [M'] in all words, end to end
    word_base = tf.gather(char_byte_start, word_chars.row_starts())                # [W]
    piece_word = pieces.value_rowids()                                             # [P]
    piece_base = tf.gather(word_base, piece_word)
    first_char = tf.searchsorted(char_byte_start, piece_base + piece_begin.flat_values, "left")
    last_char = tf.searchsorted(char_byte_start, piece_base + piece_end.flat_values, "left") - 1
    whole = tf.gather(too_long, piece_word)
    first_char = tf.where(whole, tf.gather(word_chars.row_starts(), piece_word), first_char)
    last_char = tf.where(whole, tf.gather(word_chars.row_limits(), piece_word) - 1, last_char)

    # Characters that normalisation drops (no output) after a piece's last source go with it,
    # up to the next kept character of the same text (or the text's end).
    src_begin = char_offsets.flat_values                                           # [N] int64
    kept_index = tf.cast(tf.where(lengths > 0)[:, 0], tf.int32)                    # sorted
    after = tf.searchsorted(kept_index, tf.range(tf.size(cps)), "right")           # [N]
    following = tf.gather(tf.concat([kept_index, [0]], 0), after)     # first kept after i
    same_row = (after < tf.size(kept_index)) & (tf.gather(row_ids, following) == row_ids)
    text_ends = tf.cast(tf.strings.length(texts), tf.int64)                        # [B] bytes
    extended_end = tf.where(same_row, tf.gather(src_begin, following),
                            tf.gather(text_ends, row_ids))                         # [N]
    begin = tf.gather(src_begin, tf.gather(char_src, first_char))                  # [P]
    end = tf.gather(extended_end, tf.gather(char_src, last_char))                  # [P]
    return ids, per_row(begin), per_row(end)

  def call(self, inputs):
    """[B] strings, or a pair of [B] strings -> dict of int32 [B, S] (see the class doc)."""
    if isinstance(inputs, (list, tuple)):
      if len(inputs) != 2:
        raise BertTfError(f"BertPreprocessor takes one or two text segments, got {len(inputs)}")
      text_a, text_b = assert_same_batch("BertPreprocessor",
                                         [("text_a", inputs[0]), ("text_b", inputs[1])])
      ids_a, ids_b = self.tokenize(text_a), self.tokenize(text_b)
    else:
      ids_a, ids_b = self.tokenize(inputs), None
    return self.pack(ids_a, ids_b)

  def pack(self, ids_a, ids_b=None):
    """Word-piece ids [B, (T)] (and [B, (T')]) -> dict of int32 [B, S], as ``call`` returns.

    Like the original's ``convert_single_example``: a second segment with no word pieces is
    no second segment (no second [SEP], and the first is cut to S - 2, not by pair rules); nor
    is one that truncation empties (S = 3), which loses its [SEP] too.
    """
    seq_length = self.max_seq_length
    len_a = ids_a.row_lengths()                                               # [B]
    if ids_b is None:
      ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(len_a))
    else:
      ids_a, ids_b = assert_same_batch("BertPreprocessor.pack",
                                       [("ids_a", ids_a), ("ids_b", ids_b)])
      len_a = ids_a.row_lengths()                                             # [B]
    len_b = ids_b.row_lengths()                                               # [B]
    has_b = len_b > 0
    pair_a, pair_b = truncated_pair_lengths(len_a, len_b, seq_length - 3)
    len_a = tf.where(has_b, pair_a, tf.minimum(len_a, seq_length - 2))[:, None]   # [B, 1]
    len_b = tf.where(has_b, pair_b, 0)[:, None]                                  # [B, 1]
    has_b = tf.cast(len_b > 0, tf.int64)  # S = 3 leaves no room for b: its [SEP] goes too.

    # Position j of [CLS] a [SEP] b [SEP] 0...: each part's range, then a gather per part.
    j = tf.range(seq_length, dtype=tf.int64)[None, :]                          # [1, S]
    b_start = len_a + 2
    end = b_start + len_b + has_b
    dense_a = ids_a.to_tensor(0, shape=[None, seq_length])                     # [B, S]
    dense_b = ids_b.to_tensor(0, shape=[None, seq_length])                     # [B, S]
    from_a = tf.pad(dense_a[:, :-1], [[0, 0], [1, 0]])                         # a at j - 1
    from_b = tf.gather(dense_b, tf.clip_by_value(j - b_start, 0, seq_length - 1), batch_dims=1)
    is_sep = (j == len_a + 1) | ((j == end - 1) & (has_b > 0))
    input_word_ids = tf.where(
        j == 0, self.cls_id, tf.where(is_sep, self.sep_id, tf.where(
            j <= len_a, from_a, tf.where(j < end, from_b, 0))))                # [B, S]
    return {"input_word_ids": tf.cast(input_word_ids, tf.int32),
            "input_mask": tf.cast(j < end, tf.int32),                          # [B, S]
            "input_type_ids": tf.cast((j >= b_start) & (j < end), tf.int32)}   # [B, S]
