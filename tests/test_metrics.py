"""bert_tf.metrics against hand-computed cases and scikit-learn's and scipy's numbers on seeded
random data (tests/fixtures/metrics, made by tests/fixtures/make_metrics_reference.py)."""

import json
import math
import pathlib

import numpy as np
import pytest

from bert_tf import metrics


# === Hand-computed cases ===

# labels, predictions: TP=3 (idx 0,2,6), FN=1 (idx 4), FP=2 (idx 1,5), TN=2 (idx 3,7).
LABELS = [1, 0, 1, 0, 1, 0, 1, 0]
PREDICTIONS = [1, 1, 1, 0, 0, 1, 1, 0]


def test_accuracy_by_hand():
  assert metrics.accuracy(LABELS, PREDICTIONS) == 5 / 8
  assert metrics.accuracy([2, 1, 0], [2, 1, 1]) == 2 / 3
  # Weight 0 (padding) rows are left out: 4 real rows, 3 right.
  assert metrics.accuracy([1, 0, 1, 1, 0, 0], [1, 0, 0, 1, 1, 1], [1, 1, 1, 1, 0, 0]) == 0.75
  assert math.isnan(metrics.accuracy([1], [1], [0]))


def test_f1_by_hand():
  # precision 3/5, recall 3/4 -> F1 = 2 * 0.6 * 0.75 / 1.35 = 2/3 = 2TP / (2TP + FP + FN) = 6/9.
  assert metrics.f1_score(LABELS, PREDICTIONS) == pytest.approx(2 / 3)
  assert metrics.f1_score([0, 0, 0], [0, 0, 0]) == 0.0  # No positives at all.
  assert metrics.f1_score([1, 1], [0, 0]) == 0.0
  assert metrics.f1_score([1, 0, 1], [1, 0, 1]) == 1.0


def test_mcc_by_hand():
  # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (6 - 2) / sqrt(5 * 4 * 4 * 3).
  assert metrics.matthews_corrcoef(LABELS, PREDICTIONS) == pytest.approx(4 / math.sqrt(240))
  assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
  assert metrics.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
  # CoLA early in training: one class predicted everywhere -> undefined, reported as 0.
  assert metrics.matthews_corrcoef([1, 0, 1, 1], [1, 1, 1, 1]) == 0.0
  # Three classes, hand-computed with the Gorodkin form: c=3, s=5, t=(2,2,1), p=(2,1,2):
  # (3*5 - (4+2+2)) / sqrt((25 - 9)(25 - 9)) = 7 / 16.
  assert metrics.matthews_corrcoef([0, 0, 1, 1, 2], [0, 2, 1, 0, 2]) == pytest.approx(7 / 16)


def test_pearson_and_spearman_by_hand():
  x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 9.0]
  # Means 2.5 and 5; deviations (-1.5,-.5,.5,1.5), (-3,-1,0,4): sum xy = 4.5+.5+0+6 = 11,
  # sum xx = 5, sum yy = 26 -> r = 11 / sqrt(130).
  assert metrics.pearson_corrcoef(x, y) == pytest.approx(11 / math.sqrt(130))
  assert metrics.spearman_corrcoef(x, y) == 1.0  # Monotonic.
  assert metrics.pearson_corrcoef(x, [-v for v in y]) == pytest.approx(-11 / math.sqrt(130))
  assert math.isnan(metrics.pearson_corrcoef(x, [3.0] * 4))
  # Ties: labels (1,2,2,3) rank (1, 2.5, 2.5, 4); predictions (10,30,20,40) rank (1,3,2,4).
  # Pearson of the ranks: deviations (-1.5,0,0,1.5) and (-1.5,.5,-.5,1.5): 4.5 / sqrt(4.5*5).
  assert metrics.spearman_corrcoef([1, 2, 2, 3], [10, 30, 20, 40]) == pytest.approx(
      4.5 / math.sqrt(4.5 * 5))
  assert metrics.rankdata([3, 1, 4, 1, 5, 9, 2, 6, 5]).tolist() == [
      4, 1.5, 5, 1.5, 6.5, 9, 3, 8, 6.5]


def test_weights_must_be_zero_or_one():
  with pytest.raises(ValueError, match="0 or 1"):
    metrics.accuracy([1, 0], [1, 0], [0.5, 1])
  with pytest.raises(ValueError, match="differ"):
    metrics.accuracy([1, 0], [1, 0, 1])


def test_task_metrics_selects_from_task_table():
  assert dict(metrics.task_metrics("MRPC", LABELS, PREDICTIONS)) == pytest.approx(
      {"eval_accuracy": 5 / 8, "eval_f1": 2 / 3})
  assert list(metrics.task_metrics("qqp", LABELS, PREDICTIONS)) == ["eval_accuracy", "eval_f1"]
  cola = metrics.task_metrics("cola", LABELS, PREDICTIONS)
  assert dict(cola) == pytest.approx({"eval_accuracy": 5 / 8, "eval_mcc": 4 / math.sqrt(240)})
  # Logits: argmax taken; is_real_example weights drop the padding row.
  logits = np.array([[0.1, 0.9, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 5.0, 0.0]])
  assert dict(metrics.task_metrics("mnli", [1, 0, 1, 2], logits, weights=[1, 1, 1, 0],
                                   prefix="eval_mm_")) == {"eval_mm_accuracy": 2 / 3}
  stsb = metrics.task_metrics("sts-b", [1.0, 2.0, 3.0, 4.0], np.array([[2.], [4.], [5.], [9.]]))
  assert dict(stsb) == pytest.approx({"eval_pearson": 11 / math.sqrt(130), "eval_spearman": 1.0})
  for name in ("sst-2", "qnli", "rte", "wnli", "xnli", "ax"):
    assert list(metrics.task_metrics(name, [0, 1], [0, 1])) == ["eval_accuracy"]


# === Against scikit-learn / scipy on seeded random data ===
# Their numbers, with the inputs, made by tests/fixtures/make_metrics_reference.py (neither is
# installed for the tests: with scikit-learn present, every process importing Keras imports it).

with open(pathlib.Path(__file__).parent / "fixtures" / "metrics" / "reference.json",
          encoding="utf-8") as _f:
  REFERENCE = json.load(_f)


@pytest.mark.parametrize("case", REFERENCE["sklearn"], ids=lambda case: f"seed{case['seed']}")
def test_against_sklearn(case):
  labels, predictions = np.array(case["labels"]), np.array(case["predictions"])
  weights = np.array(case["weights"])
  assert 0 < weights.sum() < len(weights)  # some rows left out
  assert metrics.accuracy(labels, predictions, weights) == pytest.approx(case["accuracy"])
  assert metrics.f1_score(labels, predictions, weights) == pytest.approx(case["f1"])
  assert metrics.matthews_corrcoef(labels, predictions, weights) == pytest.approx(case["mcc"])
  assert metrics.matthews_corrcoef(np.array(case["three"]), np.array(
      case["three_predictions"])) == pytest.approx(case["three_mcc"])


@pytest.mark.parametrize("case", REFERENCE["scipy"], ids=lambda case: f"seed{case['seed']}")
def test_against_scipy(case):
  labels = np.array(case["labels"])
  predictions = np.array(case["predictions"], np.float32)
  assert metrics.pearson_corrcoef(labels, predictions) == pytest.approx(
      case["pearson"], abs=1e-6)
  assert metrics.spearman_corrcoef(labels, predictions) == pytest.approx(
      case["spearman"], abs=1e-12)
  np.testing.assert_array_equal(metrics.rankdata(predictions), case["ranks"])
