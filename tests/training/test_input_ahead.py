"""The whole-update loop with each batch fetched one update ahead (``Trainer.input_ahead``,
on by default where a GPU is visible): the same batches in the same order, the same numbers
as fetching each batch when its update runs, and the update launched before it waits for
the next batch's copy."""

import numpy as np
import keras
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig
from bert_tf.training import loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

# Dropout on: the masks follow each update's seed, so a batch or an update out of place shows.
CONFIG = google_models.tiny_config_dict()
BATCH = 4


def _examples():
  # 7 distinct batches: the loop's 3 host calls (3 + 3 + 1 updates) see each batch once, so a
  # batch fetched twice or skipped changes the weights.
  return google_models.random_pretraining_features(CONFIG, batch_size=7 * BATCH,
                                                   seq_length=12, num_predictions=4, seed=3)


def _dataset_fn(ctx):
  del ctx
  return tf.data.Dataset.from_tensor_slices(_examples()).batch(BATCH, drop_remainder=True)


def _train(tmp_path, input_ahead, steps=7, steps_per_loop=3):
  keras.utils.set_random_seed(11)
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model()
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path), num_train_steps=steps, steps_per_loop=steps_per_loop,
      save_checkpoints_steps=0, jit_compile=True))
  trainer.whole_update = True  # on CPU the defaults are off
  trainer.input_ahead = input_ahead
  losses = []
  result = trainer.train(_dataset_fn, progress=lambda line: losses.append(line))
  return trainer, model, optimizer, result, losses


def test_fetching_ahead_trains_the_same_numbers(tmp_path):
  ahead, model, optimizer, result, _ = _train(tmp_path / "ahead", input_ahead=True)
  assert ahead._input_ahead()  # pylint: disable=protected-access
  inline, inline_model, inline_optimizer, inline_result, _ = _train(tmp_path / "inline",
                                                                    input_ahead=False)
  assert not inline._input_ahead()  # pylint: disable=protected-access
  # The dataset has exactly 7 batches and does not repeat: one batch too many fetched ahead
  # would end the input early (OutOfRange) instead of training.
  assert int(optimizer.iterations.numpy()) == int(inline_optimizer.iterations.numpy()) == 7
  assert result["loss"] == inline_result["loss"]
  for var, inline_var in zip(model.trainable_variables, inline_model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), inline_var.numpy(), err_msg=var.path)
  # Training moved the weights, so the comparison means something.
  keras.utils.set_random_seed(11)
  initial = PretrainingTask(BertConfig.from_dict(CONFIG)).build_model().get_weights()
  assert max(np.abs(a - b).max() for a, b in zip(initial, model.get_weights())) > 1e-4


def test_batches_keep_their_order_across_host_calls(tmp_path):
  """Against a loop of one update per host call (no batch ever fetched ahead of its call)."""
  _, model, _, result, _ = _train(tmp_path / "three", input_ahead=True, steps_per_loop=3)
  _, single, _, single_result, _ = _train(tmp_path / "one", input_ahead=True,
                                          steps_per_loop=1)
  assert result["loss"] == single_result["loss"]  # both: the mean of update 7 alone
  for var, single_var in zip(model.trainable_variables, single.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), single_var.numpy(), err_msg=var.path)


def _body_graph(trainer, num_steps=3):
  concrete = trainer._train_loop.compiled.get_concrete_function(  # pylint: disable=protected-access
      iter(tf.data.Dataset.from_tensor_slices(_examples()).batch(BATCH).repeat()),
      tf.constant(num_steps))
  whiles = [op for op in concrete.graph.get_operations() if op.type in ("While", "StatelessWhile")]
  assert len(whiles) == 1
  return concrete.graph._functions[whiles[0].get_attr("body").name].graph  # pylint: disable=protected-access


def _ancestors(op, control=False):
  seen, todo = set(), [op]
  while todo:
    node = todo.pop()
    for parent in [t.op for t in node.inputs] + (node.control_inputs if control else []):
      if parent not in seen:
        seen.add(parent)
        todo.append(parent)
  return seen


def test_the_update_takes_the_batch_fetched_by_the_previous_iteration(tmp_path):
  trainer, _, _, _, _ = _train(tmp_path, input_ahead=True, steps=1, steps_per_loop=1)
  body = _body_graph(trainer)
  ops = body.get_operations()
  updates = [op for op in ops if op.type in ("StatefulPartitionedCall", "PartitionedCall")
             and "update" in op.get_attr("f").name]
  fetches = [op for op in ops if op.type in ("If", "StatelessIf")]
  assert len(updates) == 1 and len(fetches) == 1
  update, fetch = updates[0], fetches[0]
  # The batch the update trains on does not come from this iteration's fetch (the If that
  # calls IteratorGetNext) but from the loop's carried values: fetched one update ahead.
  assert fetch not in _ancestors(update)
  # The launch waits for the next batch on the host (the If; through a control edge of the
  # ops before it in the step), not for its copy to the device.
  assert fetch in _ancestors(update, control=True)
  # int32 features travel as int64; the compiled update casts them back.
  feature_inputs = [t for t in update.inputs if t.dtype in (tf.int32, tf.int64)]
  assert feature_inputs and all(t.dtype == tf.int64 for t in feature_inputs)


def test_inline_loop_is_unchanged_without_a_gpu(tmp_path):
  trainer, _, _, _, _ = _train(tmp_path, input_ahead=None, steps=1, steps_per_loop=1)
  assert trainer._input_mode() == "inline"  # pylint: disable=protected-access
  # The batch goes to the update as it comes: int32, no wire format.
  body = _body_graph(trainer)
  update, = [op for op in body.get_operations()
             if op.type in ("StatefulPartitionedCall", "PartitionedCall")
             and "update" in op.get_attr("f").name]
  feature_inputs = [t for t in update.inputs if t.dtype in (tf.int32, tf.int64)]
  assert feature_inputs and all(t.dtype == tf.int32 for t in feature_inputs)


def test_prefetched_by_tf_data_trains_the_same_numbers(tmp_path):
  """input_ahead="prefetch": tf.data copies the batches (in their wire format) to the device
  ahead of the loop (here the CPU; a GPU where there is one)."""
  trainer, model, optimizer, result, _ = _train(tmp_path / "prefetch", input_ahead="prefetch")
  assert trainer._input_mode() == "prefetch"  # pylint: disable=protected-access
  _, inline_model, inline_optimizer, inline_result, _ = _train(tmp_path / "inline",
                                                               input_ahead=False)
  # 7 batches, not repeated: a batch lost or fetched twice would change the weights or end
  # the input early (the prefetch buffer runs two batches ahead of the loop).
  assert int(optimizer.iterations.numpy()) == int(inline_optimizer.iterations.numpy()) == 7
  assert result["loss"] == inline_result["loss"]
  for var, inline_var in zip(model.trainable_variables, inline_model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), inline_var.numpy(), err_msg=var.path)
  # The loop takes the batch as tf.data delivers it: int64 ids, cast back inside the update.
  iterator = trainer.make_iterator(_dataset_fn)
  batch = next(iterator)
  assert batch["input_ids"].dtype == tf.int64 and batch["masked_lm_weights"].dtype == tf.float32
  np.testing.assert_array_equal(batch["input_ids"].numpy(), _examples()["input_ids"][:BATCH])


def test_input_ahead_takes_only_its_values(tmp_path):
  trainer, _, _, _, _ = _train(tmp_path, input_ahead=True, steps=1, steps_per_loop=1)
  trainer.input_ahead = "yes"
  with pytest.raises(ValueError, match="input_ahead must be"):
    trainer._input_mode()  # pylint: disable=protected-access


def test_zero_updates_is_refused_before_a_batch_is_fetched(tmp_path):
  trainer, _, _, _, _ = _train(tmp_path, input_ahead=True, steps=1, steps_per_loop=1)
  iterator = iter(tf.data.Dataset.from_tensor_slices(_examples()).batch(BATCH))
  with pytest.raises(tf.errors.InvalidArgumentError, match="at least one update"):
    trainer._train_loop(iterator, tf.constant(0))  # pylint: disable=protected-access


def test_classifier_fine_tuning_fetched_ahead_is_the_same(tmp_path):
  """The same for a fine-tuning task (int32 labels of shape [B] travel as int64 too)."""
  from bert_tf.training.classifier import ClassifierTask  # pylint: disable=import-outside-toplevel
  features = _examples()
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["label_ids"] = np.arange(7 * BATCH, dtype=np.int32) % 3

  def run(path, input_ahead):
    keras.utils.set_random_seed(5)
    task = ClassifierTask(BertConfig.from_dict(CONFIG), num_labels=3)
    model = task.build_model()
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2)
    trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer,
                           loop.LoopConfig(model_dir=str(path), num_train_steps=7,
                                           steps_per_loop=3, save_checkpoints_steps=0,
                                           jit_compile=True))
    trainer.whole_update = True
    trainer.input_ahead = input_ahead
    result = trainer.train(
        lambda ctx: tf.data.Dataset.from_tensor_slices(features).batch(BATCH),
        progress=lambda line: None)
    return trainer, model, result

  ahead, model, result = run(tmp_path / "ahead", True)
  assert ahead._input_ahead()  # pylint: disable=protected-access
  _, inline_model, inline_result = run(tmp_path / "inline", False)
  assert result["loss"] == inline_result["loss"]
  for var, inline_var in zip(model.trainable_variables, inline_model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), inline_var.numpy(), err_msg=var.path)
