r"""Fine-tune BERT for token classification (named entities, chunking, tagging), TF2, TPU-first.

  python run_ner.py --do_train=True --do_eval=True --do_predict=True \
    --data_dir=$CONLL_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_lower_case=False \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/ner_output/

The original BERT had no such script (its users asked for one from the start): this is
run_classifier's shape with Hugging Face's BertForTokenClassification recipe. --data_dir holds
train.txt, dev.txt and test.txt in the CoNLL format (a word and its tag per line, a blank line
between sentences). Each word's tag is learned and predicted at its first word piece.
eval_results.txt has conlleval's entity precision, recall and F1; eval_predictions.txt and
test_predictions.txt are conlleval's input. A killed run restarted with the same command
resumes from its last checkpoint in --output_dir.
"""

from absl import flags

from bert_tf import cli
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

flags.DEFINE_string("data_dir", None, "train.txt, dev.txt and test.txt in the CoNLL format.")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json (Google) or config.json (Hugging Face) of the model.")
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained on.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, eval_results.txt and the "
                    "predictions go.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: Google's bert_model.ckpt, a bert_tf training "
                    "checkpoint, a Hugging Face folder / model.safetensors, or a released "
                    "model's name (bert-base-cased, ...: downloaded once; its "
                    "bert_config.json and vocab.txt become the defaults).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models; "
                  "cased models are usual for named entities).")
flags.DEFINE_bool("preserve_unused_tokens", False, cli.PRESERVE_UNUSED_TOKENS_HELP)
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per sequence, [CLS] and [SEP] "
                     "included; a longer sentence is split between words into several.")
flags.DEFINE_bool("do_train", False, "Whether to run training on train.txt.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on dev.txt.")
flags.DEFINE_bool("do_predict", False, "Whether to tag test.txt (and score it when it has tags).")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training with linear learning-rate warmup (0.1 = 10%).")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_list("labels", None, "The tag names in id order (default: labels.txt in "
                  "--data_dir, else O and the sorted tags of train.txt).")
flags.DEFINE_integer("label_column", -1, "The column of the tag in the CoNLL files (the word "
                     "is column 0; -1 the last: CoNLL-2003's NER tags).")
flags.DEFINE_integer("seed", None, "Random seed (head initialisation, dropout, data order).")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on every token's output before the "
                   "classification layer.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
flags.DEFINE_bool("export_google_checkpoint", True,
                  "After training, also write output_dir/google/bert_model.ckpt in Google's "
                  "format (with bert_config.json and vocab.txt).")
training_flags.define_eval_during_training_flags(
    "eval_f1 (conlleval's entity F1), or eval_accuracy for tags without B-/I- prefixes")
training_flags.define_training_flags()


def main(argv):
  del argv
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  cli.resolve_model_flags(FLAGS, required=("vocab_file", "bert_config_file"))
  if not FLAGS.output_dir:
    raise BertTfError("--output_dir is required")
  run(training_flags.model_config(checkpoints.load_config(FLAGS.bert_config_file), FLAGS))


def run(config):
  """Fine-tunes, evaluates and predicts as the flags say, with the model ``config``."""
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  from bert_tf.training.loop import eval_results_text  # pylint: disable=import-outside-toplevel
  from bert_tf.training import token_classifier  # pylint: disable=import-outside-toplevel
  dist = training_flags.distribution_args(FLAGS)
  loop = training_flags.loop_kwargs(FLAGS)
  strategy = distribution.get_strategy(**dist.strategy_kwargs())
  results = token_classifier.run_token_classifier(
      config, FLAGS.data_dir, FLAGS.vocab_file, FLAGS.output_dir, strategy,
      init_checkpoint=FLAGS.init_checkpoint, do_lower_case=FLAGS.do_lower_case,
      preserve_unused_tokens=FLAGS.preserve_unused_tokens,
      max_seq_length=FLAGS.max_seq_length, do_train=FLAGS.do_train, do_eval=FLAGS.do_eval,
      do_predict=FLAGS.do_predict, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.eval_batch_size, predict_batch_size=FLAGS.predict_batch_size,
      learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs,
      warmup_proportion=FLAGS.warmup_proportion,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, steps_per_loop=loop["steps_per_loop"],
      gradient_accumulation_steps=loop["gradient_accumulation_steps"], dtype=loop["dtype"],
      jit_compile=loop["jit_compile"], device_loop=loop["device_loop"],
      prefetch_to_device=loop["prefetch_to_device"],
      optimizer_kwargs=training_flags.optimizer_kwargs(FLAGS), labels=FLAGS.labels,
      label_column=FLAGS.label_column, seed=FLAGS.seed,
      classifier_dropout=FLAGS.classifier_dropout,
      export_google_checkpoint=FLAGS.export_google_checkpoint,
      **training_flags.eval_during_training_kwargs(FLAGS),
      resume_with_changed_flags=FLAGS.resume_with_changed_flags, progress=print)
  for phase, title in (("eval", "Eval results"), ("predict", "Test results")):
    values = results.get(phase, {})
    values = values.get("results", {}) if phase == "predict" else values
    if values:
      print(f"***** {title} *****")
      for key in sorted(values):
        print(f"  {key} = {eval_results_text(values[key], float32=False)}")
  if "predict" in results:
    print(f"***** Predictions written to {results['predict']['predictions']} *****")


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True,
          before_tensorflow=training_flags.enable_xla_cache)


if __name__ == "__main__":
  console_main()
