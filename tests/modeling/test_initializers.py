"""Initial weights against the initializers Google's original code gives each variable.

The reference is read out of the original's own graphs (bert-tensorflow 1.0.4, TF1 graph
mode): ``modeling.BertModel`` plus ``run_pretraining``'s heads, ``run_classifier.create_model``
and ``run_squad.create_model``. Each variable's initializer is found under
``<name>/Initializer/``: ``truncated_normal`` with its ``mean`` and ``stddev`` constants,
``zeros`` or ``ones``. bert_tf's freshly built models must draw every variable from that
distribution: a truncated normal is cut at 2 stddev, its standard deviation is
``stddev * sqrt(1 - 2*2*phi(2) / (2*Phi(2) - 1))`` = 0.8796 stddev (the published moments of
the truncated normal), checked within 6 standard errors of the sample variance; zeros and
ones exactly. (The token classifier has no original: its encoder is the same ``BertModel``,
its head ``output_weights`` truncated normal with stddev ``initializer_range``, REFERENCE.md.)
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.modeling import (BertClassifier, BertConfig, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier, checkpoints)
from tests.reference import google_models
from tests.reference.google_bert import google

tf1 = tf.compat.v1

# Large enough tables for the statistics ([64,64] kernels, a [200,64] vocabulary), small
# enough to build in well under a second.
SIZES = dict(vocab_size=200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=96, max_position_embeddings=64)
NUM_LABELS = 3


def _truncated_normal_moments(stddev, cut=2.0):
  """(variance, fourth central moment) of N(0, stddev^2) truncated to [-cut, cut] stddevs."""
  phi = math.exp(-cut * cut / 2) / math.sqrt(2 * math.pi)
  mass = math.erf(cut / math.sqrt(2))                       # Phi(cut) - Phi(-cut)
  m2 = (mass - 2 * cut * phi) / mass                        # E[z^2]
  m4 = (3 * (mass - 2 * cut * phi) - 2 * cut ** 3 * phi) / mass  # E[z^4]
  return m2 * stddev ** 2, m4 * stddev ** 4


def test_truncated_normal_moments_by_hand():
  # The standard deviation of a normal truncated at 2 sigma, as published: 0.87962566.
  variance, _ = _truncated_normal_moments(1.0)
  assert math.sqrt(variance) == pytest.approx(0.87962566, abs=1e-8)
  # And by numerical integration of the density, for the fourth moment too.
  z = np.linspace(-2, 2, 400001)
  density = np.exp(-z * z / 2)
  expected = [np.trapezoid(z ** k * density, z) / np.trapezoid(density, z) for k in (2, 4)]
  np.testing.assert_allclose(_truncated_normal_moments(1.0), expected, rtol=1e-8)


def _google_initializers(kind, config_dict):
  """``{google_name: ("truncated_normal", mean, stddev) | ("zeros",) | ("ones",)}`` as the
  original's graph for ``kind`` ("pretraining", "classifier", "squad") initialises them."""
  modeling = google("modeling")
  graph = tf.Graph()
  with graph.as_default():
    config = modeling.BertConfig.from_dict(config_dict)
    ids = tf1.constant(np.ones([2, 8], np.int32))
    # create_model reads `shape[-1].value` (TF1 Dimensions): TF1 shapes while it builds.
    tf1.disable_v2_tensorshape()
    try:
      if kind == "pretraining":
        run_pretraining = google("run_pretraining")
        model = modeling.BertModel(config=config, is_training=True, input_ids=ids,
                                   input_mask=ids, token_type_ids=ids * 0)
        positions = tf1.constant(np.ones([2, 3], np.int32))
        run_pretraining.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(), positions,
            positions, tf1.constant(np.ones([2, 3], np.float32)))
        run_pretraining.get_next_sentence_output(config, model.get_pooled_output(),
                                                 tf1.constant([[0], [1]]))
      elif kind == "classifier":
        google("run_classifier").create_model(config, True, ids, ids, ids * 0,
                                              tf1.constant([0, 1]), NUM_LABELS, False)
      else:
        google("run_squad").create_model(config, True, ids, ids, ids * 0, False)
    finally:
      tf1.enable_v2_tensorshape()
    found = {}
    with tf1.Session(graph=graph) as sess:
      for variable in tf1.global_variables():
        name = variable.op.name
        prefix = name + "/Initializer/"
        ops = {op.name[len(prefix):] for op in graph.get_operations()
               if op.name.startswith(prefix)}
        if "truncated_normal" in ops:
          mean, stddev = sess.run([graph.get_tensor_by_name(prefix + "truncated_normal/mean:0"),
                                   graph.get_tensor_by_name(prefix + "truncated_normal/stddev:0")])
          found[name] = ("truncated_normal", float(mean), float(stddev))
        elif ops == {"zeros"}:
          found[name] = ("zeros",)
        elif ops == {"ones"}:
          found[name] = ("ones",)
        else:
          raise AssertionError(f"{name}: an initializer this test does not know: {ops}")
  return found


def _assert_drawn_from(name, values, initializer):
  values = np.asarray(values, np.float64).ravel()
  if initializer[0] == "zeros":
    assert not values.any(), name
    return
  if initializer[0] == "ones":
    assert (values == 1.0).all(), name
    return
  _, mean, stddev = initializer
  n = values.size
  centred = values - mean
  # Cut at 2 stddev (a float32 product may round one ulp past it).
  assert np.abs(centred).max() <= 2 * stddev * (1 + 1e-6), (
      name, np.abs(centred).max(), 2 * stddev)
  variance, fourth = _truncated_normal_moments(stddev)
  sample_variance = (centred ** 2).mean()  # the mean is known
  standard_error = math.sqrt((fourth - variance ** 2) / n)
  assert abs(sample_variance - variance) < 6 * standard_error, (
      name, math.sqrt(sample_variance), math.sqrt(variance), n)
  assert abs(centred.mean()) < 6 * math.sqrt(variance / n), (name, centred.mean())


def _stddevs(expected):
  return {round(e[2], 6) for e in expected.values() if e[0] == "truncated_normal"}


def _check_model(model, expected):
  variables = checkpoints.google_variable_map(model)
  assert sorted(variables) == sorted(expected)
  for name, variable in variables.items():
    _assert_drawn_from(name, variable.numpy(), expected[name])


@pytest.mark.parametrize("initializer_range", [0.02, 0.05])
def test_pretrainer_initial_weights_are_googles(initializer_range):
  config_dict = google_models.tiny_config_dict(initializer_range=initializer_range, **SIZES)
  expected = _google_initializers("pretraining", config_dict)
  assert _stddevs(expected) == {initializer_range}
  _check_model(BertPretrainer(BertConfig.from_dict(config_dict)), expected)


@pytest.mark.parametrize("model_class,kind", [(BertClassifier, "classifier"),
                                              (BertSpanLabeler, "squad")])
def test_fine_tuning_initial_weights_are_googles(model_class, kind):
  """The default initializer_range (0.02, every released BERT's)."""
  config_dict = google_models.tiny_config_dict(**SIZES)
  expected = _google_initializers(kind, config_dict)
  args = (NUM_LABELS,) if model_class is BertClassifier else ()
  _check_model(model_class(BertConfig.from_dict(config_dict), *args), expected)


@pytest.mark.parametrize("model_class,kind", [(BertClassifier, "classifier"),
                                              (BertSpanLabeler, "squad")])
def test_fine_tuning_initial_weights_are_googles_other_range(model_class, kind):
  """initializer_range 0.05: the encoder's variables with 0.05, the head's output_weights
  with the original's fixed 0.02."""
  config_dict = google_models.tiny_config_dict(initializer_range=0.05, **SIZES)
  expected = _google_initializers(kind, config_dict)
  assert _stddevs(expected) == {0.05, 0.02}
  args = (NUM_LABELS,) if model_class is BertClassifier else ()
  _check_model(model_class(BertConfig.from_dict(config_dict), *args), expected)


@pytest.mark.parametrize("initializer_range", [0.02, 0.05])
def test_token_classifier_initial_weights(initializer_range):
  """The encoder as the original's BertModel; the head's output_weights truncated normal
  with stddev initializer_range, output_bias zeros (REFERENCE.md)."""
  config_dict = google_models.tiny_config_dict(initializer_range=initializer_range, **SIZES)
  expected = {name: spec for name, spec in
              _google_initializers("pretraining", config_dict).items()
              if name.startswith("bert/")}
  expected["output_weights"] = ("truncated_normal", 0.0, initializer_range)
  expected["output_bias"] = ("zeros",)
  _check_model(BertTokenClassifier(BertConfig.from_dict(config_dict), NUM_LABELS), expected)
