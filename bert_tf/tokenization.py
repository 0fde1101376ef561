"""The original BERT tokenizer (basic + WordPiece), exactly, and fast.

Every id is the id Google's ``tokenization.py`` (bert-tensorflow 1.0.4) gives for the same
text and vocab; tests/tokenization/ checks this line by line against the original on real text.
The original's steps (REFERENCE.md "Tokenizer"):

  1. decode UTF-8, dropping invalid bytes;
  2. clean: drop NUL, U+FFFD and control characters (Cc/Cf, but not \\t \\n \\r); whitespace
     (\\t \\n \\r, Zs) becomes a space;
  3. put spaces around CJK ideographs;
  4. split on whitespace; if lowercasing, each word is ``lower()``-ed, NFD-normalised and its
     nonspacing marks (Mn) dropped;
  5. split each word into runs of non-punctuation and single punctuation characters
     (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*);
  6. WordPiece: greedy longest match first, ``##`` marks a continuation; a word longer than
     200 characters, or one with no match at some point, becomes ``[UNK]``.

Why the fast paths give the same tokens (so they are not approximations):

- Steps 2, 3 and 5 act on one character at a time, so they are ``str.translate`` tables
  (built lazily, one entry per distinct character seen). Lowercasing, NFD and Mn removal act
  on the whole text instead of word by word: whitespace neither is cased nor "case-ignorable"
  (so the final-sigma rule of ``str.lower`` sees the same context), has canonical combining
  class 0 (so NFD never reorders across it) and survives both unchanged; the final
  ``str.split()`` then splits on exactly the whitespace the original splits on, including any
  that lowercasing or NFD produced.
- Pure-ASCII text (``str.isascii``): cleaning only deletes 0x00-0x08, 0x0b, 0x0c, 0x0e-0x1f,
  0x7f and turns \\t \\n \\r into spaces; ``lower()`` is A-Z -> a-z; NFD and Mn removal do
  nothing; every printable non-alphanumeric ASCII character is punctuation. So the words are
  exactly the matches of ``[A-Za-z0-9]+|[!-/:-@[-`{-~]`` in the text with those characters
  deleted (the pattern skips \\t \\n \\r as it skips spaces).
- WordPiece results are cached per word (they depend on the word only), and the inner search
  never tries substrings longer than the longest vocabulary entry (they cannot match).

``never_split`` (opt-in, default off like the original) keeps listed special tokens such as
``[MASK]`` whole where they occur in raw text; the original splits them into ``[``, ``mask``,
``]``. ``preserve_unused_tokens`` is the original's flag of that name (default off): a
whitespace-separated word of the text that is exactly ``[unusedN]`` and in the vocab stays
one token.
"""

import collections
import logging
import re
import unicodedata

import numpy as np

from bert_tf import fileio
from bert_tf.errors import BertTfError

logger = logging.getLogger(__name__)

UNK_TOKEN = "[UNK]"
# What ``FullTokenizer.decode(skip_special_tokens=True)`` leaves out (Hugging Face's list for
# BERT).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Hugging Face's ``PreTrainedTokenizerBase.clean_up_tokenization`` (transformers 4.x and 5.x),
# in its order: what ``decode(..., clean_up_tokenization_spaces=True)`` replaces. (The
# WordPiece decoder of Hugging Face's ``tokenizers`` applies the same list to each piece with
# its leading space, which for vocab pieces (no spaces inside) changes nothing more.)
CLEAN_UP_RULES = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                  (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                  (" 're", "'re"))
MAX_INPUT_CHARS_PER_WORD = 200
_CONTINUATION = "##"
# Caches stop growing here (then start over) so a long pretraining run cannot exhaust memory.
_MAX_CACHE_ENTRIES = 1 << 20

# Google's released checkpoints, by casing (the original's validate_case_matches_checkpoint).
_LOWER_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                 "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")

# The original's "Chinese characters" (CJK ideograph blocks, inclusive), which get spaces
# around them. Unassigned code points inside the blocks count too.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))

# Pure-ASCII fast path: what cleaning deletes (\t \n \r, which it turns into spaces, need
# nothing: the word pattern skips all whitespace), and the word pattern.
_ASCII_DELETED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
# The original's _UNUSED_TOKEN_RE (tokenization.preserve_token): a whole word "[unusedN]".
_UNUSED_TOKEN = re.compile(r"\[unused\d+\]")


# --- character classes (the original's definitions) -------------------------------------------

def _is_whitespace(char):
  """\\t \\n \\r and space, or Unicode category Zs."""
  return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char):
  """Unicode categories Cc and Cf, except \\t \\n \\r (counted as whitespace)."""
  if char in "\t\n\r":
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
  """All non-alphanumeric printable ASCII, and Unicode categories P*."""
  cp = ord(char)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
  """Whether code point ``cp`` is a CJK ideograph (not Hangul, Hiragana or Katakana)."""
  return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


class _LazyTable(dict):
  """A ``str.translate`` table that computes an entry the first time a character is seen."""

  def __init__(self, rule):
    super().__init__()
    self._rule = rule

  def __missing__(self, cp):
    value = self._rule(chr(cp))
    self[cp] = value
    return value


def _clean_and_space_cjk(char):
  """Steps 2-3 for one character: '' (dropped), ' ', ' c ' (CJK) or the character."""
  cp = ord(char)
  if cp == 0 or cp == 0xFFFD or _is_control(char):
    return ""
  if _is_whitespace(char):
    return " "
  if _is_chinese_char(cp):
    return f" {char} "
  return char


def _space_punctuation(char):
  """Step 5 for one character: punctuation gets spaces around it."""
  return f" {char} " if _is_punctuation(char) else char


def _strip_accent_and_space_punctuation(char):
  """Mn removal (after NFD) and step 5, for one character (Mn and P* are disjoint)."""
  if unicodedata.category(char) == "Mn":
    return ""
  return _space_punctuation(char)


def _clean_space_cjk_and_punctuation(char):
  """Steps 2, 3 and 5 together, for the cased path (nothing happens in between)."""
  cleaned = _clean_and_space_cjk(char)
  return _space_punctuation(char) if cleaned == char else cleaned


# --- conversions --------------------------------------------------------------------------------

def convert_to_unicode(text):
  """Returns ``text`` as ``str``; bytes are decoded as UTF-8 with invalid bytes dropped."""
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "ignore")
  raise ValueError(f"Unsupported string type: {type(text)}")


def printable_text(text):
  """Returns ``text`` as a ``str`` suitable for printing or logging."""
  return convert_to_unicode(text)


class Vocab(collections.OrderedDict):
  """token -> id of a vocab.txt (``load_vocab``), with the file's lines.

  Attributes:
    lines: the token of every line (list of str): id i is line i + 1, row i of the model's
      embedding table (None for a Vocab made otherwise than by ``load_vocab``).
    repeats: ``(line, first_line, token)`` of every line whose token an earlier line has
      (numbers from 1); a repeated token's id is its last line's.
  """
  lines = None
  repeats = ()

  def copy(self):
    copied = Vocab(self)
    copied.lines = None if self.lines is None else list(self.lines)
    copied.repeats = list(self.repeats)
    return copied


def vocab_lines(vocab):
  """The token of every id of ``vocab`` (a ``Vocab``: its lines; another token -> id mapping:
  its tokens in id order)."""
  lines = getattr(vocab, "lines", None)
  return list(lines) if lines is not None else sorted(vocab, key=vocab.__getitem__)


def vocab_size(vocab):
  """The number of ids of ``vocab`` (a ``Vocab``: its lines; another mapping: its length)."""
  lines = getattr(vocab, "lines", None)
  return len(lines) if lines is not None else len(vocab)


_WARNED = set()  # (vocab file, message) already logged


def load_vocab(vocab_file):
  """Reads a vocab.txt (one token per line, id = line number) into an ordered dict token -> id
  (a ``Vocab``).

  Like the original: each line is stripped of surrounding whitespace. A token on several
  lines takes the id of its last line, as Google's later tokenization.py (and Hugging Face's
  BertTokenizer) read it, so every id stays its line's, the row of the model's embedding
  table: bert-tensorflow 1.0.4 kept the first line's id and gave every later token the id
  of the line before its own. A vocab with a repeated token is logged once (the lines).

  Raises:
    BertTfError: the file does not exist.
  """
  if not vocab_file or not fileio.exists(vocab_file):
    raise BertTfError(f"vocab file not found: {str(vocab_file)!r}")
  if fileio.is_folder(vocab_file):
    raise BertTfError(f"vocab file {str(vocab_file)!r} is a folder (give its vocab.txt)")
  with fileio.open_file(vocab_file, "rb") as reader:
    raw = reader.read()
  try:
    data = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    # Dropped, as the original dropped them (a model's folder keeps loading), and said once:
    # a token can become another's, or "".
    _warn_once(vocab_file, f"{fileio.not_utf8_at(vocab_file, raw, e.start)}: its bytes that "
                           "are not UTF-8 are dropped, as the original did")
    data = convert_to_unicode(raw)
  # The original reads with readline(): lines end at "\n" only (not at the other characters
  # str.splitlines() knows), and no extra empty line follows a final "\n".
  lines = data.split("\n")
  if lines[-1] == "":
    lines.pop()
  vocab = Vocab()
  vocab.lines = [line.strip() for line in lines]
  vocab.repeats = []
  for i, token in enumerate(vocab.lines):
    if token in vocab:
      vocab.repeats.append((i + 1, vocab[token] + 1, token))
    vocab[token] = i  # (an OrderedDict keeps the token where it first came)
  if vocab.repeats:
    _warn_once(vocab_file, repeats_message(vocab_file, vocab.repeats) +
               ": each token takes the id of its last line (ids are line numbers)")
  return vocab


def _warn_once(vocab_file, message):
  """Logs ``message`` the first time it is said of ``vocab_file`` in this process."""
  if (str(vocab_file), message) not in _WARNED:
    _WARNED.add((str(vocab_file), message))
    logger.warning("%s", message)


def repeats_message(vocab_file, repeats):
  """``vocab.txt:101: token '[PAD]' repeats line 1 (and 2 more lines repeat a token)``."""
  line, first, token = repeats[0]
  what = f"token {token!r}" if token else "an empty line"
  more = (f" (and {len(repeats) - 1} more line{'s' if len(repeats) > 2 else ''} repeat a "
          "token)") if len(repeats) > 1 else ""
  return f"{vocab_file}:{line}: {what} repeats line {first}{more}"


def convert_by_vocab(vocab, items):
  """Maps each item through ``vocab`` (token -> id, or id -> token); KeyError if absent."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  """[tokens] -> [ids] through ``vocab`` (token -> id)."""
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  """[ids] -> [tokens] through ``inv_vocab`` (id -> token)."""
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Splits on whitespace (``str.split()``); [] for empty or blank text."""
  return text.split()


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises if ``do_lower_case`` contradicts the casing of a Google checkpoint's directory name.

  Only Google's released checkpoints are recognised (by the directory holding
  ``bert_model.ckpt``, e.g. ``.../uncased_L-12_H-768_A-12/bert_model.ckpt``); anything else
  passes, as in the original.

  Raises:
    BertTfError: e.g. ``--do_lower_case=False`` with an uncased checkpoint.
  """
  if not init_checkpoint:
    return
  match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if match is None:
    return
  model_name = match.group(1)
  if model_name in _LOWER_MODELS and not do_lower_case:
    actual, case_name, opposite = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual, case_name, opposite = "True", "cased", "False"
  else:
    return
  raise BertTfError(
      f"--do_lower_case={actual} does not match --init_checkpoint={init_checkpoint}: "
      f"{model_name} is a {case_name} model, so pass --do_lower_case={opposite}")


def check_vocab_size(vocab_file, num_tokens, vocab_size, config_file=None):
  """Raises a one-line ``BertTfError`` unless the vocab has exactly ``vocab_size`` tokens.

  Token id i is row i of the model's embedding table, so a vocab and a config that belong
  together have the same size. A smaller vocab loads without any error and leaves rows no
  text can reach (fill-mask then predicts ids that have no word); a larger one gives ids
  beyond the table. Either means the vocab is of another model.

  Args:
    vocab_file: the vocab.txt (for the message).
    num_tokens: its number of tokens (``vocab_size(load_vocab(vocab_file))``, its lines).
    vocab_size: the config's ``vocab_size``.
    config_file: the config file, if known (for the message).
  """
  if num_tokens != vocab_size:
    config = f"the BERT config {config_file!r}" if config_file else "the BERT config"
    raise BertTfError(f"vocab file {vocab_file!r} has {num_tokens} tokens but {config} says "
                      f"vocab_size {vocab_size}: they are not of the same model")


# --- tokenizers ---------------------------------------------------------------------------------

class BasicTokenizer:
  """Steps 1-5: cleaning, CJK spacing, optional lowercasing and accent stripping, splitting."""

  def __init__(self, do_lower_case=True):
    """Args:
      do_lower_case: lowercase and strip accents (uncased models) or keep the text (cased).
    """
    self.do_lower_case = do_lower_case
    self._clean_table = _LazyTable(_clean_and_space_cjk)
    self._after_lower_table = _LazyTable(_strip_accent_and_space_punctuation)
    self._cased_table = _LazyTable(_clean_space_cjk_and_punctuation)

  def tokenize(self, text):
    """Text (str or UTF-8 bytes) -> list of words and punctuation marks (str)."""
    text = convert_to_unicode(text)
    if text.isascii():
      if _ASCII_DELETED.search(text):
        text = _ASCII_DELETED.sub("", text)
      if self.do_lower_case:
        text = text.lower()
      return _ASCII_WORDS.findall(text)
    return self.normalize(text).split()

  def normalize(self, text):
    """Steps 2-5 on a str, as one str: ``normalize(text).split()`` are the words."""
    if not self.do_lower_case:
      return text.translate(self._cased_table)
    text = text.translate(self._clean_table).lower()
    text = unicodedata.normalize("NFD", text)
    return text.translate(self._after_lower_table)


class WordpieceTokenizer:
  """Step 6: greedy longest-match-first WordPiece over a vocab, one word at a time."""

  def __init__(self, vocab, unk_token=UNK_TOKEN, max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    """Args:
      vocab: a container of tokens (token -> id dict or a set); ``##x`` marks continuations.
      unk_token: what a word with no complete match becomes.
      max_input_chars_per_word: longer words (in code points) become ``unk_token``.
    """
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word
    # Longest vocab entries, in characters: longer substrings are never looked up.
    self._max_first = max((len(t) for t in vocab), default=0)
    self._max_rest = max((len(t) - 2 for t in vocab if t.startswith(_CONTINUATION)), default=0)
    self._cache = {}

  def tokenize_word(self, word):
    """One word (no whitespace) -> its word pieces (a list the caller must not modify)."""
    pieces = self._cache.get(word)
    if pieces is None:
      pieces = self._tokenize_word(word)
      if len(self._cache) >= _MAX_CACHE_ENTRIES:
        self._cache.clear()
      self._cache[word] = pieces
    return pieces

  def _tokenize_word(self, word):
    length = len(word)
    if length > self.max_input_chars_per_word:
      return [self.unk_token]
    vocab = self.vocab
    pieces = []
    start = 0
    while start < length:
      if start == 0:
        end = min(length, self._max_first)
        while end > 0 and word[:end] not in vocab:
          end -= 1
        if end == 0:
          return [self.unk_token]
        pieces.append(word[:end])
      else:
        end = min(length, start + self._max_rest)
        while end > start and (_CONTINUATION + word[start:end]) not in vocab:
          end -= 1
        if end == start:
          return [self.unk_token]
        pieces.append(_CONTINUATION + word[start:end])
      start = end
    return pieces

  def tokenize(self, text):
    """Whitespace-separated words (str or bytes), already basic-tokenized -> word pieces."""
    output = []
    for word in convert_to_unicode(text).split():
      output.extend(self.tokenize_word(word))
    return output


class FullTokenizer:
  """Basic tokenization then WordPiece: raw text -> word pieces -> ids, as the original.

  Example:
    >>> tokenizer = FullTokenizer("vocab.txt", do_lower_case=True)  # doctest: +SKIP
    >>> tokenizer.tokenize("Unaffable Déjà-vu")  # doctest: +SKIP
    ['una', '##ffa', '##ble', 'de', '##ja', '-', 'vu']
  """

  def __init__(self, vocab_file, do_lower_case=True, never_split=None,
               clean_up_tokenization_spaces=True, preserve_unused_tokens=False):
    """Args:
      vocab_file: path of a vocab.txt (one token per line); gs:// paths work.
      do_lower_case: True for uncased models, False for cased ones.
      never_split: optional tokens (e.g. ["[MASK]", "[SEP]"]) kept whole where they occur in
        the raw text (the text around them is tokenized as if they were whitespace). Off by
        default, as in the original, which splits "[MASK]" into "[", "mask", "]".
      clean_up_tokenization_spaces: ``decode``'s default: remove the spaces before
        punctuation and contractions that joining word pieces leaves ("hello , world !" ->
        "hello, world!"), as Hugging Face's BertTokenizer did by default up to transformers
        4.x (the classic tutorials' outputs); transformers 5 turned its default off.
      preserve_unused_tokens: the original's ``--preserve_unused_tokens``: a word of the text
        (between whitespace, after cleaning and CJK spacing) that is exactly ``[unusedN]`` and
        in the vocab is kept whole, not lowercased, split on punctuation or WordPiece'd.

    Raises:
      BertTfError: the vocab file is missing, or a ``never_split`` token is not in it.
    """
    self.vocab = load_vocab(vocab_file)
    self.inv_vocab = dict(enumerate(vocab_lines(self.vocab)))  # (a repeated token: each line's)
    self.do_lower_case = do_lower_case
    self.clean_up_tokenization_spaces = bool(clean_up_tokenization_spaces)
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
    self.preserve_unused_tokens = bool(preserve_unused_tokens)
    self.never_split = tuple(never_split or ())
    for token in self.never_split:
      if token not in self.vocab:
        raise BertTfError(f"never_split token {token!r} is not in vocab file {vocab_file!r}")
    self._never_split_re = None
    if self.never_split:
      by_length = sorted(set(self.never_split), key=len, reverse=True)  # Longest match first.
      self._never_split_re = re.compile("(" + "|".join(map(re.escape, by_length)) + ")")

  def _tokenize_plain(self, text):
    if self.preserve_unused_tokens:
      # Cleaned first: "[unu\x00sed1]" is "[unused1]" once its control character is gone.
      cleaned = convert_to_unicode(text).translate(self.basic_tokenizer._clean_table)
      if "[unused" in cleaned:
        return self._tokenize_preserving_unused(cleaned)
    cache = self.wordpiece_tokenizer._cache  # Inlined tokenize_word: this loop is hot.
    output = []
    for word in self.basic_tokenizer.tokenize(text):
      pieces = cache.get(word)
      output += pieces if pieces is not None else self.wordpiece_tokenizer.tokenize_word(word)
    return output

  def _tokenize_preserving_unused(self, cleaned):
    """The original's ``preserve_token`` path over the text's words after cleaning and CJK
    spacing (``cleaned``; BasicTokenizer's steps 2-3, before lowercasing): an ``[unusedN]``
    word of the vocab stays whole, any other is tokenized alone (all steps are per word)."""
    output = []
    for word in cleaned.split():
      if word in self.vocab and _UNUSED_TOKEN.fullmatch(word):
        output.append(word)
        continue
      for piece in self.basic_tokenizer.tokenize(word):
        output += self.wordpiece_tokenizer.tokenize_word(piece)
    return output

  def tokenize(self, text):
    """Raw text (str or UTF-8 bytes) -> list of word pieces (str)."""
    if self._never_split_re is None:
      return self._tokenize_plain(text)
    output = []
    # re.split with a capturing group alternates text, special token, text, ...
    for i, part in enumerate(self._never_split_re.split(convert_to_unicode(text))):
      if i % 2:
        output.append(part)
      elif part:
        output.extend(self._tokenize_plain(part))
    return output

  def tokenize_batch(self, texts):
    """An iterable of raw texts -> a list of word-piece lists (one per text)."""
    return [self.tokenize(text) for text in texts]

  def convert_tokens_to_ids(self, tokens):
    """[word pieces] -> [ids]; KeyError for a token not in the vocab."""
    return [self.vocab[t] for t in tokens]

  def convert_ids_to_tokens(self, ids):
    """[ids] -> [word pieces]; KeyError for an id not in the vocab."""
    return [self.inv_vocab[i] for i in ids]

  @property
  def vocab_size(self):
    """The number of tokens (lines) in the vocab (Hugging Face's ``tokenizer.vocab_size``)."""
    return vocab_size(self.vocab)

  def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=None):
    """Token ids -> text: word pieces joined as they were split, spacing cleaned up.

    A ``##`` piece is glued to the piece before it (its ``##`` dropped); every other piece
    starts a new word, after one space. That alone gives the basic tokenizer's words joined
    by single spaces (lowercased and accent-stripped for uncased models, punctuation split
    off: "Déjà-vu!" -> "deja - vu !"); the original text cannot be recovered beyond that.
    ``clean_up_tokenization_spaces`` then removes the spaces Hugging Face's
    ``clean_up_tokenization`` removes (``CLEAN_UP_RULES``: " ." -> ".", " ," -> ",",
    " n't" -> "n't", ...): "deja - vu!", "hello, world!", "isn't it?".

    Args:
      ids: one token id (int, numpy integer, 0-d tensor) or a sequence of them (list, 1-D
        numpy array or tensor), e.g. one row of ``input_word_ids``.
      skip_special_tokens: leave out ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (as Hugging Face's
        ``decode(..., skip_special_tokens=True)``); default False keeps them, as words.
      clean_up_tokenization_spaces: None (default) uses the tokenizer's setting (True unless
        it was made with ``clean_up_tokenization_spaces=False``). True gives what Hugging
        Face's ``BertTokenizer.decode(ids, clean_up_tokenization_spaces=True)`` gives; False
        the pieces joined with no cleanup (what its WordPiece decoder with ``cleanup=False``
        gives; transformers 5's default sits between: its decoder glues only " . , ! ?").
    Returns:
      A str.
    Raises:
      BertTfError: an id that is not in the vocab, or ids that are not 0-d or 1-d.
    """
    ids = ids.numpy() if hasattr(ids, "numpy") else ids
    if isinstance(ids, (int, np.integer)) or np.ndim(ids) == 0:
      ids = [ids]
    elif np.ndim(ids) != 1:
      raise BertTfError(f"decode: expected one id or a 1-D sequence of ids, got shape "
                        f"{np.shape(ids)} (decode each row)")
    tokens = []
    for position, i in enumerate(ids):
      token = self.inv_vocab.get(int(i))
      if token is None:
        raise BertTfError(f"decode: id {int(i)} at position {position} is not in the vocab "
                          f"({len(self.inv_vocab)} tokens)")
      if skip_special_tokens and token in SPECIAL_TOKENS:
        continue
      tokens.append(token)
    text = join_word_pieces(tokens)
    if clean_up_tokenization_spaces is None:
      clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
    return clean_up_tokenization(text) if clean_up_tokenization_spaces else text


def join_word_pieces(tokens):
  """Word pieces -> text: a ``##`` piece glued to the one before (its ``##`` dropped), every
  other piece after one space (a leading ``##`` piece loses its mark; ``##`` alone is a token).
  Hugging Face's decoder differs only on those two, pieces that tokenizing text never gives:
  it keeps a leading piece's ``##`` and glues a lone ``##`` to the piece before."""
  text = []
  for token in tokens:
    if token.startswith(_CONTINUATION) and len(token) > len(_CONTINUATION):
      text.append(token[len(_CONTINUATION):])
    else:
      text.extend((" ", token) if text else (token,))
  return "".join(text)


def clean_up_tokenization(text):
  """Hugging Face's ``clean_up_tokenization``: ``CLEAN_UP_RULES`` applied in order."""
  for dirty, clean in CLEAN_UP_RULES:
    text = text.replace(dirty, clean)
  return text
