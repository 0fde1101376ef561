"""The model as a Keras citizen: dtype policies, XLA, save/load, compile/fit."""

import numpy as np
import pytest
import keras
import tensorflow as tf

import warnings

from bert_tf.modeling import (BertClassifier, BertConfig, BertModel, BertPretrainer,
                              BertSpanLabeler, BertTokenClassifier, pretraining_loss)
from tests.reference import google_models

TINY = google_models.tiny_config_dict()


def _features():
  return {k: tf.constant(v) for k, v in google_models.random_pretraining_features(TINY).items()}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_dtype_policies_keep_norms_and_logits_float32(policy):
  model = BertPretrainer(BertConfig.from_dict(TINY), dtype=policy)
  features = _features()
  outputs = model(features, training=False)
  for name in ("masked_lm_logits", "next_sentence_logits", "sequence_output", "pooled_output"):
    assert outputs[name].dtype == tf.float32, name
  # Variables stay float32; LayerNorm is float32 even under mixed policies.
  assert all(v.dtype == "float32" for v in model.weights)
  block = model.bert.encoder_layers[0]
  assert block.output_layer_norm.compute_dtype == "float32"
  assert block.attention.query.compute_dtype == ("float32" if policy == "float32" else
                                                  policy.split("_")[1])
  if policy != "float32":
    reference = BertPretrainer(BertConfig.from_dict(TINY))
    reference.set_weights(model.get_weights())
    expected = reference(features, training=False)["sequence_output"]
    np.testing.assert_allclose(outputs["sequence_output"], expected, atol=0.1)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_train_step_compiles_with_xla(policy):
  model = BertPretrainer(BertConfig.from_dict(TINY), dtype=policy)
  features = _features()

  @tf.function(jit_compile=True)
  def step(features):
    with tf.GradientTape() as tape:
      loss = pretraining_loss(model(features, training=True), features)["loss"]
    grads = tape.gradient(loss, model.trainable_variables)
    return loss, tf.linalg.global_norm(grads)

  loss, norm = step(features)
  assert np.isfinite(loss.numpy()) and norm.numpy() > 0
  # Eager and XLA agree without dropout.
  eager = pretraining_loss(model(features, training=False), features)["loss"]
  xla = tf.function(lambda f: pretraining_loss(model(f, training=False), f)["loss"],
                    jit_compile=True)(features)
  np.testing.assert_allclose(xla, eager, rtol=1e-4 if policy == "float32" else 5e-2)


def test_dropout_only_in_training():
  model = BertModel(BertConfig.from_dict(TINY))
  features = _features()
  a = model(features, training=False)["sequence_output"]
  b = model(features, training=False)["sequence_output"]
  c = model(features, training=True)["sequence_output"]
  np.testing.assert_array_equal(a, b)
  assert np.abs(a.numpy() - c.numpy()).max() > 1e-3


def test_padding_does_not_change_real_tokens():
  """The -10000 mask on the "to" side: extra padding leaves the real tokens' outputs alone."""
  model = BertModel(BertConfig.from_dict(TINY))
  ids = tf.constant([[5, 6, 7, 8]])
  short = model({"input_word_ids": ids})["sequence_output"]
  padded = model({"input_word_ids": tf.pad(ids, [[0, 0], [0, 3]]),
                  "input_mask": tf.constant([[1, 1, 1, 1, 0, 0, 0]])})["sequence_output"]
  np.testing.assert_allclose(padded[:, :4], short, atol=1e-5)


@pytest.mark.parametrize("cls,kwargs", [(BertModel, {}), (BertPretrainer, {}),
                                        (BertClassifier, {"num_labels": 3}),
                                        (BertSpanLabeler, {})])
def test_keras_save_and_load(tmp_path, cls, kwargs):
  model = cls(BertConfig.from_dict(TINY), **kwargs)
  features = _features()
  before = model(features)
  path = str(tmp_path / "model.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded) is cls
  after = loaded(features)
  for a, b in zip(tf.nest.flatten(before), tf.nest.flatten(after)):
    np.testing.assert_array_equal(a, b)
  # Every layer's config round-trips.
  assert loaded.get_config()["config"] == model.get_config()["config"]


def test_classifier_works_with_compile_and_fit():
  """A plain Keras user: compile/fit/evaluate/predict on a learnable toy task."""
  rng = np.random.RandomState(0)
  ids = rng.randint(5, TINY["vocab_size"], size=(64, 8)).astype(np.int32)
  labels = (ids[:, 1] % 2).astype(np.int32)  # depends on one token: learnable
  inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids)}
  model = BertClassifier(BertConfig.from_dict({**TINY, "hidden_dropout_prob": 0.0}),
                         num_labels=2)
  model.compile(optimizer=keras.optimizers.Adam(3e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
  history = model.fit(inputs, labels, batch_size=16, epochs=8, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]
  _, accuracy = model.evaluate(inputs, labels, verbose=0)
  assert accuracy > 0.8
  assert model.predict(inputs, verbose=0).shape == (64, 2)


def _fit_warnings(model, labels):
  ids = np.random.RandomState(0).randint(5, TINY["vocab_size"], size=(8, 6)).astype(np.int32)
  model.compile(optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit({"input_word_ids": ids}, labels, batch_size=4, epochs=1, verbose=0)
  return [str(w.message) for w in caught if "Gradients do not exist" in str(w.message)]


@pytest.mark.parametrize("head", ["span", "token"])
def test_heads_without_the_pooler_fit_without_a_missing_gradient_warning(head):
  """The span and token heads do not use the pooler (as the original's SQuAD model): Keras's
  optimizer warned on every fit that the pooler had no gradient, as if a loss were missing.
  Its weights stay as they were; a variable that really gets no gradient still warns."""
  config = BertConfig.from_dict(TINY)
  if head == "span":
    model, labels = BertSpanLabeler(config), {"start_logits": np.zeros(8, np.int32),
                                              "end_logits": np.ones(8, np.int32)}
  else:
    model, labels = BertTokenClassifier(config, num_labels=3), np.zeros((8, 6), np.int32)
  model(google_models.random_pretraining_features(TINY))
  pooler = [v.numpy() for v in model.bert.pooler.weights]
  assert _fit_warnings(model, labels) == []
  for before, after in zip(pooler, model.bert.pooler.weights):
    np.testing.assert_array_equal(before, after.numpy())
  # Another variable without a gradient (beside the pooler's) is still named.
  if head == "span":
    model = BertSpanLabeler(config)
    model.add_weight(shape=(1,), name="unused_extra")
    assert any("unused_extra" in w for w in _fit_warnings(model, labels))


def test_span_labeler_and_regression_shapes():
  features = _features()
  spans = BertSpanLabeler(BertConfig.from_dict(TINY))(features)
  assert spans["start_logits"].shape == spans["end_logits"].shape == (3, 12)
  assert BertClassifier(BertConfig.from_dict(TINY), num_labels=1)(features).shape == (3, 1)


def test_full_train_step_with_optimizer_compiles_under_mixed_bfloat16():
  """What a TPU runs: forward, backward and the original's optimizer update in one XLA
  program, under mixed_bfloat16; it must match the same step run without XLA."""
  from bert_tf import optimization
  features = _features()
  results = []
  for jit in (True, False):
    keras.utils.set_random_seed(3)
    model = BertPretrainer(BertConfig.from_dict({**TINY, "hidden_dropout_prob": 0.0,
                                                 "attention_probs_dropout_prob": 0.0}),
                           dtype="mixed_bfloat16")
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=2)
    optimizer.build(model.trainable_variables)

    def step(features):
      with tf.GradientTape() as tape:
        loss = pretraining_loss(model(features, training=True), features)["loss"]
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss

    compiled = tf.function(step, jit_compile=jit)
    losses = [float(compiled(features)) for _ in range(3)]
    results.append((losses, [w.copy() for w in model.get_weights()]))
  (xla_losses, xla_weights), (losses, weights) = results
  assert xla_losses[-1] < xla_losses[0]
  np.testing.assert_allclose(xla_losses, losses, rtol=2e-2)
  for a, b in zip(xla_weights, weights):
    np.testing.assert_allclose(a, b, atol=5e-3)
