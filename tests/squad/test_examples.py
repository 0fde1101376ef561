"""Reading SQuAD JSON: identical to the original read_squad_examples; bad input is reported."""

import dataclasses
import json

import pytest

from bert_tf.errors import BertTfError
from bert_tf.squad import examples as squad_examples
from tests.squad.conftest import V1_SAMPLE, V2_HANDMADE, original_flags, training_copy

EXAMPLE_FIELDS = [f.name for f in dataclasses.fields(squad_examples.SquadExample)]


def _as_tuples(examples):
  return [tuple(getattr(e, name) for name in EXAMPLE_FIELDS) for e in examples]


def _original_examples(run_squad, path, is_training, version_2_with_negative):
  with original_flags(version_2_with_negative=version_2_with_negative):
    return run_squad.read_squad_examples(str(path), is_training=is_training)


@pytest.mark.parametrize("is_training", [False, True])
def test_real_v1_sample_matches_original(run_squad, tmp_path, is_training):
  path = training_copy(V1_SAMPLE, tmp_path / "train.json") if is_training else V1_SAMPLE
  ours, skipped = squad_examples.read_squad_examples(str(path), is_training)
  expected = _original_examples(run_squad, path, is_training, False)
  assert len(ours) == 5 and skipped == []
  assert _as_tuples(ours) == _as_tuples(expected)


@pytest.mark.parametrize("is_training", [False, True])
def test_handmade_v2_matches_original(run_squad, is_training):
  ours, skipped = squad_examples.read_squad_examples(str(V2_HANDMADE), is_training,
                                                     version_2_with_negative=True)
  expected = _original_examples(run_squad, V2_HANDMADE, is_training, True)
  assert _as_tuples(ours) == _as_tuples(expected)
  assert skipped == []
  if is_training:
    impossible = {e.qas_id for e in ours if e.is_impossible}
    assert impossible == {"h04", "h05", "h10", "u03", "u08", "u13"}
    assert all((e.start_position, e.end_position, e.orig_answer_text) == (-1, -1, "")
               for e in ours if e.is_impossible)


def test_whitespace_split_is_the_originals():
  # Only space, \t, \r, \n and U+202F separate words; U+00A0 and U+3000 do not.
  doc_tokens, offsets = squad_examples.split_on_whitespace(" a\u00a0b\u202fc\td  e\u3000f")
  assert doc_tokens == ["a\u00a0b", "c", "d", "e\u3000f"]
  assert offsets == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3]


def _write(tmp_path, squad, name="bad.json"):
  path = tmp_path / name
  path.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
  return str(path)


def _one_question(context, answer_text, answer_start, qid="q1"):
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
      "context": context,
      "qas": [{"id": qid, "question": "What?",
               "answers": [{"text": answer_text, "answer_start": answer_start}]}]}]}]}


def test_wrong_answer_offset_is_skipped_and_counted_like_the_original(run_squad, tmp_path):
  squad = json.loads(V1_SAMPLE.read_text())
  for article in squad["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qa["answers"] = qa["answers"][:1]
  # Two answers moved off their text: the original logs "Could not find answer" and skips.
  squad["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 40
  squad["data"][0]["paragraphs"][1]["qas"][2]["answers"][0]["answer_start"] -= 25
  path = _write(tmp_path, squad)
  ours, skipped = squad_examples.read_squad_examples(path, is_training=True)
  expected = _original_examples(run_squad, path, True, False)
  assert len(ours) == 3 and _as_tuples(ours) == _as_tuples(expected)
  wrong = [squad["data"][0]["paragraphs"][0]["qas"][0]["id"],
           squad["data"][0]["paragraphs"][1]["qas"][2]["id"]]
  assert [s.qas_id for s in skipped] == wrong
  assert "vs." in skipped[0].reason
  # Prediction ignores answers, so nothing is skipped there.
  assert len(squad_examples.read_squad_examples(path, is_training=False).examples) == 5


def test_answer_ending_the_context_or_with_a_trailing_space_as_the_original(run_squad,
                                                                           tmp_path):
  """An answer's last character is answer_start + len(text) - 1: an answer that ends the
  context is kept, and one annotated with a trailing space ends at the word before that
  space, not the next word (mutation audit round 3: one character further went unnoticed,
  no fixture answer ends its context or has a trailing space)."""
  context = "The lighthouse opened in 1895. Paris is far away."
  squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "end", "question": "How far?",
       "answers": [{"text": "far away.", "answer_start": context.index("far")}]},
      {"id": "space", "question": "Where?",
       "answers": [{"text": "Paris ", "answer_start": context.index("Paris")}]},
  ]}]}]}
  path = _write(tmp_path, squad, "train.json")
  ours, skipped = squad_examples.read_squad_examples(path, is_training=True)
  assert skipped == []
  assert _as_tuples(ours) == _as_tuples(_original_examples(run_squad, path, True, False))
  # Words: The lighthouse opened in 1895. Paris is far away.
  assert [(e.start_position, e.end_position) for e in ours] == [(7, 8), (5, 5)]


@pytest.mark.parametrize("answer_start", [100, -3, 12])
def test_answer_offset_outside_context_is_skipped_not_a_crash(tmp_path, answer_start):
  # The original raises IndexError for offsets past the end (and misreads negative ones).
  path = _write(tmp_path, _one_question("A short context.", "context", answer_start))
  examples, skipped = squad_examples.read_squad_examples(path, is_training=True)
  assert examples == []
  assert len(skipped) == 1 and "outside the context" in skipped[0].reason


def test_invalid_json_names_the_file_and_line(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"data": [\n  {"paragraphs": [}\n]}')
  with pytest.raises(BertTfError) as e:
    squad_examples.read_squad_examples(str(path), is_training=False)
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith(f"{path}: not valid JSON") and "line 2" in message


def test_missing_file_is_a_one_line_error(tmp_path):
  with pytest.raises(BertTfError, match="SQuAD file not found"):
    squad_examples.read_squad_examples(str(tmp_path / "nope.json"), is_training=False)


@pytest.mark.parametrize("mutate, expected", [
    (lambda s: s.pop("data"), "the top level has no 'data'"),
    (lambda s: s["data"][0].pop("paragraphs"), "data[0] has no 'paragraphs'"),
    (lambda s: s["data"][0]["paragraphs"][0].pop("context"),
     "data[0].paragraphs[0] has no 'context'"),
    (lambda s: s["data"][0]["paragraphs"][0]["qas"][0].update(question=None),
     "data[0].paragraphs[0].qas[0].question is a NoneType, expected str"),
    (lambda s: s["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(
        answer_start="7"),
     "data[0].paragraphs[0].qas[0].answers[0].answer_start is a str, expected int"),
    (lambda s: s["data"][0]["paragraphs"][0]["qas"][0]["answers"].append(
        {"text": "A", "answer_start": 0}),
     "data[0].paragraphs[0].qas[0] (id 'q1') has 2 answers; for training each question "
     "must have exactly 1 answer"),
    # A SQuAD 2.0 question trained without the flag: the message says which flag.
    (lambda s: s["data"][0]["paragraphs"][0]["qas"][0].update(answers=[], is_impossible=True),
     "data[0].paragraphs[0].qas[0] (id 'q1') has 0 answers; for training each question "
     "must have exactly 1 answer; a SQuAD 2.0 file? pass --version_2_with_negative"),
])
def test_structurally_broken_file_names_file_and_json_path(tmp_path, mutate, expected):
  squad = _one_question("A short context.", "short", 2)
  mutate(squad)
  path = _write(tmp_path, squad)
  with pytest.raises(BertTfError) as e:
    squad_examples.read_squad_examples(path, is_training=True)
  assert str(e.value) == f"{path}: {expected}"


def test_is_impossible_must_be_true_or_false(tmp_path):
  """A string "false" was read as true (the original's bool(...)): an answerable question
  trained as unanswerable. Missing is false (a v1.1 file trains as v2.0)."""
  squad = _one_question("A short context.", "short", 2)
  qa = squad["data"][0]["paragraphs"][0]["qas"][0]
  path = _write(tmp_path, squad)
  assert not squad_examples.read_squad_examples(
      path, is_training=True, version_2_with_negative=True).examples[0].is_impossible
  qa["is_impossible"] = "false"
  path = _write(tmp_path, squad)
  with pytest.raises(BertTfError) as e:
    squad_examples.read_squad_examples(path, is_training=True, version_2_with_negative=True)
  assert str(e.value) == (f"{path}: data[0].paragraphs[0].qas[0].is_impossible is a str, "
                          "expected bool")
  qa["is_impossible"] = True
  path = _write(tmp_path, squad)
  assert squad_examples.read_squad_examples(
      path, is_training=True, version_2_with_negative=True).examples[0].is_impossible



  squad = {"data": [{"paragraphs": [{"context": "", "qas": [
      {"id": "e1", "question": "Anything?", "answers": [], "is_impossible": True},
      {"id": "e2", "question": "Something?", "answers": [{"text": "x", "answer_start": 0}]},
  ]}]}]}
  path = _write(tmp_path, squad)
  examples, skipped = squad_examples.read_squad_examples(path, is_training=True,
                                                         version_2_with_negative=True)
  assert [(e.qas_id, e.doc_tokens, e.is_impossible) for e in examples] == [("e1", [], True)]
  assert [s.qas_id for s in skipped] == ["e2"]
  examples, _ = squad_examples.read_squad_examples(path, is_training=False)
  assert [(e.qas_id, e.doc_tokens) for e in examples] == [("e1", []), ("e2", [])]


def test_example_from_text_splits_like_a_file():
  example = squad_examples.example_from_text("Who?", "  Robert  Stevenson\tbuilt it. ", "x")
  assert example == squad_examples.SquadExample(
      qas_id="x", question_text="Who?", doc_tokens=["Robert", "Stevenson", "built", "it."])
