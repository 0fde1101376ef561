r"""Fine-tune a BERT module of TF-Hub for classification: Google's run_classifier_with_tfhub.py.

  python run_classifier_with_tfhub.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC \
    --bert_hub_module_handle=https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1 \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/

The module (Google's TF1 Hub format: a folder, a .tar.gz or a URL, fetched once into bert_tf's
cache) brings the weights, the vocab and the casing, as it did for the original; the model's
sizes come from its variables (bert_tf.tfhub). Everything else is run_classifier.py: every flag
of it works here, with the same meaning (--init_checkpoint and --vocab_file excepted: the
module's own are used), and a killed run restarted with the same command resumes.
"""

from absl import flags

from bert_tf import cli
import run_classifier  # Its flags, as the original imported them.
from bert_tf.training import flags as training_flags

FLAGS = flags.FLAGS
cli.define_flags_anew(globals())  # %run again in a notebook: defined anew

flags.DEFINE_string(
    "bert_hub_module_handle", None,
    "The BERT module of TF-Hub to fine-tune: its folder, a .tar.gz of it, or its URL "
    "(https://tfhub.dev/google/bert_uncased_L-12_H-768_A-12/1: downloaded once).")


def main(argv):
  del argv
  from bert_tf import tfhub  # pylint: disable=import-outside-toplevel
  from bert_tf.errors import BertTfError  # pylint: disable=import-outside-toplevel
  for name in ("init_checkpoint", "vocab_file"):
    if FLAGS[name].value:
      raise BertTfError(f"--{name} cannot be given with --bert_hub_module_handle: the module "
                        "brings its own")
  if not FLAGS.bert_hub_module_handle:
    raise BertTfError("--bert_hub_module_handle is required")
  run_classifier.require_task_flags()
  module = tfhub.load(FLAGS.bert_hub_module_handle, FLAGS.bert_config_file)
  if FLAGS["do_lower_case"].present and FLAGS.do_lower_case != module.do_lower_case:
    raise BertTfError(f"--do_lower_case={FLAGS.do_lower_case} contradicts the module, whose "
                      f"tokenization_info says do_lower_case={module.do_lower_case}")
  config = module.config
  print(f"TF-Hub module {module.folder}: {config.num_hidden_layers} layers, hidden size "
        f"{config.hidden_size}, {config.num_attention_heads} heads (from "
        f"{module.heads_from}), vocab {config.vocab_size}, "
        f"do_lower_case={module.do_lower_case} (from {module.casing_from})", flush=True)
  FLAGS.init_checkpoint = module.checkpoint
  FLAGS.vocab_file = module.vocab_file
  FLAGS.do_lower_case = module.do_lower_case
  run_classifier.run(training_flags.model_config(config, FLAGS))


def console_main():
  cli.run(main, ctrl_c_stops_at_once=True,
          before_tensorflow=training_flags.enable_xla_cache)


if __name__ == "__main__":
  console_main()
