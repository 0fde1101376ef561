r"""Fine-tune BERT for sentence (pair) classification: Google's run_classifier.py, TF2, TPU-first.

  python run_classifier.py --task_name=MRPC --do_train=True --do_eval=True \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

Every flag of the original works (the TPU ones as aliases of --tpu / --steps_per_loop). Tasks:
CoLA, SST-2, MRPC, STS-B (regression), QQP, MNLI (dev matched and mismatched), QNLI, RTE,
WNLI, XNLI, AX (predict only, with an MNLI model), or "user" (a data_dir of train/dev/test
.tsv or .csv with text_a, optional text_b and label columns). bert_tf adds --tfds (read the
task from tensorflow-datasets), --export_dir (SavedModels taking raw text), --labels,
--is_regression, --multi_label (any number of labels per example), --seed, --dtype,
--optimizer_type, ... A killed run restarted with the same
command resumes from its last checkpoint in --output_dir.
"""

from absl import flags

from bert_tf import cli
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

# The original's flags.
flags.DEFINE_string("data_dir", None, "The input data dir: the task's .tsv files (with --tfds: "
                    "the tensorflow-datasets data dir, default TFDS's own).")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json (Google) or config.json (Hugging Face) of the model.")
flags.DEFINE_string("task_name", None, "The task: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, "
                    "RTE, WNLI, XNLI, AX, or user.")
flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained on.")
flags.DEFINE_string("output_dir", None,
                    "Where checkpoints, features, eval_results.txt and predictions go.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint: Google's bert_model.ckpt, a bert_tf training "
                    "checkpoint, a Hugging Face folder / model.safetensors, or a released "
                    "model's name (bert-base-uncased, uncased_L-12_H-768_A-12, ...: downloaded "
                    "once; its bert_config.json and vocab.txt become the defaults).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_bool("preserve_unused_tokens", False, cli.PRESERVE_UNUSED_TOKENS_HELP)
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per sequence after tokenization, "
                     "[CLS] and [SEP]s included; longer ones are truncated, shorter padded.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set(s).")
flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set(s).")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1,
                   "Proportion of training with linear learning-rate warmup (0.1 = 10%).")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
# bert_tf's own.
flags.DEFINE_bool("tfds", False, "Read the GLUE task from tensorflow-datasets (glue/<task>, "
                  "prepared beforehand; nothing is downloaded) instead of --data_dir's files.")
flags.DEFINE_string("export_dir", None,
                    "Also write SavedModels here: classifier/ (raw text or ids in, "
                    "probabilities and labels out), encoder/ and preprocessor/ (TF Hub layout). "
                    "It must be a new or empty folder, not --output_dir (nothing is deleted).")
flags.DEFINE_bool("overwrite_export", False,
                  "Replace a previous export at --export_dir (only an export: a folder with "
                  "other files is never replaced).")
flags.DEFINE_list("labels", None, "User task: label names in id order (default: labels.txt "
                  "in --data_dir, else the sorted labels of train).")
flags.DEFINE_bool("is_regression", False, "User task: float labels, one output, squared-error "
                  "loss, Pearson/Spearman metrics.")
flags.DEFINE_bool("multi_label", False,
                  "User task: any number of labels per example (none included): one sigmoid "
                  "output per label, binary cross-entropy loss, micro/macro F1 and subset "
                  "accuracy. Labels: the names in the label column separated by "
                  "--label_separator, or a 0/1 column per label named by --labels.")
flags.DEFINE_string("label_separator", ",",
                    "--multi_label: what separates the label names in the label column.")
flags.DEFINE_string("language", "zh", "XNLI: the language kept from the multilingual files.")
flags.DEFINE_bool("allow_empty_text", False,
                  "Keep rows with an empty text (the original did) instead of an error.")
flags.DEFINE_integer("seed", None, "Random seed (head initialisation, dropout, data order).")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on the pooled output before the "
                   "classification layer (the original's fixed 0.1; 0 for exactly "
                   "reproducible multi-worker runs).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
flags.DEFINE_bool("export_google_checkpoint", True,
                  "After training, also write output_dir/google/bert_model.ckpt in Google's "
                  "format (with bert_config.json and vocab.txt).")
training_flags.define_eval_during_training_flags(
    "the BERT paper's metric of the task (CoLA eval_mcc, MRPC and QQP eval_f1, STS-B "
    "eval_spearman, others eval_accuracy; --multi_label eval_f1, the micro F1)")
training_flags.define_training_flags()


def main(argv):
  del argv
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  cli.resolve_model_flags(FLAGS, required=("vocab_file", "bert_config_file"))
  require_task_flags()
  run(training_flags.model_config(checkpoints.load_config(FLAGS.bert_config_file), FLAGS))


def require_task_flags():
  """--task_name and --output_dir are required (a one-line error)."""
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  for name in ("task_name", "output_dir"):
    if not FLAGS[name].value:
      raise BertTfError(f"--{name} is required")


def run(config):
  """Fine-tunes, evaluates and predicts as the flags say, with the model ``config`` (the flags'
  --init_checkpoint, --vocab_file and --do_lower_case already resolved)."""
  from bert_tf.training import classifier  # pylint: disable=import-outside-toplevel
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  from bert_tf.training.loop import eval_results_text  # pylint: disable=import-outside-toplevel
  dist = training_flags.distribution_args(FLAGS)
  loop = training_flags.loop_kwargs(FLAGS)
  strategy = distribution.get_strategy(**dist.strategy_kwargs())
  results = classifier.run_classifier(
      config, FLAGS.task_name, FLAGS.vocab_file, FLAGS.output_dir, strategy,
      data_dir=FLAGS.data_dir, use_tfds=FLAGS.tfds, init_checkpoint=FLAGS.init_checkpoint,
      do_lower_case=FLAGS.do_lower_case, preserve_unused_tokens=FLAGS.preserve_unused_tokens,
      max_seq_length=FLAGS.max_seq_length,
      do_train=FLAGS.do_train, do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict,
      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
      predict_batch_size=FLAGS.predict_batch_size, learning_rate=FLAGS.learning_rate,
      num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=FLAGS.warmup_proportion,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, steps_per_loop=loop["steps_per_loop"],
      gradient_accumulation_steps=loop["gradient_accumulation_steps"], dtype=loop["dtype"],
      jit_compile=loop["jit_compile"], device_loop=loop["device_loop"],
      prefetch_to_device=loop["prefetch_to_device"],
      optimizer_kwargs=training_flags.optimizer_kwargs(FLAGS),
      labels=FLAGS.labels, is_regression=FLAGS.is_regression, language=FLAGS.language,
      allow_empty_text=FLAGS.allow_empty_text, multi_label=FLAGS.multi_label,
      label_separator=FLAGS.label_separator, seed=FLAGS.seed,
      classifier_dropout=FLAGS.classifier_dropout,
      export_google_checkpoint=FLAGS.export_google_checkpoint, export_dir=FLAGS.export_dir,
      overwrite_export=FLAGS.overwrite_export,
      **training_flags.eval_during_training_kwargs(FLAGS),
      resume_with_changed_flags=FLAGS.resume_with_changed_flags, progress=print)
  if "eval" in results:
    print("***** Eval results *****")
    for key in sorted(results["eval"]):
      print(f"  {key} = {eval_results_text(results['eval'][key])}")
  for split, path in results.get("predict", {}).items():
    print(f"***** Predictions ({split}) written to {path} *****")


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True,
          before_tensorflow=training_flags.enable_xla_cache)


if __name__ == "__main__":
  console_main()
