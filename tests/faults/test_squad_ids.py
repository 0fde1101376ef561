"""SQuAD files with duplicate question ids (issue 27, item 8): predictions.json keeps one
answer per id, so a second question with the same id silently lost its prediction. Now
reading a file to predict stops at the second one with a line naming the file and both
places."""

import json

import pytest

from bert_tf.errors import BertTfError
from bert_tf.squad import examples
from tests.faults.support_export import digests, error_line, run_script
from tests.faults.test_export_dir import config_file  # noqa: F401


def _squad_file(path, ids):
  qas = [{"id": qa_id, "question": f"Who ran {i}?", "answers": [{"text": "Bob", "answer_start": 0}]}
         for i, qa_id in enumerate(ids)]
  path.write_text(json.dumps({"data": [{"paragraphs": [
      {"context": "Bob ran.", "qas": qas[:2]}, {"context": "Bob ran far.", "qas": qas[2:]}]}]}))
  return path


def test_duplicate_ids_in_a_file_to_predict_are_one_line(tmp_path):
  path = _squad_file(tmp_path / "dev.json", ["a", "b", "a"])
  with pytest.raises(BertTfError) as error:
    examples.read_squad_examples(str(path), is_training=False)
  assert str(error.value) == (
      f"{path}: data[0].paragraphs[1].qas[0] has id 'a', as data[0].paragraphs[0].qas[0] has: "
      "question ids must be unique (predictions.json keeps one answer per id)")
  # 1 and "1" are the same key of predictions.json.
  with pytest.raises(BertTfError, match=r"qas\[1\] has id '1', as .*qas\[0\] has"):
    examples.read_squad_examples(str(_squad_file(tmp_path / "ints.json", [1, "1"])), False)
  assert len(examples.read_squad_examples(str(_squad_file(tmp_path / "ok.json", ["a", "b", "c"])),
                                          False).examples) == 3
  # Training reads every question, whatever its id (nothing is keyed by it).
  assert len(examples.read_squad_examples(str(path), is_training=True).examples) == 3


def test_run_squad_predict_on_duplicate_ids_exits_with_one_line(tmp_path, config_file,  # noqa: F811
                                                                uncased_vocab):
  path = _squad_file(tmp_path / "dev.json", ["q1", "q1"])
  out = tmp_path / "out"
  result = run_script("run_squad.py", f"--vocab_file={uncased_vocab}",
                      f"--bert_config_file={config_file}", f"--output_dir={out}",
                      "--do_predict=True", f"--predict_file={path}", "--max_seq_length=48",
                      "--doc_stride=16", "--max_query_length=12")
  assert error_line(result) == (
      f"run_squad.py: error: {path}: data[0].paragraphs[0].qas[1] has id 'q1', as "
      "data[0].paragraphs[0].qas[0] has: question ids must be unique (predictions.json keeps "
      "one answer per id)")
  assert not [name for name in digests(out) if name.startswith("predictions")]
