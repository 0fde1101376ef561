"""Exported SavedModels on the inputs users get wrong (issue 17), loaded from disk.

- The question answerer on a batch of 0 pairs, and on a batch whose every context is empty
  (no doc span at all): before, ``Input to reshape is a tensor with ... values``; now empty
  [0] outputs, and for empty contexts what the Python pipeline
  (``postprocess.answer_from_logits``, checked against Google's write_predictions in
  tests/squad) answers: "empty" (v1.1) / "" (v2.0), score 0, offsets -1.
- Inputs of different batch sizes: before, ``serve_text_pair`` silently paired one text_a
  with every text_b, and the ids / question-context signatures failed with raw shape errors;
  now each raises InvalidArgumentError naming both inputs and both sizes.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import export
from bert_tf.modeling import BertConfig, BertSpanLabeler
from bert_tf.squad import examples as squad_examples
from bert_tf.squad import export as squad_export
from bert_tf.squad import postprocess
from tests.export.test_export import LABELS, SEQ_LENGTH, _tiny_classifier
from tests.reference import google_models

QA_OPTIONS = {"max_seq_length": 48, "doc_stride": 16, "max_query_length": 12}


@pytest.fixture(scope="module")
def answerers(tmp_path_factory, uncased_vocab):
  """{"v1": loaded v1.1 QA SavedModel, "v2": loaded v2.0 one} of one tiny random model."""
  tmp = tmp_path_factory.mktemp("qa")
  keras.utils.set_random_seed(3)
  model = BertSpanLabeler(BertConfig.from_dict(google_models.tiny_config_dict(
      vocab_size=30522, max_position_embeddings=64)))
  loaded = {}
  for name, v2 in (("v1", False), ("v2", True)):
    path = squad_export.export_question_answerer(model, str(uncased_vocab), str(tmp / name),
                                                 version_2_with_negative=v2, **QA_OPTIONS)
    loaded[name] = tf.saved_model.load(path)
  return loaded


def _numpy(outputs):
  return {name: value.numpy() for name, value in outputs.items()}


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_qa_batch_of_zero_pairs(answerers, version):
  empty = tf.constant([], tf.string)
  for serve in (answerers[version], answerers[version].signatures["serving_default"]):
    got = _numpy(serve(question=empty, context=empty))
    assert sorted(got) == ["answer_end", "answer_start", "answer_text", "score"]
    for name, dtype in (("answer_text", object), ("score", np.float64),
                        ("answer_start", np.int64), ("answer_end", np.int64)):
      assert got[name].shape == (0,) and got[name].dtype == dtype, (name, got[name])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_qa_every_context_empty(answerers, version):
  questions = ["Who?", "", "What is it?"]
  contexts = ["", " \t\n", "\u200b"]  # Empty, blank, a format character: no word piece.
  got = _numpy(answerers[version](tf.constant(questions), tf.constant(contexts)))
  v2 = version == "v2"
  for i, (question, context) in enumerate(zip(questions, contexts)):
    example = squad_examples.example_from_text(question, context)
    text, score = postprocess.answer_from_logits(
        example, [], np.zeros([0, 48]), np.zeros([0, 48]), version_2_with_negative=v2)
    assert (text, score) == ("" if v2 else "empty", 0.0)
    assert (got["answer_text"][i].decode(), got["score"][i], got["answer_start"][i],
            got["answer_end"][i]) == (text, score, -1, -1), i


def _invalid_argument(call):
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    call()
  return error.value.message


def test_qa_question_and_context_of_different_batch_sizes(answerers):
  message = _invalid_argument(lambda: answerers["v1"](tf.constant(["Who?"]),
                                                      tf.constant(["Bob ran.", "Al sat."])))
  assert ("question_answerer: context has batch size 2 but question has batch size 1 "
          "(one row per example in each)") in message


def test_classifier_signatures_refuse_different_batch_sizes(tmp_path):
  vocab, model, preprocessor = _tiny_classifier(tmp_path, len(LABELS))
  path = export.export_classifier(model, str(tmp_path / "classifier"), vocab_file=vocab,
                                  max_seq_length=SEQ_LENGTH, labels=LABELS)
  loaded = tf.saved_model.load(path)
  pair = loaded.signatures["serve_text_pair"]
  one, three = tf.constant(["the cat"]), tf.constant(["a dog", "the mat", "hello"])
  for text_a, text_b, sizes in ((one, three, (3, 1)), (three, one, (1, 3))):
    message = _invalid_argument(lambda a=text_a, b=text_b: pair(text_a=a, text_b=b))
    assert (f"BertPreprocessor: text_b has batch size {sizes[0]} but text_a has batch size "
            f"{sizes[1]} (one row per example in each)") in message
  # Equal sizes still give the Keras model's logits, row by row.
  expected = model(preprocessor((three, three[::-1])), training=False).numpy()
  np.testing.assert_allclose(pair(text_a=three, text_b=three[::-1])["logits"], expected,
                             atol=1e-5)

  ids = {k: v.numpy() for k, v in preprocessor(three).items()}                 # [3, S]
  serve_ids = loaded.signatures["serve_ids"]
  for name, value, want in (("input_mask", ids["input_mask"][:2], f"[2 {SEQ_LENGTH}]"),
                            ("input_type_ids", ids["input_type_ids"][:, :5], "[3 5]")):
    bad = dict(ids, **{name: value})
    message = _invalid_argument(lambda b=bad: serve_ids(**{k: tf.constant(v)
                                                          for k, v in b.items()}))
    assert (f"serve_ids: {name} has shape {want} but input_word_ids has shape "
            f"[3 {SEQ_LENGTH}] (one row per example in each)") in message, message
