#!/usr/bin/env bash
# The main job end to end, with the same commands a user types (each printed before it runs):
#   text corpus -> vocab -> create_pretraining_data -> run_pretraining (+ eval, twice: the
#   second run resumes the first) -> run_classifier (fine-tune, eval, export) -> a raw-text
#   request answered by the exported SavedModel.
# Run through `make quickstart`, which makes .venv and installs bert_tf first. Point it at your
# own data and sizes with the variables below, e.g.
#   CORPUS=my_corpus.txt TASK_DIR=my_task/ TRAIN_STEPS=20000 make quickstart
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-.venv/bin/python}
OUT=${OUT:-quickstart_output}
CORPUS=${CORPUS:-}                       # one sentence per line, blank line between documents
TASK_DIR=${TASK_DIR:-tests/fixtures/glue/spam_subjects}  # train.tsv/dev.tsv: text_a, label
VOCAB_SIZE=${VOCAB_SIZE:-2000}
SEQ=${SEQ:-64}
PREDICTIONS=${PREDICTIONS:-10}
FIRST_STEPS=${FIRST_STEPS:-500}
TRAIN_STEPS=${TRAIN_STEPS:-1500}
EPOCHS=${EPOCHS:-3}                      # fine-tuning epochs
EVAL_STEPS=${EVAL_STEPS:-20}             # pretraining eval batches (of 32)
mkdir -p "$OUT"
start=$(date +%s)

run() { echo; echo "\$ $*"; "$@"; }

# 1. A real corpus: Python's own documentation (on every install) unless CORPUS is given.
if [ -z "$CORPUS" ]; then
  run "$PY" data_prep/sample_corpus.py --output_file="$OUT/corpus.txt"
  CORPUS="$OUT/corpus.txt"
fi

# 2. A WordPiece vocab learned from the corpus.
run "$PY" data_prep/build_vocab.py --input_file="$CORPUS" --vocab_file="$OUT/vocab.txt" \
  --vocab_size="$VOCAB_SIZE" --do_lower_case=True

# 3. Masked-LM / next-sentence instances, as Google's create_pretraining_data.py makes them.
run "$PY" data_prep/create_pretraining_data.py --input_file="$CORPUS" \
  --output_file="$OUT/pretraining-0.tfrecord,$OUT/pretraining-1.tfrecord" \
  --vocab_file="$OUT/vocab.txt" --do_lower_case=True --max_seq_length="$SEQ" \
  --max_predictions_per_seq="$PREDICTIONS" --masked_lm_prob=0.15 --dupe_factor=5 \
  --random_seed=12345

# 4. A small BERT (2 layers, hidden 128), pretrained from scratch on CPU. The second command is
#    the same run continued: it resumes from the first one's checkpoint. (No dropout and a
#    moderate learning rate: a model this small on this little data learns fastest that way;
#    at 1e-3 it sits on the unigram plateau for thousands of steps.)
VOCAB_LINES=$(wc -l < "$OUT/vocab.txt")
cat > "$OUT/bert_config.json" <<JSON
{"vocab_size": $VOCAB_LINES, "hidden_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 2, "intermediate_size": 512, "hidden_act": "gelu",
 "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
 "max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02}
JSON
for steps in "$FIRST_STEPS" "$TRAIN_STEPS"; do
  run "$PY" run_pretraining.py --input_file="$OUT/pretraining-*.tfrecord" \
    --output_dir="$OUT/pretraining" --bert_config_file="$OUT/bert_config.json" \
    --vocab_file="$OUT/vocab.txt" \
    --do_train=True --do_eval=True --max_seq_length="$SEQ" \
    --max_predictions_per_seq="$PREDICTIONS" --train_batch_size=32 --eval_batch_size=32 \
    --learning_rate=3e-4 --num_train_steps="$steps" --num_warmup_steps=100 \
    --steps_per_loop=100 --save_checkpoints_steps=100 --max_eval_steps="$EVAL_STEPS" --seed=1
  # The step the eval ran at (a run over a folder that is already further along trains nothing
  # and evaluates where it is).
  step=$(sed -n 's/^global_step = //p' "$OUT/pretraining/eval_results.txt")
  grep masked_lm_accuracy "$OUT/pretraining/eval_results.txt" | sed "s/^/after $step steps: /"
done

# 5. Fine-tune it on a real labelled task (SpamAssassin subject lines, spam or ham), evaluate,
#    export SavedModels that take raw text (replacing the export of a previous quickstart run:
#    the folder is quickstart's own).
run "$PY" run_classifier.py --task_name=user --data_dir="$TASK_DIR" \
  --vocab_file="$OUT/vocab.txt" --do_lower_case=True \
  --bert_config_file="$OUT/bert_config.json" --init_checkpoint="$OUT/pretraining" \
  --output_dir="$OUT/classifier" --do_train=True --do_eval=True --max_seq_length=32 \
  --train_batch_size=32 --learning_rate=1e-4 --num_train_epochs="$EPOCHS" --seed=1 \
  --export_dir="$OUT/saved_model" --overwrite_export
# The accuracy beside the majority-class baseline (always answering the dev set's most common
# label): what the classifier has to beat.
"$PY" - "$TASK_DIR" "$OUT/classifier/eval_results.txt" <<'PYEOF'
import collections, sys
from bert_tf import quiet; quiet.setup()  # as the scripts: no TensorFlow log lines
from bert_tf.data import glue
task_dir, results = sys.argv[1:]
labels = [e.label for e in glue.get_processor("user", data_dir=task_dir).get_dev_examples(task_dir)]
label, count = collections.Counter(labels).most_common(1)[0]
accuracy = dict(line.split(" = ") for line in open(results).read().splitlines())["eval_accuracy"]
print(f"classifier accuracy {float(accuracy):.4f}; majority-class baseline {count / len(labels):.4f}"
      f" (always {label!r}, {count} of {len(labels)} dev examples)")
PYEOF

# 6. Serve: the SavedModel answers raw text, with TensorFlow and tensorflow-text only. Plain
#    TensorFlow prints its C++ start-up lines (no GPU here: "failed call to cuInit" etc.);
#    TF_CPP_MIN_LOG_LEVEL=3 drops those logged after start-up, and the import-time ones (and
#    "oneDNN custom operations are on", printed on CPUs where TF turns oneDNN on) are
#    left out of the terminal (shown if the step fails).
serve_log="$OUT/.serve_stderr.txt"
TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3} run "$PY" - "$OUT/saved_model" 2>"$serve_log" <<'PYEOF' \
  || { cat "$serve_log" >&2; exit 1; }
import os, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
model = tf.saved_model.load(os.path.join(sys.argv[1], "classifier"))
texts = tf.constant(["Re: patch for the build script on debian",
                     "Lowest mortgage rates - act now, limited offer!!!"])
out = model.serve_text(texts)
for text, label, probs in zip(texts.numpy(), out["labels"].numpy(),
                              out["probabilities"].numpy()):
  print(f"{text.decode()!r} -> {label.decode()} (p={probs.max():.2f})")
PYEOF
# Anything else it wrote to stderr (not TensorFlow's start-up lines) is shown.
grep -v -E '^(WARNING: All log messages before absl::InitializeLog|I[0-9]{4} .*\] (Could not find cuda drivers|This TensorFlow binary is optimized|oneDNN custom operations are on)|To enable the following instructions)' \
  "$serve_log" >&2 || true
rm -f "$serve_log"

echo
echo "Done in $(( $(date +%s) - start )) s. Artifacts:"
echo "  corpus                 $CORPUS"
echo "  vocab                  $OUT/vocab.txt"
echo "  pretraining data       $OUT/pretraining-*.tfrecord"
echo "  pretrained BERT        $OUT/pretraining (checkpoints, summaries, eval_results.txt)"
echo "  ... in Google's format $OUT/pretraining/google/bert_model.ckpt"
echo "  fine-tuned classifier  $OUT/classifier"
echo "  SavedModels            $OUT/saved_model"
echo "Each model folder loads alone, in the virtual environment (source .venv/bin/activate):"
echo "  python -m bert_tf fill-mask --model=$OUT/pretraining ... (README: 'What quickstart made,"
echo "  and how to use it')."
