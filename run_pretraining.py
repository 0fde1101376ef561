r"""Pretrain BERT on pretraining TFRecords (Google's run_pretraining.py, TF2, TPU-first).

  python run_pretraining.py --input_file=gs://bucket/tf_examples.tfrecord* \
    --output_dir=gs://bucket/pretraining_output --do_train=True --do_eval=True \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
    --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5 \
    --use_tpu=True --tpu_name=$TPU_NAME

Every flag of the original works (the TPU ones as aliases of --tpu / --steps_per_loop); the
rest (--dtype, --gradient_accumulation_steps, --optimizer_type, ...) are bert_tf's. A killed
run restarted with the same command resumes from its last checkpoint in --output_dir.
"""

from absl import flags

from bert_tf import cli
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_string("input_file", None, "Input TFRecord files (comma-separated, globs).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: Google, bert_tf or HF, or "
                    "a released model's name (bert-base-uncased, ...: downloaded once; its "
                    "bert_config.json and vocab.txt become the defaults).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
# bert_tf's own.
flags.DEFINE_string("eval_input_file", None, "Eval TFRecords (default: --input_file).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
flags.DEFINE_integer("seed", None, "Random seed (initialisation, dropout, data order).")
flags.DEFINE_bool("use_next_sentence", True, "Train the next-sentence head (False: MLM only).")
flags.DEFINE_bool("dynamic_masking", False,
                  "Re-mask every sequence each time it is read (RoBERTa style) instead of "
                  "using the masks stored in the TFRecords; needs --vocab_file.")
flags.DEFINE_string("vocab_file", None,
                    "vocab.txt the data was made with: needed by --dynamic_masking, and copied "
                    "into --output_dir and its google/ folder (they then load alone with "
                    "bert_tf.load / --model).")
flags.DEFINE_float("masked_lm_prob", 0.15, "With --dynamic_masking: fraction masked.")
flags.DEFINE_bool("export_google_checkpoint", True,
                  "After training, also write output_dir/google/bert_model.ckpt in Google's "
                  "format (with bert_config.json).")
flags.DEFINE_float("peak_tflops", None, "Peak TFLOP/s of all devices, for the MFU in the "
                   "progress line (detected for known GPUs).")
flags.DEFINE_bool("check_input_files", False,
                  "Before training, read every record of --input_file (and --eval_input_file): "
                  "CRCs, shapes and ids within the config's vocab_size; the first damaged "
                  "record is named (file, byte offset, record number). Without it, the first "
                  "records of each file are checked.")
training_flags.define_eval_during_training_flags("masked_lm_loss")
training_flags.define_training_flags()

for _name in ("input_file", "output_dir"):
  flags.mark_flag_as_required(_name)


def main(argv):
  del argv
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.training import distribution  # pylint: disable=import-outside-toplevel
  from bert_tf.training.loop import eval_results_text  # pylint: disable=import-outside-toplevel
  from bert_tf.training import pretraining  # pylint: disable=import-outside-toplevel
  cli.resolve_model_flags(FLAGS, required=("bert_config_file",))
  config = training_flags.model_config(checkpoints.load_config(FLAGS.bert_config_file), FLAGS)
  dist = training_flags.distribution_args(FLAGS)
  strategy = distribution.get_strategy(**dist.strategy_kwargs())
  loop = training_flags.loop_kwargs(FLAGS)
  dynamic_masking = None
  if FLAGS.dynamic_masking:
    from bert_tf import tokenization  # pylint: disable=import-outside-toplevel
    if not FLAGS.vocab_file:
      from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
      raise BertTfError("--dynamic_masking needs --vocab_file")
    vocab = tokenization.load_vocab(FLAGS.vocab_file)
    from bert_tf.training import preflight  # pylint: disable=import-outside-toplevel
    preflight.check_special_tokens(vocab, FLAGS.vocab_file, ("[MASK]", "[CLS]", "[SEP]"))
    tokenization.check_vocab_size(FLAGS.vocab_file, len(vocab), config.vocab_size,
                                  FLAGS.bert_config_file)
    dynamic_masking = {"vocab_size": len(vocab), "mask_id": vocab["[MASK]"],
                       "special_ids": [vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]")
                                       if t in vocab],
                       "masked_lm_prob": FLAGS.masked_lm_prob}
  results = pretraining.run_pretraining(
      config, FLAGS.input_file, FLAGS.output_dir, strategy,
      init_checkpoint=FLAGS.init_checkpoint, eval_input_file=FLAGS.eval_input_file,
      max_seq_length=FLAGS.max_seq_length,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq, do_train=FLAGS.do_train,
      do_eval=FLAGS.do_eval, train_batch_size=FLAGS.train_batch_size,
      eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate,
      num_train_steps=FLAGS.num_train_steps, num_warmup_steps=FLAGS.num_warmup_steps,
      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
      keep_checkpoint_max=FLAGS.keep_checkpoint_max, max_eval_steps=FLAGS.max_eval_steps,
      steps_per_loop=loop["steps_per_loop"],
      gradient_accumulation_steps=loop["gradient_accumulation_steps"], dtype=loop["dtype"],
      jit_compile=loop["jit_compile"], device_loop=loop["device_loop"],
      prefetch_to_device=loop["prefetch_to_device"],
      optimizer_kwargs=training_flags.optimizer_kwargs(FLAGS),
      use_next_sentence=FLAGS.use_next_sentence, dynamic_masking=dynamic_masking,
      seed=FLAGS.seed, export_google_checkpoint=FLAGS.export_google_checkpoint,
      peak_flops=FLAGS.peak_tflops * 1e12 if FLAGS.peak_tflops else None,
      vocab_file=FLAGS.vocab_file, check_input_files=FLAGS.check_input_files,
      **training_flags.eval_during_training_kwargs(FLAGS),
      resume_with_changed_flags=FLAGS.resume_with_changed_flags, progress=print)
  if "eval" in results:
    print("***** Eval results *****")
    for key in sorted(results["eval"]):
      print(f"  {key} = {eval_results_text(results['eval'][key])}")


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True,
          before_tensorflow=training_flags.enable_xla_cache)


if __name__ == "__main__":
  console_main()
