"""Reading: input files -> a ``Corpus`` of documents of sentences of WordPiece ids.

Mirrors the reading half of ``create_training_instances`` in Google's create_pretraining_data.py:
the ``--input_file`` globs (``tf.gfile.Glob``), every line of every file read as
``tf.gfile.GFile.readline`` does, ``tokenization.convert_to_unicode`` + ``strip``, a blank line
ending a document (documents continue across files), ``tokenizer.tokenize`` of the others, and
empty documents dropped. The shuffle of the documents that follows is ``instances``'s.

The corpus is flat arrays of ids, and each distinct word is WordPiece-tokenized once
(``LineTokenizer``).
"""

import array
import glob
import logging
import os

import numpy as np

from bert_tf import fileio
from bert_tf.errors import BertTfError

logger = logging.getLogger(__name__)

_READ_CHUNK_BYTES = 1 << 22


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
      why = fileio.dangling_link(pattern) or f"no file matches {pattern!r}"
      raise BertTfError(f"--input_file: {why}")
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


def iter_lines(path, start=0, end=None):
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
  WordPiece word by word, so the ids of each distinct word are computed once and a line's ids
  are the join of its words' (in C); with ``preserve_unused_tokens``, so are those of lines
  that cannot hold an ``[unusedN]`` word.
  """

  def __init__(self, tokenizer, max_words=1 << 20):
    self.tokenizer = tokenizer
    basic = getattr(tokenizer, "basic_tokenizer", None)
    wordpiece = getattr(tokenizer, "wordpiece_tokenizer", None)
    self._by_word = (not getattr(tokenizer, "never_split", ()) and basic is not None and
                     hasattr(wordpiece, "tokenize_word"))
    # --preserve_unused_tokens changes only lines that hold "[" and "]" (an [unusedN] word,
    # cleaning only deletes characters and turns whitespace into spaces): they go the slow way.
    self._preserve = getattr(tokenizer, "preserve_unused_tokens", False)
    if self._by_word:
      self._basic = basic.tokenize
      self._ids = _WordIds(tokenizer, max_words).__getitem__

  def __call__(self, text):
    if not self._by_word or (self._preserve and "[" in text and "]" in text):
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
    for offset, raw in iter_lines(path, start, end):
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
