r"""Learn a WordPiece vocab.txt from raw text, for pretraining BERT from scratch.

  python data_prep/build_vocab.py --input_file='corpus/*.txt' --vocab_file=vocab.txt \
    --vocab_size=30522 --do_lower_case=True --num_unused_tokens=99

The vocab has [PAD] at id 0, then the [unusedN] slots, then [UNK] [CLS] [SEP] [MASK], then the
learned pieces (see ``bert_tf.vocab``).
"""

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew
flags.DEFINE_list("input_file", None, "Text files or globs (comma-separated).")
flags.DEFINE_string("vocab_file", None, "Output vocab.txt.")
flags.DEFINE_integer("vocab_size", 30522, "Tokens in the vocab, special ones included.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase (and strip accents) as an uncased BERT.")
flags.DEFINE_integer("num_unused_tokens", 0,
                     "[unusedN] slots after [PAD] (Google's vocabs have 99).")
flags.DEFINE_integer("min_pair_count", 2, "Stop merging when pairs are rarer than this.")
flags.DEFINE_bool("skip_invalid_utf8", False,
                  "Skip (and count) lines that are not valid UTF-8 instead of failing.")
flags.mark_flags_as_required(["input_file", "vocab_file"])


def main(argv):
  del argv
  from bert_tf import paths, vocab  # pylint: disable=import-outside-toplevel
  paths.check_paths(inputs={"--input_file": FLAGS.input_file},
                    outputs={"--vocab_file": FLAGS.vocab_file})
  tokens = vocab.build_vocab(FLAGS.input_file, FLAGS.vocab_file, FLAGS.vocab_size,
                             do_lower_case=FLAGS.do_lower_case,
                             num_unused_tokens=FLAGS.num_unused_tokens,
                             min_pair_count=FLAGS.min_pair_count,
                             skip_invalid_utf8=FLAGS.skip_invalid_utf8)
  short = (f" (fewer than --vocab_size={FLAGS.vocab_size}: no pair of pieces left occurs "
           f"--min_pair_count={FLAGS.min_pair_count} times; a larger corpus makes more)"
           if len(tokens) < FLAGS.vocab_size else "")
  print(f"wrote {len(tokens)} tokens to {FLAGS.vocab_file}{short}")


if __name__ == "__main__":
  cli.run(main)
