"""The README's main command, shortened: every step runs and leaves its artifact."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_runs_end_to_end(tmp_path):
  import sys
  env = {**os.environ, "OUT": str(tmp_path / "out"), "PY": sys.executable,
         "FIRST_STEPS": "10", "TRAIN_STEPS": "20", "EPOCHS": "0.1", "VOCAB_SIZE": "600"}
  result = subprocess.run(["bash", os.path.join(ROOT, "quickstart.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  out = tmp_path / "out"
  for artifact in ("corpus.txt", "vocab.txt", "pretraining-0.tfrecord", "pretraining-1.tfrecord",
                   "pretraining/eval_results.txt", "pretraining/google/bert_model.ckpt.index",
                   "classifier/eval_results.txt", "saved_model/classifier/saved_model.pb"):
    assert (out / artifact).exists(), artifact
  lines = result.stdout.splitlines()
  assert any(line.startswith("after 10 steps: masked_lm_accuracy") for line in lines)
  assert any(line.startswith("after 20 steps: masked_lm_accuracy") for line in lines)
  assert any("resumed from" in line and "at step 10" in line for line in lines)
  answers = [line for line in lines if " -> " in line]
  assert len(answers) == 2 and all(line.split(" -> ")[1].split()[0] in ("ham", "spam")
                                   for line in answers)
  # Every step is a documented user command, printed before it runs.
  commands = [line for line in lines if line.startswith("$ ")]
  for script in ("data_prep/sample_corpus.py", "data_prep/build_vocab.py",
                 "data_prep/create_pretraining_data.py", "run_pretraining.py",
                 "run_classifier.py"):
    assert any(script in line for line in commands), script
