"""Write a small real English corpus in the pretraining input format, from Python itself.

  python data_prep/sample_corpus.py --output_file=corpus.txt

The text is Python's own documentation topics (``pydoc_data.topics``, about 465 KB of prose,
on every Python install): one sentence per line, a blank line between topics (documents), as
``create_pretraining_data.py`` expects. Code samples and very short fragments are dropped.
"""

import re

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew
flags.DEFINE_string("output_file", None, "Where to write the corpus.")
flags.DEFINE_integer("min_sentence_chars", 20, "Shorter lines are dropped.")
flags.mark_flag_as_required("output_file")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sample_documents(min_sentence_chars=20):
  """Lists of sentences, one list per pydoc topic."""
  from pydoc_data import topics  # pylint: disable=import-outside-toplevel
  documents = []
  for name in sorted(topics.topics):
    paragraphs = re.split(r"\n\s*\n", topics.topics[name])
    sentences = []
    for paragraph in paragraphs:
      if paragraph.startswith((" ", "\t")) or ">>>" in paragraph:
        continue  # code samples, not prose
      text = " ".join(paragraph.split())
      text = re.sub(r"^.*?\*{3,}\s*", "", text)  # a topic's underlined title
      sentences.extend(s for s in _SENTENCE_END.split(text) if len(s) >= min_sentence_chars)
    if len(sentences) >= 2:
      documents.append(sentences)
  return documents


def main(argv):
  del argv
  from bert_tf import fileio, paths  # pylint: disable=import-outside-toplevel
  paths.check_paths(outputs={"--output_file": FLAGS.output_file})
  documents = sample_documents(FLAGS.min_sentence_chars)
  if not documents:  # An empty corpus is create_pretraining_data's error later, far from here.
    from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
    raise BertTfError(f"--min_sentence_chars={FLAGS.min_sentence_chars}: no document keeps "
                      "two sentences that long; nothing written")
  with fileio.atomic_write(FLAGS.output_file) as f:
    for sentences in documents:
      f.write("\n".join(sentences) + "\n\n")
  print(f"wrote {len(documents)} documents, {sum(map(len, documents))} sentences to "
        f"{FLAGS.output_file}")


if __name__ == "__main__":
  cli.run(main)
