"""A tiny BERT pretraining run on the whole-update XLA path (one XLA computation per update;
on CPU the default is off), for the tests of how the batches reach the update
(``Trainer.prefetch_to_device``, ``Trainer.device_loop``)."""

import keras
import numpy as np
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig
from bert_tf.training import loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

# Dropout on: the masks follow each update's seed, so a batch or an update out of place shows.
CONFIG = google_models.tiny_config_dict()
BATCH = 4
SEED = 11


def examples(batches=7, nan_batch=None):
  """``batches`` distinct batches of features; batch ``nan_batch`` (from 0, the input of
  update ``nan_batch + 1``) has NaN weights."""
  features = google_models.random_pretraining_features(
      CONFIG, batch_size=batches * BATCH, seq_length=12, num_predictions=4, seed=3)
  if nan_batch is not None:
    features["masked_lm_weights"][BATCH * nan_batch:BATCH * (nan_batch + 1)] = np.nan
  return features


def dataset_fn(features=None, drop_remainder=True):
  """A ``dataset_fn`` over ``features`` (default: ``examples()``), in order, not repeated: a
  batch fetched twice or lost ends the input early or moves the weights elsewhere."""
  features = examples() if features is None else features
  return lambda ctx: tf.data.Dataset.from_tensor_slices(features).batch(
      BATCH, drop_remainder=drop_remainder)


def make_trainer(tmp_path, steps=7, steps_per_loop=3, **trainer_attributes):
  """The Trainer ``train`` trains with, from seed ``SEED``'s weights, whole-update path on,
  ``trainer_attributes`` set -> (trainer, model, optimizer)."""
  keras.utils.set_random_seed(SEED)
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path), num_train_steps=steps, steps_per_loop=steps_per_loop,
      save_checkpoints_steps=0, jit_compile=True))
  trainer.whole_update = True
  for name, value in trainer_attributes.items():
    setattr(trainer, name, value)
  return trainer, model, optimizer


def train(tmp_path, steps=7, steps_per_loop=3, data=None, **trainer_attributes):
  """Trains ``steps`` updates from seed ``SEED``'s weights on ``data`` (a ``dataset_fn``;
  default: ``dataset_fn()``) with ``trainer_attributes`` set on the Trainer ->
  (trainer, model, optimizer, result)."""
  trainer, model, optimizer = make_trainer(tmp_path, steps, steps_per_loop,
                                           **trainer_attributes)
  result = trainer.train(data or dataset_fn(), progress=lambda line: None)
  return trainer, model, optimizer, result


def initial_weights():
  """The weights ``train`` starts from."""
  keras.utils.set_random_seed(SEED)
  return PretrainingTask(BertConfig.from_dict(CONFIG)).build_model().get_weights()
