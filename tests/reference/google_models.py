"""Runs Google's original model code (bert-tensorflow 1.0.4) in TF1 graph mode.

``run_google_pretraining`` builds ``modeling.BertModel`` plus ``run_pretraining``'s masked-LM
and next-sentence heads, optionally restores or randomises every variable, saves a checkpoint
with ``tf.compat.v1.train.Saver`` and returns the original's outputs as numpy. It is the
independent reference for bert_tf's model, loaders and pretraining metrics.
"""

import numpy as np
import tensorflow as tf

from tests.reference.google_bert import google

tf1 = tf.compat.v1


def tiny_config_dict(**overrides):
  values = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, max_position_embeddings=64,
                type_vocab_size=2, initializer_range=0.02)
  values.update(overrides)
  return values


def random_pretraining_features(config, batch_size=3, seq_length=12, num_predictions=4,
                                seed=0):
  """Random but well-formed pretraining features (some padding, some padded predictions)."""
  rng = np.random.RandomState(seed)
  lengths = rng.randint(seq_length // 2, seq_length + 1, size=batch_size)
  lengths[0] = seq_length
  input_mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
  input_ids = rng.randint(1, config["vocab_size"], size=(batch_size, seq_length)) * input_mask
  segment_ids = ((np.arange(seq_length)[None, :] >= (lengths[:, None] // 2)) *
                 input_mask).astype(np.int32)
  positions = np.zeros((batch_size, num_predictions), np.int32)
  weights = np.zeros((batch_size, num_predictions), np.float32)
  for b in range(batch_size):
    n = rng.randint(1, num_predictions + 1)
    positions[b, :n] = np.sort(rng.choice(np.arange(1, lengths[b]), n, replace=False))
    weights[b, :n] = 1.0
  masked_ids = rng.randint(1, config["vocab_size"], size=(batch_size, num_predictions))
  masked_ids = (masked_ids * weights).astype(np.int32)
  return {
      "input_ids": input_ids.astype(np.int32), "input_mask": input_mask,
      "segment_ids": segment_ids, "masked_lm_positions": positions,
      "masked_lm_ids": masked_ids, "masked_lm_weights": weights,
      "next_sentence_labels": rng.randint(0, 2, size=(batch_size, 1)).astype(np.int32),
  }


def google_pretraining_graph(config_dict, features, is_training=False):
  """The original's pretraining graph (``modeling.BertModel``, ``is_training=False`` unless
  asked, and ``run_pretraining``'s masked-LM and next-sentence heads) on ``features``, built
  in the current graph: ``{name: tensor}`` of its outputs."""
  modeling = google("modeling")
  run_pretraining = google("run_pretraining")
  config = modeling.BertConfig.from_dict(config_dict)
  inputs = {k: tf1.constant(v) for k, v in features.items()}
  model = modeling.BertModel(config=config, is_training=is_training,
                             input_ids=inputs["input_ids"], input_mask=inputs["input_mask"],
                             token_type_ids=inputs["segment_ids"])
  mlm_loss, mlm_example_loss, mlm_log_probs = run_pretraining.get_masked_lm_output(
      config, model.get_sequence_output(), model.get_embedding_table(),
      inputs["masked_lm_positions"], inputs["masked_lm_ids"], inputs["masked_lm_weights"])
  nsp_loss, nsp_example_loss, nsp_log_probs = run_pretraining.get_next_sentence_output(
      config, model.get_pooled_output(), inputs["next_sentence_labels"])
  return {"sequence_output": model.get_sequence_output(),
          "pooled_output": model.get_pooled_output(),
          "embedding_output": model.get_embedding_output(),
          "encoder_outputs": model.get_all_encoder_layers(),
          "masked_lm_loss": mlm_loss, "masked_lm_example_loss": mlm_example_loss,
          "masked_lm_log_probs": mlm_log_probs,
          "next_sentence_loss": nsp_loss, "next_sentence_example_loss": nsp_example_loss,
          "next_sentence_log_probs": nsp_log_probs}


def run_google_pretraining(config_dict, features, save_path=None, restore_path=None, seed=1,
                           randomize=True, is_training=False):
  """Builds the original pretraining graph and evaluates it (``is_training=False`` unless
  asked: with ``is_training=True`` the config's dropout is on, as ``modeling.dropout`` draws
  it).

  Every variable is drawn at random (biases, LayerNorm and all, so that nothing is trivially
  zero or one) unless ``restore_path`` is given. Returns a dict of numpy outputs; if
  ``save_path`` is given the variables are saved there first with the original's names.
  """
  graph = tf.Graph()
  with graph.as_default():
    tf1.set_random_seed(seed)
    outputs = google_pretraining_graph(config_dict, features, is_training=is_training)
    variables = tf1.global_variables()
    saver = tf1.train.Saver(variables)
    with tf1.Session(graph=graph) as sess:
      if restore_path:
        saver.restore(sess, restore_path)
      else:
        sess.run(tf1.global_variables_initializer())
        if randomize:
          rng = np.random.RandomState(seed)
          for v in variables:
            shape = v.shape.as_list()
            if v.name.endswith(("gamma:0",)):
              value = 1.0 + 0.1 * rng.randn(*shape)
            else:
              value = 0.05 * rng.randn(*shape)
            v.load(value.astype(np.float32), sess)
      if save_path:
        saver.save(sess, save_path)
      fetched = sess.run(outputs)
      fetched["variable_names"] = sorted(v.op.name for v in variables)
  return fetched
