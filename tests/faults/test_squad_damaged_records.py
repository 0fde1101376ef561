"""run_squad.py's feature TFRecords damaged while the run reads them (issue 27, item 2).

run_squad writes train.tf_record (cached between runs) and eval.tf_record (to predict) into
--output_dir and reads them back. Before, a damaged one was TensorFlow's DataLossError, a
traceback naming no file. Here the run holds at the fault point ``records_read`` (before it
opens the file), the test changes one byte of the file, and the run goes on: one line naming
the file, the record's byte offset (summed by the test from the frames' lengths) and what to
do, exit 1. The same command again: a damaged train.tf_record is named and written again
(``record_check.reusable``), a damaged eval.tf_record is written anew, and the run ends.
"""

import json
import os
import subprocess
import sys

from tests.conftest import FIXTURES
from tests.faults import hook
from tests.faults.support_export import ROOT, run_script
from tests.reference import google_models
from tests.squad.conftest import training_copy

SAMPLE = FIXTURES / "squad" / "allennlp_squad_v1.1_sample.json"
ADVICE = "the next run writes it again"


def _env():
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


def _hold_and_damage(command, tmp_path, n, record, k):
  """Runs ``command`` to the n-th ``records_read``, damages record ``k`` of ``record`` there,
  lets it go on; returns (its stderr, its last line, the damage as the messages name it)."""
  ready = tmp_path / f"ready-{n}"
  process = hook.start_at_point(command, _env(), "records_read", n, ready, action="hold",
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
  offset = hook.flip_in_record(record, k)
  ready.unlink()
  _, stderr = process.communicate(timeout=600)
  assert process.returncode == 1, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  damage = (f"{record}: damaged TFRecord at byte {offset} (record {k}): the data's CRC-32C "
            "does not match (a changed byte)")
  return stderr, stderr.strip().splitlines()[-1], damage


def test_damaged_feature_files_are_one_line_and_the_next_run_writes_them_again(
    tmp_path, uncased_vocab):
  config = tmp_path / "bert_config.json"
  config.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522,
                                                              max_position_embeddings=64)))
  train = training_copy(SAMPLE, tmp_path / "train.json")
  out = tmp_path / "out"
  command = [sys.executable, "run_squad.py", f"--vocab_file={uncased_vocab}",
             f"--bert_config_file={config}", f"--output_dir={out}", "--do_train=True",
             f"--train_file={train}", "--do_predict=True", f"--predict_file={SAMPLE}",
             "--max_seq_length=48", "--doc_stride=16", "--max_query_length=12",
             "--train_batch_size=2", "--predict_batch_size=4", "--num_train_epochs=1",
             "--learning_rate=1e-3", "--steps_per_loop=1", "--save_checkpoints_steps=1",
             "--seed=1", "--export_google_checkpoint=False"]
  # 1. train.tf_record, damaged before training reads it.
  _, line, damage = _hold_and_damage(command, tmp_path, 1, out / "train.tf_record", 2)
  assert line == f"run_squad.py: error: {damage}; {ADVICE}"
  assert not list(out.glob("ckpt-*"))
  # 2. The same command: the damaged cache is named and written again, training goes
  # through; eval.tf_record (the features to predict, the 2nd file read) is damaged before
  # prediction reads it.
  stderr, line, predict_damage = _hold_and_damage(command, tmp_path, 2,
                                                  out / "eval.tf_record", 1)
  assert f"{damage}: writing it again" in stderr
  assert line == f"run_squad.py: error: {predict_damage}; {ADVICE}"
  assert list(out.glob("ckpt-*.index"))
  assert not (out / "predictions.json").exists()
  # 3. The same command again: trained already, predicts from a new eval.tf_record.
  result = run_script(*command[1:])
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  predictions = json.loads((out / "predictions.json").read_text())
  questions = [qa["id"] for article in json.loads(SAMPLE.read_text())["data"]
               for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
  assert sorted(predictions) == sorted(questions)
