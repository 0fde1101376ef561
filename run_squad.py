r"""Fine-tune BERT on SQuAD v1.1 / v2.0 and answer questions: Google's run_squad.py, TF2, TPU-first.

  python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --do_train=True --train_file=$SQUAD_DIR/train-v1.1.json \
    --do_predict=True --predict_file=$SQUAD_DIR/dev-v1.1.json --do_eval=True \
    --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
    --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

Every flag of the original works (the TPU ones as aliases of --tpu / --steps_per_loop).
bert_tf adds --do_eval (score predictions.json against --predict_file with the official
SQuAD v1.1 / v2.0 evaluation: eval_results.json and eval_results.txt), --export_dir (a
SavedModel taking question and context strings, returning the answer text and score),
--seed, --dtype, --optimizer_type, ... A killed run restarted with the same command resumes
from its last checkpoint in --output_dir.
"""

from absl import flags

from bert_tf import cli
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

# The original's flags.
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json (Google) or config.json (Hugging Face) of the model.")
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "Where checkpoints, features, predictions and scores go.")
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None,
                    "SQuAD json for predictions, e.g. dev-v1.1.json or test-v1.1.json.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: Google's bert_model.ckpt, a bert_tf training "
                    "checkpoint, a Hugging Face folder / model.safetensors, or a released "
                    "model's name (bert-base-uncased, uncased_L-12_H-768_A-12, ...: downloaded "
                    "once; its bert_config.json and vocab.txt become the defaults).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_bool("preserve_unused_tokens", False, cli.PRESERVE_UNUSED_TOKENS_HELP)
flags.DEFINE_integer("max_seq_length", 384,
                     "Word pieces per feature, [CLS] and [SEP]s included; contexts longer "
                     "than fits are split into doc spans, shorter ones padded.")
flags.DEFINE_integer("doc_stride", 128,
                     "How far apart (in word pieces) consecutive doc spans of a long "
                     "context start.")
flags.DEFINE_integer("max_query_length", 64,
                     "Questions longer than this many word pieces are truncated to it.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to predict answers for --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training with linear learning-rate warmup (0.1 = 10%).")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("n_best_size", 20,
                     "Start and end positions tried per feature, and n-best answers kept in "
                     "nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30,
                     "Longest answer in word pieces (start and end are predicted "
                     "independently).")
flags.DEFINE_bool("verbose_logging", False,
                  "Log why an answer's text could not be aligned with the context.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD 2.0: some questions have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "SQuAD 2.0: predict no answer if null_score - best_non_null is above this.")
# bert_tf's own.
flags.DEFINE_bool("do_eval", False,
                  "After --do_predict, score the predictions against --predict_file's gold "
                  "answers with the official SQuAD evaluation (v2.0 with "
                  "--version_2_with_negative): eval_results.json, eval_results.txt.")
flags.DEFINE_string("export_dir", None,
                    "Also write a question-answering SavedModel here: question and context "
                    "strings in, answer text, score and character offsets out. It must be a "
                    "new or empty folder, not --output_dir (nothing is deleted).")
flags.DEFINE_bool("overwrite_export", False,
                  "Replace a previous export at --export_dir (only an export: a folder with "
                  "other files is never replaced).")
flags.DEFINE_integer("seed", None, "Random seed (head initialisation, dropout, data order).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
flags.DEFINE_bool("export_google_checkpoint", True,
                  "After training, also write output_dir/google/bert_model.ckpt in Google's "
                  "format (with bert_config.json and vocab.txt).")
training_flags.define_eval_during_training_flags("f1")
training_flags.define_training_flags()


def main(argv):
  del argv
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  from bert_tf.training.loop import eval_results_text  # pylint: disable=import-outside-toplevel
  from bert_tf.training import squad  # pylint: disable=import-outside-toplevel
  cli.resolve_model_flags(FLAGS, required=("vocab_file", "bert_config_file"))
  if not FLAGS.output_dir:
    raise BertTfError("--output_dir is required")
  config = training_flags.model_config(checkpoints.load_config(FLAGS.bert_config_file), FLAGS)
  dist = training_flags.distribution_args(FLAGS)
  loop = training_flags.loop_kwargs(FLAGS)
  strategy = distribution.get_strategy(**dist.strategy_kwargs())
  results = squad.run_squad(
      config, FLAGS.vocab_file, FLAGS.output_dir, strategy, train_file=FLAGS.train_file,
      predict_file=FLAGS.predict_file, init_checkpoint=FLAGS.init_checkpoint,
      do_lower_case=FLAGS.do_lower_case, preserve_unused_tokens=FLAGS.preserve_unused_tokens,
      max_seq_length=FLAGS.max_seq_length,
      doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
      do_train=FLAGS.do_train, do_predict=FLAGS.do_predict, do_eval=FLAGS.do_eval,
      train_batch_size=FLAGS.train_batch_size, predict_batch_size=FLAGS.predict_batch_size,
      learning_rate=FLAGS.learning_rate, num_train_epochs=FLAGS.num_train_epochs,
      warmup_proportion=FLAGS.warmup_proportion,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, steps_per_loop=loop["steps_per_loop"],
      gradient_accumulation_steps=loop["gradient_accumulation_steps"], dtype=loop["dtype"],
      jit_compile=loop["jit_compile"], device_loop=loop["device_loop"],
      prefetch_to_device=loop["prefetch_to_device"],
      optimizer_kwargs=training_flags.optimizer_kwargs(FLAGS),
      n_best_size=FLAGS.n_best_size, max_answer_length=FLAGS.max_answer_length,
      verbose_logging=FLAGS.verbose_logging,
      version_2_with_negative=FLAGS.version_2_with_negative,
      null_score_diff_threshold=FLAGS.null_score_diff_threshold, seed=FLAGS.seed,
      export_google_checkpoint=FLAGS.export_google_checkpoint, export_dir=FLAGS.export_dir,
      overwrite_export=FLAGS.overwrite_export,
      **training_flags.eval_during_training_kwargs(FLAGS),
      resume_with_changed_flags=FLAGS.resume_with_changed_flags, progress=print)
  if "predict" in results:
    for path in results["predict"]["files"].values():
      print(f"***** Wrote {path} *****")
  if "eval" in results:
    print("***** Eval results *****")
    for key, value in results["eval"].items():
      print(f"  {key} = {eval_results_text(value, float32=False)}")


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True,
          before_tensorflow=training_flags.enable_xla_cache)


if __name__ == "__main__":
  console_main()
