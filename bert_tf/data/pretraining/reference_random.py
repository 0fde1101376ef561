"""The original's random draws: every draw of its one ``random.Random(random_seed)``, replayed.

Mirrors the ``rng`` of Google's create_pretraining_data.py: ``rng.shuffle(all_documents)`` in
``create_training_instances``; ``rng.random()`` and ``rng.randint`` in
``create_instances_from_document`` and ``truncate_seq_pair``; ``rng.shuffle(cand_indexes)`` and
the per-mask ``rng.random()`` / ``rng.randint`` of ``create_masked_lm_predictions``; the final
``rng.shuffle(instances)``. Every one of them is a function of the Mersenne Twister's 32-bit
words, so the words are made in bulk (``ReferenceRandom``) and the draws computed from them:

- one at a time (``ReferenceRandom.random``, ``randbelow``, ``shuffle``), or at an address
  (``random_at``, ``randbelow_at``: the hot loop of ``instances.InstanceMaker``);
- where the words of a candidate shuffle and of the mask decisions after it end, by regular
  expressions on the words' top 15 bits (``Walks``), without making the shuffle;
- those shuffles and decisions for thousands of instances at once, in numpy
  (``first_picks``, ``decode_decisions``), or one list at a time (``shuffle_from_walk``).

What is drawn when is ``instances``'s business; this module knows only the generator.
"""

import codecs
import collections
import random
import re
import sys

import numpy as np

CHAR_BASE = 0x10000
_TOP_BYTE = 3 if sys.byteorder == "little" else 0  # Of a uint32 in memory.
_TWO_26 = 67108864.0
_TWO_M53 = 1.0 / 9007199254740992.0

# Mask decisions (decode_decisions, InstanceMaker): [MASK], keep the original, or (>= 0) a
# random id.
MASKED = -1
KEPT = -2


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


class Walks:
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


def shift15_table(n):
  """SHIFT15[i] = 15 - (i + 1).bit_length(): a top-15-bit char -> the draw of step i."""
  return [0] + [15 - (i + 1).bit_length() for i in range(1, n)]


def first_picks(words, start, n_cand, count, thresholds, shift15):
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


def decode_decisions(words, start, count, width, mask_below, vocab_size):
  """Mask decisions read back from words a regex validated: [B, width] (0 past count).

  Per mask: top15 < mask_below -> MASKED (2 words); else top15 of the third word < 2**14 ->
  KEPT (4 words); else a random id: the first later word whose top k bits (k =
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
    decisions[rows[masked], t] = MASKED
    decisions[rows[kept], t] = KEPT
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
