"""Building a WordPiece vocab.txt from a corpus, for pretraining from scratch.

Google never released the tool that made BERT's vocab. This one learns word pieces the way
Hugging Face ``tokenizers``' WordPieceTrainer does: byte-pair-encoding merges (most frequent
adjacent pair first) over the corpus's words, written in WordPiece notation (``##`` marks a
piece that continues a word). Words are counted with bert_tf's own ``BasicTokenizer``, so the
vocab fits the tokenizer that will use it (same cleaning, casing, accent stripping and
punctuation splitting).

Layout of the written file (one token per line, id = line number):
  [PAD] (id 0, what the input pipelines pad with), then ``num_unused_tokens`` slots
  [unused0] ... (Google's vocabs have 99 here, which puts [UNK] [CLS] [SEP] [MASK] at
  100-103), then [UNK] [CLS] [SEP] [MASK], then every character of the alphabet as a word
  start and as a continuation (``x`` and ``##x``, most frequent first), then the merged
  pieces in the order they were learned.

Because every single character is in the vocab in both positions, every counted word
tokenizes without [UNK] (greedy longest match can always fall back to one character) unless
``vocab_size`` is too small to hold the alphabet; then the rarest characters are left out.

Example:
  >>> counts = count_words(["The cat sat.", "The cats sat on the mat."])
  >>> vocab = learn_vocab(counts, vocab_size=30)
  >>> vocab[:6], vocab[-5:]
  (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '##a'], ['##at', '##he', 'the', 'cat', 'sat'])
"""

import collections
import heapq

from absl import logging
import tensorflow as tf

from bert_tf import fileio
from bert_tf import tokenization
from bert_tf.errors import BertTfError

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_TOKEN = "[PAD]"
_CONTINUATION = "##"


def count_words(lines, do_lower_case=True):
  """Counts the words ``BasicTokenizer`` makes of ``lines`` (iterable of str or bytes).

  Words longer than the tokenizer's 200-character limit are not counted (they are [UNK]).
  """
  basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
  counts = collections.Counter()
  for line in lines:
    counts.update(basic.tokenize(line))
  for word in [w for w in counts if len(w) > tokenization.MAX_INPUT_CHARS_PER_WORD]:
    del counts[word]
  return counts


def _merged(first, second):
  """The piece made of two adjacent pieces ("##" is kept only on the first one's behalf)."""
  return first + second[len(_CONTINUATION):]


def learn_vocab(word_counts, vocab_size, num_unused_tokens=0, min_pair_count=2):
  """Learns a WordPiece vocab (list of tokens in id order) from word counts.

  Args:
    word_counts: mapping word -> count (e.g. from ``count_words``).
    vocab_size: the most entries the vocab may have (special tokens included).
    num_unused_tokens: [unusedN] slots after [PAD] (99 reproduces Google's special ids).
    min_pair_count: stop merging when no adjacent pair occurs this often.

  Raises:
    BertTfError: ``vocab_size`` cannot hold even the special tokens.
  """
  reserved = [PAD_TOKEN] + [f"[unused{i}]" for i in range(num_unused_tokens)] + list(
      SPECIAL_TOKENS)
  if vocab_size < len(reserved):
    raise BertTfError(f"vocab_size={vocab_size} is smaller than the {len(reserved)} "
                      f"reserved tokens")
  # Words as lists of pieces, starting from single characters: c, ##c, ##c, ...
  words = [[w[0]] + [_CONTINUATION + c for c in w[1:]] for w in word_counts if w]
  counts = [word_counts[w] for w in word_counts if w]

  alphabet = collections.Counter()
  for pieces, count in zip(words, counts):
    for piece in pieces:
      alphabet[piece] += count
  # Most frequent first, ties in code point order; drop what does not fit.
  alphabet = sorted(alphabet, key=lambda p: (-alphabet[p], p))
  whole = [p for p in alphabet if p not in reserved]
  alphabet = whole[:vocab_size - len(reserved)]
  vocab = reserved + alphabet
  known = set(alphabet)
  # Words with a character left out of the alphabet are [UNK] anyway: do not learn from them.
  kept = [i for i, pieces in enumerate(words) if all(p in known for p in pieces)]
  if len(alphabet) < len(whole):
    total = sum(counts)
    unknown = total - sum(counts[i] for i in kept)
    logging.warning(
        "%s", f"vocab_size={vocab_size} holds {len(alphabet)} of the corpus's {len(whole)} "
              f"characters (## continuations counted apart; {len(reserved)} tokens "
              f"reserved): {unknown} of its {total} words ({100 * unknown / total:.1f}%) "
              f"hold a character left out and tokenize to [UNK]; vocab_size="
              f"{len(reserved) + len(whole)} or more keeps every character")
  words = [words[i] for i in kept]
  counts = [counts[i] for i in kept]

  # Pair counts, the words each pair occurs in, and a max-heap with lazy deletion.
  pair_counts = collections.Counter()
  pair_words = collections.defaultdict(set)
  for index, (pieces, count) in enumerate(zip(words, counts)):
    for pair in zip(pieces, pieces[1:]):
      pair_counts[pair] += count
      pair_words[pair].add(index)
  heap = [(-count, pair) for pair, count in pair_counts.items()]
  heapq.heapify(heap)

  known = set(vocab)
  while len(vocab) < vocab_size and heap:
    negative_count, pair = heapq.heappop(heap)
    if pair_counts.get(pair, 0) != -negative_count:
      continue  # Stale entry: the count changed since it was pushed.
    if -negative_count < min_pair_count:
      break
    new_piece = _merged(*pair)
    changed = collections.Counter()
    for index in pair_words.pop(pair):
      pieces, count = words[index], counts[index]
      for old in zip(pieces, pieces[1:]):
        pair_counts[old] -= count
        changed[old] += 1
      merged, i = [], 0
      while i < len(pieces):
        if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
          merged.append(new_piece)
          i += 2
        else:
          merged.append(pieces[i])
          i += 1
      words[index] = merged
      for new in zip(merged, merged[1:]):
        pair_counts[new] += count
        pair_words[new].add(index)
        changed[new] += 1
    for changed_pair in changed:
      if pair_counts[changed_pair] > 0:
        heapq.heappush(heap, (-pair_counts[changed_pair], changed_pair))
      else:
        pair_counts.pop(changed_pair, None)
    pair_counts.pop(pair, None)
    if new_piece not in known:
      known.add(new_piece)
      vocab.append(new_piece)
  return vocab


def _read_lines(input_files, skip_invalid_utf8=False, skipped=None):
  """The files' lines (str), strictly UTF-8: an invalid line is a one-line error naming its
  file and line (create_pretraining_data's rule), or, with ``skip_invalid_utf8``, left out
  and counted in ``skipped[0]``."""
  for pattern in input_files:
    paths = tf.io.gfile.glob(pattern)
    if not paths:
      raise BertTfError(f"input file not found: {pattern!r}")
    for path in sorted(paths):
      if tf.io.gfile.isdir(path):
        raise BertTfError(f"--input_file {path!r} is a folder: give its files (e.g. "
                          f"'{path.rstrip('/')}/*.txt')")
      with tf.io.gfile.GFile(path, "rb") as f:
        for number, line in enumerate(f, 1):
          try:
            yield line.decode("utf-8")
          except UnicodeDecodeError as e:
            if not skip_invalid_utf8:
              raise BertTfError(f"{path}:{number}: invalid UTF-8 at byte {e.start + 1} of the "
                                "line (fix the file or pass --skip_invalid_utf8)") from None
            if skipped is not None:
              skipped[0] += 1


def build_vocab(input_files, vocab_file, vocab_size, do_lower_case=True, num_unused_tokens=0,
                min_pair_count=2, skip_invalid_utf8=False):
  """Counts the words of text files (glob patterns), learns a vocab, writes ``vocab_file``.

  Returns:
    The vocab (list of tokens in id order), as written.

  Raises:
    BertTfError: a pattern matches no file or a folder, a line is not valid UTF-8 (unless
      ``skip_invalid_utf8``: such lines are left out, with a warning), the files hold no word
      (empty, or blank), or ``vocab_size`` is too small. Nothing is written then.
  """
  skipped = [0]
  counts = count_words(_read_lines(input_files, skip_invalid_utf8, skipped),
                       do_lower_case=do_lower_case)
  if skipped[0]:
    logging.warning("skipped %d lines of invalid UTF-8", skipped[0])
  if not counts:
    # A vocab of the special tokens alone would tokenize every text to [UNK].
    raise BertTfError(f"no words in --input_file {','.join(input_files)!r} (empty or blank "
                      "files): no vocab to learn, nothing written")
  vocab = learn_vocab(counts, vocab_size, num_unused_tokens=num_unused_tokens,
                      min_pair_count=min_pair_count)
  with fileio.atomic_write(vocab_file, "w") as f:
    f.write("".join(token + "\n" for token in vocab))
  return vocab
