"""Each host call's updates as one XLA computation (``Trainer.device_loop``): the call's
batches stacked and copied once, a while loop on the device over them. The same batches in
the same order as the inline loop (each update taking its batch as it comes), the same
numbers to float32 rounding (XLA compiles the update inside a loop), the same step named
when a loss is not finite."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from tests.training import tiny_loop


def _train(tmp_path, device_loop, steps=7, steps_per_loop=3, examples=None,
           drop_remainder=True):
  return tiny_loop.train(tmp_path, steps, steps_per_loop,
                         tiny_loop.dataset_fn(examples, drop_remainder), device_loop=device_loop)


def _weights_close(model, other):
  for var, other_var in zip(model.trainable_variables, other.trainable_variables):
    np.testing.assert_allclose(var.numpy(), other_var.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg=var.path)


def test_device_loop_trains_the_inline_loops_numbers(tmp_path):
  # Host calls of 3, 3 and 1 updates: the last one's stack is padded and runs 1 update.
  trainer, model, optimizer, result = _train(tmp_path / "device", device_loop=True)
  assert trainer._device_loops()  # pylint: disable=protected-access
  inline, inline_model, inline_optimizer, inline_result = _train(tmp_path / "inline",
                                                                 device_loop=False)
  assert not inline._device_loops()  # pylint: disable=protected-access
  assert int(optimizer.iterations.numpy()) == int(inline_optimizer.iterations.numpy()) == 7
  assert result["loss"] == pytest.approx(inline_result["loss"], rel=1e-5)
  _weights_close(model, inline_model)
  # Training moved the weights well past the tolerance, so the comparison means something.
  initial = tiny_loop.initial_weights()
  assert max(np.abs(a - b).max() for a, b in zip(initial, model.get_weights())) > 1e-3


def test_batches_keep_their_order_across_host_calls(tmp_path):
  """Against one update per host call (every stack holds one batch)."""
  _, model, _, result = _train(tmp_path / "three", device_loop=True, steps_per_loop=3)
  _, single, _, single_result = _train(tmp_path / "one", device_loop=True, steps_per_loop=1)
  assert result["loss"] == pytest.approx(single_result["loss"], rel=1e-5)
  _weights_close(model, single)


def test_a_loss_that_is_not_finite_is_named_at_its_step(tmp_path):
  # Batch 4 -> update 5, the second update of the second host call.
  with pytest.raises(BertTfError, match="the loss is not finite at step 5"):
    _train(tmp_path, device_loop=True, examples=tiny_loop.examples(nan_batch=4))


def test_batches_of_changing_shape_are_refused(tmp_path):
  # 7 examples in batches of 4: the batch shape is not static.
  with pytest.raises(ValueError, match="device_loop needs batches of one static shape"):
    _train(tmp_path, device_loop=True, steps=2, steps_per_loop=2,
           examples={k: v[:7] for k, v in tiny_loop.examples().items()}, drop_remainder=False)


def test_device_loop_takes_only_its_values_and_not_with_prefetch(tmp_path):
  trainer, _, _, _ = _train(tmp_path, device_loop=True, steps=1, steps_per_loop=1)
  trainer.device_loop = "yes"
  with pytest.raises(ValueError, match="device_loop must be None, True or False"):
    trainer._device_loops()  # pylint: disable=protected-access
  trainer.device_loop, trainer.prefetch_to_device = True, True
  with pytest.raises(ValueError, match="exclude each other"):
    trainer._prefetches()  # pylint: disable=protected-access


def test_the_updates_run_in_one_compiled_call_per_host_call(tmp_path):
  trainer, _, _, _ = _train(tmp_path, device_loop=True, steps=1, steps_per_loop=1)
  concrete = trainer._train_loop.compiled.get_concrete_function(  # pylint: disable=protected-access
      iter(tiny_loop.dataset_fn()(None)),
      tf.constant(3))
  graph = concrete.graph
  whiles = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
  calls = [op for op in graph.get_operations()
           if op.type in ("StatefulPartitionedCall", "PartitionedCall")
           and "updates" in op.get_attr("f").name]
  # The host's loop only fetches; the one call after it runs every update (XLA's while).
  assert len(whiles) == 1 and len(calls) == 1
  body = graph._functions[whiles[0].get_attr("body").name].graph  # pylint: disable=protected-access
  assert not [op for op in body.get_operations()
              if op.type in ("StatefulPartitionedCall", "PartitionedCall")]
  assert calls[0].get_attr("_XlaMustCompile")
