"""bert_tf against Google's original modeling.py + run_pretraining.py heads (bert-tensorflow
1.0.4, TF1 graph mode): same checkpoint, same inputs, same numbers; checkpoints round-trip."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, BertPretrainer, pretraining_loss
from bert_tf.modeling import checkpoints
from tests.reference import google_models


@pytest.fixture(scope="module")
def original(tmp_path_factory):
  config = google_models.tiny_config_dict()
  features = google_models.random_pretraining_features(config)
  path = str(tmp_path_factory.mktemp("google") / "bert_model.ckpt")
  outputs = google_models.run_google_pretraining(config, features, save_path=path)
  return config, features, path, outputs


def _ours(config, features, path):
  model = BertPretrainer(BertConfig.from_dict(config))
  report = checkpoints.load_google_checkpoint(model, path)
  assert not report.missing and not report.unexpected
  inputs = {k: tf.constant(v) for k, v in features.items()}
  return model, model(inputs, training=False), model.bert(inputs, training=False)


def test_variable_names_are_googles(original):
  config, _, _, outputs = original
  model = BertPretrainer(BertConfig.from_dict(config))
  assert sorted(checkpoints.google_variable_map(model)) == outputs["variable_names"]


def test_encoder_and_heads_match_original(original):
  config, features, path, expected = original
  model, outputs, encoder = _ours(config, features, path)
  np.testing.assert_allclose(encoder["embedding_output"], expected["embedding_output"],
                             atol=1e-5)
  assert len(encoder["encoder_outputs"]) == len(expected["encoder_outputs"]) == 2
  for ours, theirs in zip(encoder["encoder_outputs"], expected["encoder_outputs"]):
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
  np.testing.assert_allclose(encoder["sequence_output"], expected["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(encoder["pooled_output"], expected["pooled_output"], atol=1e-5)
  log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy()
  np.testing.assert_allclose(log_probs.reshape(-1, config["vocab_size"]),
                             expected["masked_lm_log_probs"], atol=1e-5)
  np.testing.assert_allclose(tf.nn.log_softmax(outputs["next_sentence_logits"]),
                             expected["next_sentence_log_probs"], atol=1e-5)
  losses = pretraining_loss(outputs, features)
  np.testing.assert_allclose(losses["masked_lm_loss"], expected["masked_lm_loss"], rtol=1e-5)
  np.testing.assert_allclose(losses["next_sentence_loss"], expected["next_sentence_loss"],
                             rtol=1e-5)
  del model


def test_google_checkpoint_round_trips_bit_for_bit(original, tmp_path):
  config, features, path, _ = original
  model, _, _ = _ours(config, features, path)
  out = checkpoints.save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
  theirs = tf.train.load_checkpoint(path)
  ours = tf.train.load_checkpoint(out)
  assert ours.get_variable_to_shape_map() == theirs.get_variable_to_shape_map()
  for name in theirs.get_variable_to_shape_map():
    a, b = ours.get_tensor(name), theirs.get_tensor(name)
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
  # No temporary files are left behind.
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint"]


def test_google_code_reads_our_checkpoint(original, tmp_path):
  """A model written by bert_tf is restored by Google's own code and gives its numbers."""
  config, features, path, expected = original
  model, _, _ = _ours(config, features, path)
  out = checkpoints.save_google_checkpoint(model, str(tmp_path / "bert_model.ckpt"))
  again = google_models.run_google_pretraining(config, features, restore_path=out)
  np.testing.assert_array_equal(again["sequence_output"], expected["sequence_output"])
  np.testing.assert_array_equal(again["masked_lm_log_probs"], expected["masked_lm_log_probs"])


def _fixed_dropout(x, rate):
  """Dropout with a mask that is a function of the flat index alone (Knuth's multiplicative
  hash of it, kept where >= rate), the same in TF1 graph mode and eager: the one way both
  implementations can draw the same masks."""
  index = tf.range(tf.size(x, out_type=tf.int64), dtype=tf.int64)
  uniform = tf.cast((index * 2654435761) % 4294967296, tf.float64) / 4294967296.0
  keep = tf.reshape(tf.cast(uniform >= rate, x.dtype), tf.shape(x))
  return x * keep / (1.0 - rate)


def test_dropout_sits_where_the_originals_does(original, monkeypatch):
  """With dropout on (is_training=True) and both sides drawing the same masks (_fixed_dropout
  in place of the original's modeling.dropout and of bert_tf's Dropout layer): the same
  numbers as the original, so each dropout is applied to the same tensor at the same place
  (after the embeddings' LayerNorm, on the attention probabilities, on each dense output
  before its residual add and LayerNorm) with its own rate (attention_probs_dropout_prob
  differs from hidden_dropout_prob here). The inference comparison above has no dropout."""
  from bert_tf.modeling import layers
  from tests.reference.google_bert import google
  config_dict, features, path, inference = original
  config_dict = dict(config_dict, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.3)
  rates = []

  def original_dropout(x, rate):
    if rate is None or rate == 0.0:
      return x
    rates.append(rate)
    return _fixed_dropout(x, rate)

  monkeypatch.setattr(google("modeling"), "dropout", original_dropout)
  expected = google_models.run_google_pretraining(config_dict, features, restore_path=path,
                                                  is_training=True)
  # Per layer the probabilities' and two hidden dropouts, after the embeddings' one.
  assert sorted(rates) == sorted([0.1] + [0.3, 0.1, 0.1] * config_dict["num_hidden_layers"])

  def call(self, inputs, training=False):
    return _fixed_dropout(inputs, self.rate) if training and self.rate > 0 else inputs

  monkeypatch.setattr(layers.Dropout, "call", call)
  model = BertPretrainer(BertConfig.from_dict(config_dict))
  checkpoints.load_google_checkpoint(model, path)
  inputs = {k: tf.constant(v) for k, v in features.items()}
  encoder = model.bert(inputs, training=True)
  # Dropout changed the numbers: the comparison sees it.
  assert np.abs(expected["sequence_output"] - inference["sequence_output"]).max() > 1e-2
  np.testing.assert_allclose(encoder["embedding_output"], expected["embedding_output"],
                             atol=1e-5)
  for ours, theirs in zip(encoder["encoder_outputs"], expected["encoder_outputs"]):
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
  np.testing.assert_allclose(encoder["pooled_output"], expected["pooled_output"], atol=1e-5)
  outputs = model(inputs, training=True)
  np.testing.assert_allclose(
      tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy().reshape(-1, config_dict[
          "vocab_size"]), expected["masked_lm_log_probs"], atol=1e-5)


def test_the_pretraining_tasks_training_loss_is_the_originals(original):
  """The loss the training loop minimises (PretrainingTask's numerators over its denominators
  plus offsets, training.loop's definition) is run_pretraining's total_loss: the masked LM's
  sum(w * nll) / (sum(w) + 1e-5) plus the next sentence's mean nll. Checked on the fixture's
  batch, on one whose weights sum to 1e-3 (where the 1e-5 is 1% of the denominator) and on one
  without a weighted position (the original's masked LM loss is then 0, not 0 / 0)."""
  from bert_tf.training import loop
  from bert_tf.training.pretraining import PretrainingTask
  config, features, path, expected = original
  task = PretrainingTask(BertConfig.from_dict(config))
  model = task.build_model()
  checkpoints.load_google_checkpoint(model, path)
  small = np.zeros_like(features["masked_lm_weights"])
  small[1, 0] = 1e-3
  for weights in (None, small, np.zeros_like(small)):
    if weights is not None:
      features = dict(features, masked_lm_weights=weights)
      expected = google_models.run_google_pretraining(config, features, restore_path=path)
    inputs = {k: tf.constant(v) for k, v in features.items()}
    outputs = model(inputs, training=False)
    numerators = task.loss_numerators(outputs, inputs)
    denominators = {k: v + task.denominator_offsets.get(k, 0.0)
                    for k, v in task.loss_denominators(inputs).items()}
    assert sorted(numerators) == sorted(denominators) == ["masked_lm", "next_sentence"]
    for name in numerators:
      np.testing.assert_allclose(float(numerators[name] / denominators[name]),
                                 expected[f"{name}_loss"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(loop.total_loss(task, outputs, inputs, denominators)),
                               expected["masked_lm_loss"] + expected["next_sentence_loss"],
                               rtol=1e-5)
  assert expected["masked_lm_loss"] == 0.0
