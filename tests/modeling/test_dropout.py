"""Dropout masks: the "hash" generator against MurmurHash3's published finalizer and the
binomial statistics a dropout mask must have; the training loop's choice under XLA; the
classifier heads' dropout on the encoder output."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import BertClassifier, BertConfig, BertModel, BertTokenClassifier, layers
from bert_tf.training import distribution, loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models


def _fmix32(h):
  """MurmurHash3's fmix32, from its published definition (Python ints)."""
  h ^= h >> 16
  h = (h * 0x85EBCA6B) & 0xFFFFFFFF
  h ^= h >> 13
  h = (h * 0xC2B2AE35) & 0xFFFFFFFF
  h ^= h >> 16
  return h


def test_fmix32_known_values():
  # fmix32 maps 0 to 0 and is a bijection; 1 -> 0x514E28B7 is its published value.
  assert _fmix32(0) == 0
  assert _fmix32(1) == 0x514E28B7


@pytest.mark.parametrize("seed", [(0, 0), (7, 11), (2**31 - 3, 123456789)])
def test_hash_bits_match_the_definition(seed):
  bits = layers.hash_bits([3, 50], tf.constant(seed, tf.int32)).numpy().astype(np.int64)
  expected = [_fmix32(_fmix32((i * 0x9E3779B9 + seed[0]) & 0xFFFFFFFF) ^ seed[1])
              for i in range(150)]
  assert bits.ravel().tolist() == expected


def test_hash_dropout_same_under_xla_and_eager():
  x = tf.random.stateless_normal([4, 33, 17], seed=[1, 2])
  seed = tf.constant([5, 9], tf.int32)
  eager = layers.hash_dropout(x, 0.1, seed).numpy()
  xla = tf.function(layers.hash_dropout, jit_compile=True)(x, 0.1, seed).numpy()
  np.testing.assert_array_equal(eager, xla)


def test_hash_dropout_statistics():
  """Keep rate, scaling, independence of neighbours and of seeds, within 6 binomial sigmas."""
  rate, n = 0.1, 1 << 22
  p = 1.0 - rate
  x = tf.ones([n // 256, 256])
  y1 = layers.hash_dropout(x, rate, tf.constant([3, 4], tf.int32)).numpy().ravel()
  y2 = layers.hash_dropout(x, rate, tf.constant([3, 5], tf.int32)).numpy().ravel()
  assert set(np.unique(y1).tolist()) == {0.0, np.float32(1.0 / p)}
  k1, k2 = y1 != 0, y2 != 0

  def within(observed, expected, count):
    sigma = np.sqrt(expected * (1.0 - expected) / count)
    assert abs(observed - expected) < 6 * sigma, (observed, expected, sigma)

  within(k1.mean(), p, n)
  within((k1[1:] & k1[:-1]).mean(), p * p, n - 1)      # neighbours
  within((k1[256:] & k1[:-256]).mean(), p * p, n - 256)  # same column, next row
  within((k1 == k2).mean(), p * p + rate * rate, n)    # another seed: independent masks
  # Dropped on its own: E[y] = x.
  within(y1.mean() * p, p, n)


def test_dropout_layer_rng_option():
  x = tf.ones([8, 64])
  layer = layers.Dropout(0.5, rng="hash", seed=3)
  y = layer(x, training=True).numpy()
  assert set(np.unique(y).tolist()) == {0.0, 2.0}
  np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
  assert layers.Dropout.from_config(layer.get_config()).rng == "hash"
  with pytest.raises(ValueError, match="rng must be one of"):
    layers.Dropout(0.1, rng="threefry")


def test_jit_compiled_training_uses_hash_dropout(tmp_path):
  task = PretrainingTask(BertConfig.from_dict(google_models.tiny_config_dict()))
  model = task.build_model()
  dropouts = [l for l in model._flatten_layers() if isinstance(l, layers.Dropout)]  # pylint: disable=protected-access
  assert dropouts and all(l.rng == "philox" for l in dropouts)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model,
                         keras.optimizers.SGD(0.1), loop.LoopConfig(
                             model_dir=str(tmp_path), num_train_steps=1, jit_compile=True))
  trainer.build_train_loop()
  assert all(l.rng == "hash" for l in dropouts)


def _two_replicas():
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs 2 logical CPU devices (conftest sets them before TensorFlow starts)")
  return distribution.mirrored_strategy(["/cpu:0", "/cpu:1"])  # its own collective keys


@pytest.mark.parametrize("rng", layers.DROPOUT_RNGS)
def test_replicas_draw_their_own_masks(rng):
  """Under a strategy of 2 replicas, the same input gets independent masks on the two (the
  seed generator is one mirrored variable: they drew the same mask), and replica 0 draws what
  one device draws from the same generator state (one device's numbers do not change)."""
  rate, p, shape = 0.5, 0.5, [64, 256]
  strategy = _two_replicas()
  with strategy.scope():
    mirrored = layers.Dropout(rate, seed=11, rng=rng)
  replica_fn = lambda: mirrored(tf.ones(shape), training=True)  # noqa: E731
  first, second = strategy.experimental_local_results(
      tf.function(lambda: strategy.run(replica_fn))())
  single = layers.Dropout(rate, seed=11, rng=rng)(tf.ones(shape), training=True)
  np.testing.assert_array_equal(first.numpy(), single.numpy())
  k1, k2 = first.numpy().ravel() != 0, second.numpy().ravel() != 0
  n = k1.size
  agree = (k1 == k2).mean()
  expected = p * p + rate * rate  # two independent masks agree where both keep or both drop
  sigma = np.sqrt(expected * (1.0 - expected) / n)
  assert abs(agree - expected) < 6 * sigma, (agree, expected)
  assert abs(k2.mean() - p) < 6 * np.sqrt(p * (1 - p) / n)


def test_replicas_train_the_encoder_with_their_own_masks():
  """The whole encoder in training mode, the same batch on both replicas: other outputs
  (every dropout of the model draws per replica); without dropout the same."""
  strategy = _two_replicas()
  config = google_models.tiny_config_dict()
  features = {"input_word_ids": tf.constant([[2, 5, 7, 9, 3, 0]] * 2),
              "input_mask": tf.constant([[1, 1, 1, 1, 1, 0]] * 2)}
  outputs = {}
  for dropout in (0.1, 0.0):
    config.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    with strategy.scope():
      model = BertModel(BertConfig.from_dict(config))
    replica_fn = lambda: model(features, training=True)["sequence_output"]  # noqa: E731
    outputs[dropout] = [t.numpy() for t in strategy.experimental_local_results(
        tf.function(lambda: strategy.run(replica_fn))())]
  assert not np.allclose(*outputs[0.1])
  np.testing.assert_allclose(*outputs[0.0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("model_class,output", [(BertClassifier, "pooled_output"),
                                                (BertTokenClassifier, "sequence_output")])
def test_classifier_heads_drop_their_input(model_class, output):
  """The head is dropout(classifier_dropout) on the encoder's output, then dense (the
  original's run_classifier create_model; Hugging Face's BertForTokenClassification). With
  the encoder's own dropout off and the head's weights the identity, the logits are the
  dropped-out encoder output itself: in training a fraction classifier_dropout of it is 0
  (within 6 binomial sigmas), the rest scaled by 1 / (1 - rate); outside training, and with
  classifier_dropout 0, the encoder output unchanged."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
  hidden = config.hidden_size
  rng = np.random.RandomState(0)
  features = {"input_word_ids": tf.constant(rng.randint(1, config.vocab_size, [256, 8])),
              "input_mask": tf.ones([256, 8], tf.int32)}
  for rate in (0.1, 0.0):
    model = model_class(config, hidden, classifier_dropout=rate)
    model.classifier.set_weights([np.eye(hidden, dtype=np.float32),
                                  np.zeros([hidden], np.float32)])
    encoded = model.bert(features, training=False)[output].numpy()
    assert np.count_nonzero(encoded) == encoded.size
    inference = model(features, training=False).numpy()
    np.testing.assert_allclose(inference, encoded, rtol=1e-6, atol=0)
    trained = model(features, training=True).numpy()
    if not rate:
      np.testing.assert_array_equal(trained, inference)
      continue
    kept = trained != 0
    n = kept.size
    dropped = 1.0 - kept.mean()
    assert abs(dropped - rate) < 6 * np.sqrt(rate * (1 - rate) / n), (dropped, rate, n)
    np.testing.assert_allclose(trained[kept], encoded[kept] / (1 - rate), rtol=1e-6)
