"""Non-finite numbers: a NaN loss stops training at its step, before any save; float16 steps
skipped by dynamic loss scaling do not count; a finite loss whose update overflows the weights
stops before the save too. The latest checkpoint stays the last finite one.

The NaN is planted in the input (``masked_lm_weights`` of one batch of an unshuffled,
non-repeating dataset), so the step it lands on is known without running anything:
batch k (from 0) is the input of update k + 1.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from bert_tf.training import DTYPE_POLICIES, loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

CONFIG = google_models.tiny_config_dict(hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)
BATCH = 4


def _dataset_fn(batches, nan_batch=None):
  """``batches`` batches, in order, never repeated; batch ``nan_batch`` has NaN weights."""
  examples = google_models.random_pretraining_features(
      CONFIG, batch_size=BATCH * batches, seq_length=12, num_predictions=4, seed=3)
  if nan_batch is not None:
    examples["masked_lm_weights"][BATCH * nan_batch:BATCH * (nan_batch + 1)] = np.nan

  def dataset_fn(ctx):
    del ctx
    return tf.data.Dataset.from_tensor_slices(examples).batch(BATCH, drop_remainder=True)

  return dataset_fn


def _trainer(model_dir, steps, steps_per_loop, save_every, optimizer=None, dtype="float32"):
  keras.utils.set_random_seed(7)
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model(dtype=DTYPE_POLICIES[dtype])
  optimizer = optimizer or optimization.create_optimizer(1e-3, num_train_steps=20,
                                                         num_warmup_steps=0)
  if dtype == "float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  return loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(model_dir), num_train_steps=steps, steps_per_loop=steps_per_loop,
      save_checkpoints_steps=save_every, keep_checkpoint_max=10))


def _checkpoints(model_dir):
  return sorted(n[:-len(".index")] for n in os.listdir(model_dir) if n.endswith(".index"))


def _finite_checkpoint(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return all(np.all(np.isfinite(reader.get_tensor(name)))
             for name, dtype in reader.get_variable_to_dtype_map().items() if dtype.is_floating)


def test_nan_loss_mid_loop_names_its_step_and_saves_nothing_after(tmp_path):
  # Loops of 4 updates (saves every 4); batch 6 -> update 7, inside the second loop.
  trainer = _trainer(tmp_path, steps=12, steps_per_loop=4, save_every=4)
  lines = []
  with pytest.raises(BertTfError) as error:
    trainer.train(_dataset_fn(12, nan_batch=6), progress=lines.append)
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith("the loss is not finite at step 7: training stopped without "
                            "saving (the latest checkpoint, ckpt-4, holds the last finite "
                            "weights)"), message
  assert _checkpoints(tmp_path) == ["ckpt-4"]
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
  assert _finite_checkpoint(str(tmp_path / "ckpt-4"))
  assert not [line for line in lines if line.startswith("step 8/")]


def test_float16_step_skipped_by_loss_scaling_does_not_count(tmp_path):
  # The NaN batch's gradients are NaN: dynamic loss scaling skips that update (the step
  # counter does not advance), so the run goes on with the next batch to its last step.
  trainer = _trainer(tmp_path, steps=4, steps_per_loop=2, save_every=2, dtype="float16")
  result = trainer.train(_dataset_fn(5, nan_batch=1), progress=lambda line: None)
  assert result["global_step"] == 4
  assert np.isfinite(result["loss"])
  assert _checkpoints(tmp_path) == ["ckpt-2", "ckpt-4"]
  assert all(_finite_checkpoint(str(tmp_path / c)) for c in ("ckpt-2", "ckpt-4"))


def test_update_that_overflows_the_weights_is_not_saved(tmp_path):
  # An infinite learning rate: the first loss is finite (initial weights), its update is not.
  trainer = _trainer(tmp_path, steps=3, steps_per_loop=1, save_every=1,
                     optimizer=keras.optimizers.SGD(learning_rate=float("inf")))
  with pytest.raises(BertTfError, match=r"^the weights are not finite after step 1 .*no "
                     r"checkpoint was saved"):
    trainer.train(_dataset_fn(3), progress=lambda line: None)
  assert _checkpoints(tmp_path) == []


def test_initial_weights_that_are_not_finite_are_said_before_training(tmp_path):
  # A checkpoint given as --init_checkpoint that holds a nan (its run diverged): said as the
  # start's, before a first update whose nan loss would read as a learning rate too high.
  trainer = _trainer(tmp_path, steps=3, steps_per_loop=1, save_every=1)

  def init_fn(model):
    weights = model.trainable_variables[0]
    weights.assign(tf.fill(weights.shape, float("nan")))

  lines = []
  with pytest.raises(BertTfError, match=r"^the initial weights are not finite .*nothing was "
                     r"trained$"):
    trainer.train(_dataset_fn(3), init_fn=init_fn, progress=lines.append)
  assert _checkpoints(tmp_path) == []
  assert not [line for line in lines if line.startswith("step ")]
