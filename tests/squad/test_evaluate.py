"""The SQuAD evaluation against the official v1.1 script and hand-computed v1.1 / v2.0 cases."""

import importlib.util
import json

import pytest

from bert_tf.errors import BertTfError
from bert_tf.squad import evaluate
from tests.squad.conftest import SQUAD_FIXTURES, V1_SAMPLE


@pytest.fixture(scope="module")
def official_v1():
  """The official evaluate-v1.1.py, as shipped in allennlp 0.9.0 (see the fixtures README)."""
  spec = importlib.util.spec_from_file_location(
      "official_evaluate_v1_1", SQUAD_FIXTURES / "official_evaluate_v1_1.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


NORMALIZE_CASES = [
    ("The  Quick, Brown-Fox!", "quick brownfox"),  # "-" is punctuation: removed, not a space.
    ("an apple a day", "apple day"),
    ("theater and anthem", "theater and anthem"),  # Articles only as whole words.
    ("A.B.C.", "abc"),
    ("  Denver\tBroncos \n", "denver broncos"),
    ("«Über» — the end", "«über» — end"),  # Only ASCII punctuation is removed.
    # An article between non-ASCII punctuation becomes a space: "—an—" splits the words
    # (mutation audit round 3: articles deleted without a space went unnoticed).
    ("«The»—an—end", "« »— —end"),
    ("", ""),
]


@pytest.mark.parametrize("text, expected", NORMALIZE_CASES)
def test_normalize_answer(text, expected):
  assert evaluate.normalize_answer(text) == expected


def test_normalize_answer_matches_official_script(official_v1):
  for text, _ in NORMALIZE_CASES:
    assert evaluate.normalize_answer(text) == official_v1.normalize_answer(text), text


@pytest.mark.parametrize("gold, pred, f1", [
    # P = R = 3/4.
    ("the cat sat on the mat", "cat on mat quickly", 0.75),
    # P = 1, R = 1/4: 2 * 0.25 / 1.25.
    ("the cat sat on the mat", "sat", 0.4),
    # Multiset overlap: two "x" in common, P = R = 2/3.
    ("x x y", "x x x", 2 / 3),
    ("Denver Broncos", "the denver broncos.", 1.0),
    ("Denver Broncos", "Carolina Panthers", 0.0),
])
def test_token_f1_by_hand(gold, pred, f1):
  assert evaluate.compute_f1(gold, pred) == pytest.approx(f1, abs=1e-15)
  assert evaluate.f1_score_v1(pred, gold) == pytest.approx(f1, abs=1e-15)


def test_empty_answers_differ_between_v1_and_v2():
  # v2.0: "no answer" agrees with "no answer"; v1.1 has no such case and scores 0.
  assert evaluate.compute_f1("", "") == 1
  assert evaluate.compute_f1("the", "") == 1  # Normalises to nothing as well.
  assert evaluate.compute_f1("Paris", "") == 0
  assert evaluate.f1_score_v1("", "") == 0
  assert evaluate.compute_exact("The Paris!", "paris") == 1


def _dataset(questions):
  """{"data": ...} with one paragraph holding (id, [gold texts]) questions."""
  return [{"title": "t", "paragraphs": [{"context": "unused", "qas": [
      {"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
      for qid, golds in questions]}]}]


def test_v1_by_hand():
  dataset = _dataset([("a", ["Denver Broncos", "Broncos"]), ("b", ["October 1990"]),
                      ("c", ["Paris"]), ("d", ["Rome"])])
  predictions = {"a": "the Broncos", "b": "1990", "c": "Lyon"}  # "d" unanswered: scores 0.
  scores = evaluate.evaluate_v1(dataset, predictions)
  # EM: a matches "Broncos". F1: a 1, b 2/3 (P = 1, R = 1/2), c 0, d 0.
  assert scores == {"exact_match": 25.0, "f1": pytest.approx(100 * (5 / 3) / 4)}


def _predictions_for(dataset, mode):
  predictions = {}
  for article in dataset:
    for paragraph in article["paragraphs"]:
      context = paragraph["context"]
      for n, qa in enumerate(paragraph["qas"]):
        gold = qa["answers"][-1]
        start = gold["answer_start"]
        if mode == "gold":
          predictions[qa["id"]] = gold["text"]
        elif mode == "wider":
          predictions[qa["id"]] = context[max(0, start - 12):start + len(gold["text"]) + 9]
        elif mode == "partial":
          predictions[qa["id"]] = gold["text"][:len(gold["text"]) // 2]
        elif mode == "mixed" and n % 2 == 0:
          predictions[qa["id"]] = context[start + len(gold["text"]):][:30]
  return predictions


@pytest.mark.parametrize("mode", ["gold", "wider", "partial", "mixed"])
def test_v1_matches_official_script_on_real_sample(official_v1, mode):
  dataset = json.loads(V1_SAMPLE.read_text())["data"]
  predictions = _predictions_for(dataset, mode)
  expected = official_v1.evaluate(dataset, predictions)
  assert evaluate.evaluate_v1(dataset, predictions) == expected
  if mode == "gold":
    assert expected == {"exact_match": 100.0, "f1": 100.0}


# The v2.0 hand case: (id, gold answers, prediction, null odds).
V2_CASE = [
    ("q1", ["Denver Broncos", "The Denver Broncos"], "denver broncos!", 0.2),  # EM 1, F1 1
    ("q2", ["October 1990"], "1990", 0.6),  # EM 0, F1 2/3
    ("q3", [], "", 0.9),  # unanswerable, abstains: EM 1, F1 1
    ("q4", [], "foo", 0.7),  # unanswerable, answers: EM 0, F1 0
    ("q5", ["Paris"], "", 0.95),  # answerable, abstains: EM 0, F1 0
]


def _v2_inputs():
  dataset = _dataset([(qid, golds) for qid, golds, _, _ in V2_CASE])
  preds = {qid: pred for qid, _, pred, _ in V2_CASE}
  na_probs = {qid: na for qid, _, _, na in V2_CASE}
  return dataset, preds, na_probs


def test_v2_by_hand_default_threshold():
  dataset, preds, na_probs = _v2_inputs()
  scores = evaluate.evaluate_v2(dataset, preds, na_probs)
  # No null odds above 1.0, so the raw scores count.
  assert scores["exact"] == pytest.approx(40.0)
  assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 5)
  assert scores["HasAns_exact"] == pytest.approx(100 / 3)
  assert scores["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
  assert (scores["NoAns_exact"], scores["NoAns_f1"]) == (50.0, 50.0)
  assert (scores["total"], scores["HasAns_total"], scores["NoAns_total"]) == (5, 3, 2)
  # Sweep in order of null odds q1 .2, q2 .6, q4 .7, q3 .9, q5 .95, starting from the 2
  # unanswerable questions. EM: 2 +1 (q1) = 3 best at 0.2, then +0, -1, 0, +0.
  # F1: 3 at 0.2, +2/3 (q2) = 11/3 best at 0.6, then -1 (q4), 0, 0.
  assert scores["best_exact"] == pytest.approx(100 * 3 / 5)
  assert scores["best_exact_thresh"] == 0.2
  assert scores["best_f1"] == pytest.approx(100 * (11 / 3) / 5)
  assert scores["best_f1_thresh"] == 0.6
  assert list(scores) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                          "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                          "best_exact_thresh", "best_f1", "best_f1_thresh"]


def test_v2_by_hand_threshold_half():
  dataset, preds, na_probs = _v2_inputs()
  scores = evaluate.evaluate_v2(dataset, preds, na_probs, na_prob_thresh=0.5)
  # Null odds above 0.5 (q2, q4, q3, q5) turn into "no answer": right iff unanswerable.
  # Scores: q1 1, q2 0, q3 1, q4 1, q5 0, for EM and F1 alike.
  assert (scores["exact"], scores["f1"]) == (60.0, 60.0)
  assert scores["HasAns_exact"] == scores["HasAns_f1"] == pytest.approx(100 / 3)
  assert (scores["NoAns_exact"], scores["NoAns_f1"]) == (100.0, 100.0)


def test_v2_by_hand_threshold_equal_to_a_null_odds():
  """The official rule is na_prob > na_prob_thresh: q2's null odds 0.6 at a threshold of 0.6
  keep its answer (mutation audit round 3: >= went unnoticed, no null odds equalled the
  thresholds tried)."""
  dataset, preds, na_probs = _v2_inputs()
  scores = evaluate.evaluate_v2(dataset, preds, na_probs, na_prob_thresh=0.6)
  # q1 (0.2) and q2 (0.6) keep their raw scores, EM 1, 0 and F1 1, 2/3; q3, q4 (unanswerable)
  # turn into right "no answer"s, q5 (answerable) a wrong one.
  assert scores["exact"] == pytest.approx(100 * 3 / 5)
  assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 1) / 5)
  assert scores["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)


def test_v2_gold_answers_that_normalise_to_nothing_are_dropped():
  """The official v2.0 get_raw_scores keeps only gold answers that normalise to something:
  gold "The" beside "Paris" does not make "" right; with "the" alone the gold is "" (but the
  question still counts as answerable: it has an answer). Mutation audit round 3: keeping
  every gold answer went unnoticed."""
  dataset = _dataset([("g1", ["The", "Paris"]), ("g2", ["the"])])
  preds = {"g1": "", "g2": ""}
  exact, f1 = evaluate.get_raw_scores(dataset, preds)
  assert (exact, f1) == ({"g1": 0, "g2": 1}, {"g1": 0, "g2": 1})
  scores = evaluate.evaluate_v2(dataset, preds)
  assert (scores["exact"], scores["f1"], scores["HasAns_total"]) == (50.0, 50.0, 2)


def test_v2_best_threshold_an_abstaining_unanswerable_question_costs_nothing():
  """find_best_thresh as the official v2.0 script: letting an unanswerable question answer
  costs 1 only if its prediction is not empty (mutation audit round 3: always -1 went
  unnoticed; in V2_CASE the abstaining q3 comes after the best threshold)."""
  dataset = _dataset([("n1", []), ("a1", ["Paris"]), ("n2", [])])
  preds = {"n1": "", "a1": "Paris", "n2": "Lyon"}
  na_probs = {"n1": 0.1, "a1": 0.3, "n2": 0.5}
  scores = evaluate.evaluate_v2(dataset, preds, na_probs)
  # Start from all "no answer": 2 right. n1 answers "": still 2; a1 answers right: 3, the
  # best, at 0.3; n2 answers "Lyon": 2.
  assert (scores["best_exact"], scores["best_exact_thresh"]) == (100.0, 0.3)
  assert (scores["best_f1"], scores["best_f1_thresh"]) == (100.0, 0.3)
  assert scores["exact"] == pytest.approx(100 * 2 / 3)


def test_v2_without_null_odds_and_with_missing_predictions():
  dataset, preds, _ = _v2_inputs()
  del preds["q2"]
  scores = evaluate.evaluate_v2(dataset, preds)
  # q2 is left out (as the official v2.0 script does for the overall score).
  assert dict(scores) == {"exact": 50.0, "f1": 50.0, "total": 4,
                          "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
                          "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}


def test_evaluate_files_and_write_scores(tmp_path):
  dataset, preds, na_probs = _v2_inputs()
  (tmp_path / "dev.json").write_text(json.dumps({"version": "v2.0", "data": dataset}))
  (tmp_path / "predictions.json").write_text(json.dumps(preds))
  (tmp_path / "null_odds.json").write_text(json.dumps(na_probs))
  scores = evaluate.evaluate_files(str(tmp_path / "dev.json"),
                                   str(tmp_path / "predictions.json"),
                                   str(tmp_path / "null_odds.json"),
                                   version_2_with_negative=True)
  assert scores == evaluate.evaluate_v2(dataset, preds, na_probs)
  out = tmp_path / "out" / "eval_results.json"
  evaluate.write_scores(str(out), scores)
  assert json.loads(out.read_text()) == scores
  assert [p.name for p in out.parent.iterdir()] == ["eval_results.json"]
  v1 = evaluate.evaluate_files(str(V1_SAMPLE), str(tmp_path / "predictions.json"))
  assert v1 == {"exact_match": 0.0, "f1": 0.0}  # None of the sample's ids was predicted.


def test_evaluation_errors_are_one_line(tmp_path):
  dataset, preds, na_probs = _v2_inputs()
  data_file = tmp_path / "dev.json"
  data_file.write_text(json.dumps({"version": "v2.0", "data": dataset}))
  pred_file = tmp_path / "predictions.json"
  pred_file.write_text(json.dumps(preds))
  odds_file = tmp_path / "null_odds.json"
  del na_probs["q4"]
  odds_file.write_text(json.dumps(na_probs))
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file), str(odds_file), True)
  assert str(e.value) == f"{odds_file}: no null odds for question 'q4' (1 missing)"
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file))  # v2.0 data, v1.1 evaluation.
  assert str(e.value) == (f"{data_file}: question 'q3' has no gold answer; SQuAD 2.0 data "
                          "needs the v2.0 evaluation (--version_2_with_negative)")
  pred_file.write_text(json.dumps(["not", "a", "dict"]))
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file), None, True)
  assert str(e.value) == f"{pred_file}: expected a JSON object {{qas_id: ...}}, got a list"
  pred_file.write_text('{"q1": "x",')
  with pytest.raises(BertTfError, match=r"predictions.json: not valid JSON: .* line 1"):
    evaluate.evaluate_files(str(data_file), str(pred_file), None, True)
  pred_file.write_text(json.dumps({"other": "x"}))
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file), None, True)
  assert str(e.value) == f"{data_file}: no prediction for any of its 5 questions"
  # A prediction that is not a text, null odds that are not numbers (were AttributeError and
  # TypeError tracebacks, as in the official scripts).
  pred_file.write_text(json.dumps(dict(preds, q2=5)))
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file), None, True)
  assert str(e.value) == f"{pred_file}: the value of 'q2' is 5, expected the answer text"
  pred_file.write_text(json.dumps(preds))
  odds_file.write_text(json.dumps(dict(na_probs, q4="0.5")))
  with pytest.raises(BertTfError) as e:
    evaluate.evaluate_files(str(data_file), str(pred_file), str(odds_file), True)
  assert str(e.value) == (f"{odds_file}: the value of 'q4' is \"0.5\", expected a number (the "
                          "null odds)")
