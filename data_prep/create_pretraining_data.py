r"""Pretraining TFRecords from raw text: Google's create_pretraining_data.py, much faster.

  python data_prep/create_pretraining_data.py \
    --input_file='corpus/*.txt' --output_file=out/train-0.tfrecord,out/train-1.tfrecord \
    --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 \
    --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=10

Input: one sentence per line, a blank line between documents (as the original).

By default the output is the original's, record for record: the same flags and seed give the
same instances in the same files (written round-robin). --num_workers=N (N >= 1) instead cuts
the input into shards (files, large files split at document boundaries into about
--shard_size_mb), makes each shard's instances in one of N processes with its own random
seed, and writes them in shard order: deterministic for a given seed (whatever N), memory
bounded by a shard, but not the original's output (its random next sentences come from the
shard). Outputs are written atomically; a summary is logged at the end.

--runner=DirectRunner|DataflowRunner|FlinkRunner|SparkRunner runs sharded mode as an Apache
Beam pipeline (``pip install 'bert_tf[beam]'``): the same bytes as --num_workers, shards spread
over the runner's workers. Beam's own options follow a ``--``:

  python data_prep/create_pretraining_data.py --runner=DataflowRunner \
    --input_file='gs://b/corpus/*.txt' --output_file=gs://b/out/train-0.tfrecord ... \
    -- --project=P --region=us-central1 --temp_location=gs://b/tmp --setup_file=./setup.py
"""

import logging as std_logging

from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf.errors import BertTfError

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

# The original's flags, same names, defaults and meanings.
flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files; globs work).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained "
                    "on, or a released model's name (bert-base-uncased, ...: its vocab.txt).")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("preserve_unused_tokens", False, cli.PRESERVE_UNUSED_TOKENS_HELP)
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the maximum length.")

# bert_tf's additions.
flags.DEFINE_integer("num_workers", 0,
                     "0: the original's exact output, in this process. N >= 1: sharded mode "
                     "with N worker processes (deterministic, not the original's output).")
flags.DEFINE_float("shard_size_mb", 16.0,
                   "Sharded mode: files larger than this are cut into shards of about this "
                   "size, at document boundaries.")
flags.DEFINE_bool("gzip", False, "Write GZIP-compressed TFRecords.")
flags.DEFINE_enum("runner", None, ["DirectRunner", "DataflowRunner", "FlinkRunner",
                                    "SparkRunner"],
                  "Run sharded mode as an Apache Beam pipeline on this runner (needs "
                  "apache-beam: pip install 'bert_tf[beam]'); the same records as "
                  "--num_workers. Beam's own options go after '--'. With DirectRunner, "
                  "--num_workers=N runs N worker processes.")
flags.DEFINE_bool("skip_invalid_utf8", False,
                  "Skip (and count) lines that are not valid UTF-8 instead of failing.")

flags.mark_flag_as_required("input_file")
flags.mark_flag_as_required("output_file")
flags.mark_flag_as_required("vocab_file")


def main(argv):
  beam_args = argv[1:]
  if beam_args and not FLAGS.runner:
    raise BertTfError(f"unexpected arguments {' '.join(beam_args)!r} (Beam's options, after "
                      "'--', need --runner)")
  beam_options = None
  if FLAGS.runner:
    # Beam logs each worker's start and stop at INFO: noise around the summary.
    std_logging.getLogger("apache_beam").setLevel(std_logging.WARNING)
    from bert_tf.data import pretraining_beam  # pylint: disable=import-outside-toplevel
    beam_options = pretraining_beam.pipeline_options(FLAGS.runner, beam_args,
                                                     FLAGS.num_workers)
  from bert_tf import casing  # pylint: disable=import-outside-toplevel
  from bert_tf import tokenization  # pylint: disable=import-outside-toplevel
  from bert_tf.data import output_checks  # pylint: disable=import-outside-toplevel
  from bert_tf.data import pretraining  # pylint: disable=import-outside-toplevel
  from bert_tf import pretrained  # pylint: disable=import-outside-toplevel
  FLAGS.vocab_file = pretrained.resolve_file(FLAGS.vocab_file, "vocab.txt")  # bert-base-uncased

  # Bad output paths fail here, before any work and before anything is written.
  output_files = [f for f in FLAGS.output_file.split(",") if f]
  # The readers (run_pretraining, check_tfrecords.py) take a file for GZIP by its .gz name.
  misnamed = [f for f in output_files if f.endswith(".gz") != FLAGS.gzip]
  if misnamed and FLAGS.gzip:
    raise BertTfError(f"--output_file {misnamed[0]!r}: --gzip outputs are named *.gz (the "
                      "readers take a file for GZIP by its name)")
  if misnamed:
    raise BertTfError(f"--output_file {misnamed[0]!r} is named .gz but --gzip is off: pass "
                      "--gzip, or drop the .gz")
  output_checks.check_outputs(output_files, pretraining.expand_input_files(FLAGS.input_file),
                              FLAGS.vocab_file)
  for path in output_checks.remove_leftovers(output_files):
    logging.info("removed %s, left by an interrupted run", path)
  earlier, glob = output_checks.earlier_shards(output_files)
  warning = None
  if earlier:
    shown = ", ".join(earlier[:3]) + (f", ... ({len(earlier)} files)" if len(earlier) > 3 else "")
    warning = (f"{shown}: numbered as --output_file's files but not written by this run (an "
               f"earlier run's?); a glob such as {glob!r} reads them with this run's records: "
               "remove them, or write to a folder of their own")
    logging.warning("%s", warning)

  options = pretraining.InstanceOptions(
      max_seq_length=FLAGS.max_seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      masked_lm_prob=FLAGS.masked_lm_prob,
      short_seq_prob=FLAGS.short_seq_prob,
      dupe_factor=FLAGS.dupe_factor,
      do_whole_word_mask=FLAGS.do_whole_word_mask,
      random_seed=FLAGS.random_seed)
  options.validate()
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                                         preserve_unused_tokens=FLAGS.preserve_unused_tokens)
  # The costliest place to get the casing wrong (every record, then the whole pretraining):
  # a vocab of the other casing is a warning, as in the training scripts.
  casing_warning = casing.check_flag(FLAGS.do_lower_case, tokenizer.vocab, FLAGS.vocab_file)
  if casing_warning:
    logging.warning("%s", casing_warning)
  try:
    with output_checks.os_errors_as_bert_tf_errors():
      if beam_options is not None:
        summary = pretraining_beam.create_pretraining_data_beam(
            FLAGS.input_file, output_files, tokenizer, options, beam_options=beam_options,
            shard_size_mb=FLAGS.shard_size_mb, gzip=FLAGS.gzip,
            skip_invalid_utf8=FLAGS.skip_invalid_utf8, vocab_file=FLAGS.vocab_file)
      else:
        summary = pretraining.create_pretraining_data(
            FLAGS.input_file, output_files, tokenizer, options,
            num_workers=FLAGS.num_workers, shard_size_mb=FLAGS.shard_size_mb, gzip=FLAGS.gzip,
            skip_invalid_utf8=FLAGS.skip_invalid_utf8, vocab_file=FLAGS.vocab_file)
  except KeyboardInterrupt:
    # Ctrl-C: the writers discard their temp files; whatever an unlucky moment left (a temp
    # file being opened, a spill directory) goes too. cli.run prints one line, exit 130.
    output_checks.remove_leftovers(output_files)
    raise
  for line in summary.lines_of_text():
    logging.info("%s", line)
  if warning:  # again at the end, where a long run's log is read
    logging.warning("%s", warning)


if __name__ == "__main__":
  cli.run(main, positional_args=True)  # Beam's options, after '--'
