"""The whole-update loop with the batches copied to the device by tf.data ahead of the loop
(``Trainer.prefetch_to_device``, off by default): the same batches in the same order, the
same numbers as each update taking its batch as it comes."""

import numpy as np
import keras
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig
from bert_tf.training import loop
from tests.training import tiny_loop
from tests.training.tiny_loop import BATCH, CONFIG


def _train(tmp_path, prefetch, steps=7, steps_per_loop=3):
  return tiny_loop.train(tmp_path, steps, steps_per_loop, prefetch_to_device=prefetch)


@pytest.fixture(scope="module")
def prefetched(tmp_path_factory):
  """``_train``'s 7 prefetched updates in host calls of 3, 3 and 1 (tests only read it)."""
  return _train(tmp_path_factory.mktemp("prefetch"), prefetch=True)


def test_batches_keep_their_order_across_host_calls(prefetched, tmp_path):
  """Prefetched, against a loop of one update per host call: the prefetch buffer outlives
  each host call without losing or repeating a batch."""
  _, model, _, result = prefetched
  _, single, _, single_result = _train(tmp_path / "one", prefetch=True, steps_per_loop=1)
  assert result["loss"] == single_result["loss"]  # both: the mean of update 7 alone
  for var, single_var in zip(model.trainable_variables, single.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), single_var.numpy(), err_msg=var.path)


def _body_graph(trainer, num_steps=3):
  # The iterator train() gives the loop (the prefetching one where prefetch_to_device).
  concrete = trainer._train_loop.compiled.get_concrete_function(  # pylint: disable=protected-access
      trainer.make_iterator(tiny_loop.dataset_fn()), tf.constant(num_steps))
  whiles = [op for op in concrete.graph.get_operations() if op.type in ("While", "StatelessWhile")]
  assert len(whiles) == 1
  return concrete.graph._functions[whiles[0].get_attr("body").name].graph  # pylint: disable=protected-access


def _update_feature_dtypes(trainer):
  update, = [op for op in _body_graph(trainer).get_operations()
             if op.type in ("StatefulPartitionedCall", "PartitionedCall")
             and "update" in op.get_attr("f").name]
  return {t.dtype for t in update.inputs if t.dtype in (tf.int32, tf.int64)}


def test_the_default_takes_each_batch_as_it_comes(tmp_path):
  trainer, _, _, _ = _train(tmp_path, prefetch=None, steps=1, steps_per_loop=1)
  assert not trainer._prefetches()  # pylint: disable=protected-access
  # The batch goes to the update as it comes: int32, no wire format.
  assert _update_feature_dtypes(trainer) == {tf.int32}


def test_prefetched_batches_reach_the_update_as_int64(prefetched):
  trainer, _, _, _ = prefetched
  assert trainer._prefetches()  # pylint: disable=protected-access
  # int32 features travel as int64 (kept in device memory); the compiled update casts back.
  assert _update_feature_dtypes(trainer) == {tf.int64}


def test_prefetched_by_tf_data_trains_the_same_numbers(prefetched, tmp_path):
  """tf.data copies the batches (in their wire format) to the device ahead of the loop (here
  the CPU; a GPU where there is one)."""
  trainer, model, optimizer, result = prefetched
  assert trainer._prefetches()  # pylint: disable=protected-access
  _, inline_model, inline_optimizer, inline_result = _train(tmp_path / "inline",
                                                            prefetch=False)
  # 7 batches, not repeated: a batch lost or fetched twice would change the weights or end
  # the input early (the prefetch buffer runs two batches ahead of the loop).
  assert int(optimizer.iterations.numpy()) == int(inline_optimizer.iterations.numpy()) == 7
  assert result["loss"] == inline_result["loss"]
  for var, inline_var in zip(model.trainable_variables, inline_model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), inline_var.numpy(), err_msg=var.path)
  # Training moved the weights, so the comparison means something.
  initial = tiny_loop.initial_weights()
  assert max(np.abs(a - b).max() for a, b in zip(initial, model.get_weights())) > 1e-4
  # The loop takes the batch as tf.data delivers it: int64 ids, cast back inside the update.
  iterator = trainer.make_iterator(tiny_loop.dataset_fn())
  batch = next(iterator)
  assert batch["input_ids"].dtype == tf.int64 and batch["masked_lm_weights"].dtype == tf.float32
  np.testing.assert_array_equal(batch["input_ids"].numpy(), tiny_loop.examples()["input_ids"][:BATCH])


def test_prefetch_to_device_takes_only_its_values(tmp_path):
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, prefetch_to_device=True)
  trainer.prefetch_to_device = "prefetch"
  with pytest.raises(ValueError, match="prefetch_to_device must be None, True or False"):
    trainer._prefetches()  # pylint: disable=protected-access


def test_classifier_fine_tuning_prefetched_is_the_same(tmp_path):
  """The same for a fine-tuning task (int32 labels of shape [B] travel as int64 too)."""
  from bert_tf.training.classifier import ClassifierTask  # pylint: disable=import-outside-toplevel
  features = tiny_loop.examples()
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["label_ids"] = np.arange(7 * BATCH, dtype=np.int32) % 3

  def run(path, prefetch):
    keras.utils.set_random_seed(5)
    task = ClassifierTask(BertConfig.from_dict(CONFIG), num_labels=3)
    model = task.build_model()
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2)
    trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer,
                           loop.LoopConfig(model_dir=str(path), num_train_steps=7,
                                           steps_per_loop=3, save_checkpoints_steps=0,
                                           jit_compile=True))
    trainer.whole_update = True
    trainer.prefetch_to_device = prefetch
    result = trainer.train(
        lambda ctx: tf.data.Dataset.from_tensor_slices(features).batch(BATCH),
        progress=lambda line: None)
    return trainer, model, result

  prefetched, model, result = run(tmp_path / "prefetch", True)
  assert prefetched._prefetches()  # pylint: disable=protected-access
  _, inline_model, inline_result = run(tmp_path / "inline", False)
  assert result["loss"] == inline_result["loss"]
  for var, inline_var in zip(model.trainable_variables, inline_model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), inline_var.numpy(), err_msg=var.path)
