r"""Per-token activations of a BERT's layers as JSON lines (Google's extract_features.py).

  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
    --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8

``--init_checkpoint`` takes a Google checkpoint, a Hugging Face folder / ``.safetensors``
file, or a released model's name (``--init_checkpoint=bert-base-uncased``: downloaded once,
and ``--bert_config_file``/``--vocab_file`` default to its files); ``--bert_config_file`` a
Google ``bert_config.json`` or a Hugging Face ``config.json``.
"""

import sys

from absl import flags

from bert_tf import cli

FLAGS = flags.FLAGS
# (%run again in a notebook: defined anew; the original's TPU flags its own way)
cli.define_flags_anew(globals(), replacing=("use_tpu", "master", "num_tpu_cores"))

flags.DEFINE_string("input_file", None, "Text file, one input per line; 'a ||| b' for a pair.")
flags.DEFINE_string("output_file", None, "Output JSON-lines file.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes: -1 = the "
                    "last layer, 0 = the first (as bert_tf embed --layers).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum total input length after WordPiece.")
flags.DEFINE_string("init_checkpoint", None, "Google checkpoint, Hugging Face weights, or a "
                    "released model's name (bert-base-uncased, ...: downloaded once; its "
                    "bert_config.json and vocab.txt become the defaults).")
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input (uncased models).")
flags.DEFINE_bool("preserve_unused_tokens", False, cli.PRESERVE_UNUSED_TOKENS_HELP)
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
# Accepted for command-line compatibility with the original; bert_tf decides these itself.
flags.DEFINE_bool("use_tpu", False, "Accepted for compatibility (see --distribution_strategy "
                  "in the training scripts).")
flags.DEFINE_string("master", None, "Accepted for compatibility; unused.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility; unused.")
flags.DEFINE_bool("use_one_hot_embeddings", False, "Accepted for compatibility; unused.")

for _name in ("input_file", "output_file", "init_checkpoint"):
  flags.mark_flag_as_required(_name)


def main(argv):
  del argv
  from bert_tf import paths  # pylint: disable=import-outside-toplevel
  from bert_tf.training import preflight  # pylint: disable=import-outside-toplevel
  preflight.check_at_least({"--batch_size": (FLAGS.batch_size, 1)})
  paths.check_paths(inputs={f"--{name}": FLAGS[name].value for name in (
      "input_file", "vocab_file", "bert_config_file", "init_checkpoint")},
                    outputs={"--output_file": FLAGS.output_file})
  # Imported here so that --help is fast and flag errors come before TensorFlow starts.
  from bert_tf import extract, tokenization  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertModel, checkpoints  # pylint: disable=import-outside-toplevel
  cli.resolve_model_flags(FLAGS, required=("bert_config_file", "vocab_file"))
  tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
                                         preserve_unused_tokens=FLAGS.preserve_unused_tokens)
  config = checkpoints.load_config(FLAGS.bert_config_file)
  preflight.check_tokenizer(tokenizer, FLAGS.vocab_file, config, FLAGS.do_lower_case,
                            FLAGS.init_checkpoint, lambda line: print(line, file=sys.stderr),
                            config_file=FLAGS.bert_config_file)
  model = BertModel(config)
  checkpoints.load_weights(model, FLAGS.init_checkpoint)  # logs what was loaded
  count = extract.extract_features(model, tokenizer, FLAGS.input_file, FLAGS.output_file,
                                   layers=FLAGS.layers, max_seq_length=FLAGS.max_seq_length,
                                   batch_size=FLAGS.batch_size)
  print(f"wrote {count} lines to {FLAGS.output_file}")


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True)


if __name__ == "__main__":
  console_main()
