"""--jit_compile on one device: the whole update (forward, backward, global norm, clipping,
Google's AdamWeightDecay step) is one XLA computation, and it trains as the path that keeps
the update outside XLA (XLA-compiled gradients, then each variable's update on its own)."""

import numpy as np
import keras
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig
from bert_tf.training import loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

CONFIG = google_models.tiny_config_dict(hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)


def _dataset_fn(ctx):
  del ctx
  examples = google_models.random_pretraining_features(CONFIG, batch_size=8, seq_length=12,
                                                       num_predictions=4, seed=0)
  return tf.data.Dataset.from_tensor_slices(examples).repeat().batch(4, drop_remainder=True)


def _train(tmp_path, whole_update):
  keras.utils.set_random_seed(7)
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model()
  # clip_norm 0.05 is below this model's gradient norm, so every step is clipped.
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2,
                                            clip_norm=0.05)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path), num_train_steps=3, steps_per_loop=3, save_checkpoints_steps=0,
      jit_compile=True))
  trainer.whole_update = whole_update  # on CPU the default is False
  result = trainer.train(_dataset_fn, progress=lambda line: None)
  return trainer, model, optimizer, result


def test_whole_update_is_one_xla_computation_and_equals_the_split_update(tmp_path):
  trainer, model, optimizer, result = _train(tmp_path / "whole", whole_update=True)
  assert trainer._compiled_update is not None  # pylint: disable=protected-access
  split_trainer, split_model, split_optimizer, split = _train(tmp_path / "split",
                                                              whole_update=False)
  assert split_trainer._compiled_update is None  # pylint: disable=protected-access
  assert int(optimizer.iterations.numpy()) == int(split_optimizer.iterations.numpy()) == 3
  np.testing.assert_allclose(result["loss"], split["loss"], rtol=1e-5)
  for var, split_var in zip(model.trainable_variables, split_model.trainable_variables):
    np.testing.assert_allclose(var.numpy(), split_var.numpy(), rtol=1e-4, atol=1e-6,
                               err_msg=var.path)
    for slot in ("m", "v"):
      np.testing.assert_allclose(optimizer.slot(var, slot).numpy(),
                                 split_optimizer.slot(split_var, slot).numpy(),
                                 rtol=1e-4, atol=1e-9, err_msg=f"{var.path}/{slot}")
  # Training moved the weights (3 steps at lr up to 1e-3), so the comparison means something.
  keras.utils.set_random_seed(7)
  initial = PretrainingTask(BertConfig.from_dict(CONFIG)).build_model().get_weights()
  assert max(np.abs(a - b).max() for a, b in zip(initial, model.get_weights())) > 1e-4
