"""Instances: a ``Corpus`` -> masked [CLS] A [SEP] B [SEP] instances, as framed TFRecord records.

Mirrors, draw for draw, Google's create_pretraining_data.py from the shuffle of the documents
on: the rest of ``create_training_instances`` (``dupe_factor`` passes over the documents, then
the shuffle of all instances), ``create_instances_from_document`` (chunks, A and B, random next
sentences, ``truncate_seq_pair``) and ``create_masked_lm_predictions`` (candidates, their
shuffle, 80% [MASK] / 10% kept / 10% random word; whole-word masking as the original's later
version: a word's ``##`` pieces are masked together, a word that would exceed
``max_predictions_per_seq`` is skipped; with it off, both versions make the same draws). The
flags are ``InstanceOptions``.

Two passes (``InstanceMaker``): the first makes the draws in order but keeps only what later
steps need (token ranges, truncation counts, where the words of the candidate shuffle and mask
decisions end, found by ``reference_random.Walks``); the second replays the shuffles and
decisions of thousands of instances at once in numpy and serializes them (``records``).

Shape legend (per record):
  L = max_seq_length, P = max_predictions_per_seq, n = real tokens ([CLS] A [SEP] B [SEP])
"""

import bisect
import dataclasses
import re

import numpy as np

from bert_tf import tokenization
from bert_tf.data.pretraining.corpus import read_corpus
from bert_tf.data.pretraining.records import RecordEncoder
from bert_tf.data.pretraining.reference_random import (CHAR_BASE, KEPT, MASKED, ReferenceRandom,
                                                       Walks, decode_decisions, first_picks,
                                                       shift15_table, shuffle_from_walk,
                                                       threshold)
from bert_tf.errors import BertTfError

CLS, SEP, MASK, UNK = "[CLS]", "[SEP]", "[MASK]", "[UNK]"


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
  """(cls, sep, mask) ids; raises a one-line BertTfError naming what the vocab lacks, or a
  repeated token (the later original gives it its last line's id, bert-tensorflow 1.0.4 shifts
  every later id: which the records should hold is for the vocab's author to say)."""
  repeats = getattr(vocab, "repeats", ())
  if repeats:
    raise BertTfError(f"{tokenization.repeats_message(vocab_file, repeats)}: a vocab for new "
                      "pretraining data lists each token once (ids are line numbers)")
  missing = [t for t in (CLS, SEP, MASK, UNK) if t not in vocab]
  if missing:
    raise BertTfError(f"vocab file {vocab_file!r} lacks {', '.join(missing)} (a BERT vocab "
                      "needs [CLS], [SEP], [MASK] and [UNK])")
  return vocab[CLS], vocab[SEP], vocab[MASK]


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
    # Decisions made in Python (MASKED, KEPT or a random id, in masking order).
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
    self.walks = Walks(self.num_masked.__getitem__, self._mask15, self.vocab_size)
    self.thresholds = Walks.thresholds(max(L, 2))
    self.shift15 = shift15_table(max(L, 2))
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
    """The mask decisions in Python: (list of MASKED, KEPT or a random id; new p).

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
        decisions += [MASKED] * run
        p += 2 * run
        remaining -= run
        if not remaining:
          break
      h = top8[p]
      if h < lo8 or (h == lo8 and exact8 and rng.random_at(p) < 0.8):
        decisions.append(MASKED)
        p += 2
      elif top8[p + 2] < 128:
        decisions.append(KEPT)
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
      cand = first_picks(words, region_start, len_a + len_b, P, self.thresholds,
                          self.shift15)                                # [B, P]
      positions = cand + 1 + (cand >= len_a[:, None])                  # skip [CLS], middle [SEP]
      implicit = ~explicit
      if implicit.any():
        decisions[implicit] = decode_decisions(
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
    tokens[flat] = np.where(decided == MASKED, self.mask_id,
                            np.where(decided == KEPT, tokens[flat], decided))

    summary = self.summary
    summary.instances += B
    summary.tokens += total
    summary.masked += int(num_masked.sum())
    summary.random_next += sum(batch.random_next)
    summary.capped += int(self.capped[n_tokens].sum())
    return self.encoder.encode_batch(tokens, row_start, n_tokens, len_a, positions,
                                     masked_lm_ids, num_masked, batch.random_next)


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


def records_from_text(sources, line_tokenizer, vocab, options, summary, seed,
                      skip_invalid_utf8=False, vocab_file="vocab"):
  """The original's create_training_instances, whole: text -> all framed records, shuffled.

  Args:
    sources: iterable of (path, start byte, end byte or None), read as one corpus.
    line_tokenizer: a ``corpus.LineTokenizer``; vocab: its tokenizer's vocab.
    options: ``InstanceOptions``; seed: the generator's seed (``options.random_seed`` for the
      original's records).
    summary: a ``Summary`` whose counters are updated.
  Returns:
    a list of framed records (bytes); empty when the text holds no document.
  """
  corpus = read_corpus(sources, line_tokenizer, summary, skip_invalid_utf8)
  if not corpus.documents:
    return []
  maker = InstanceMaker(corpus, vocab, options, summary, vocab_file)
  # The corpus and maker go when this returns, before the records are written.
  return records_from_corpus(corpus, maker, ReferenceRandom(seed), options.dupe_factor)
