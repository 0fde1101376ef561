"""Each host call's updates as one XLA computation (``Trainer.device_loop``): the call's
batches stacked and copied once, a while loop on the device over them. The same batches in
the same order as the inline loop (each update taking its batch as it comes), the same
numbers to float32 rounding (XLA compiles the update inside a loop), the same step named
when a loss is not finite."""

import re

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from tests.training import test_run_pretraining
from tests.training import tiny_loop

workdir = test_run_pretraining.workdir  # TFRecords made by Google's code from real text


def _train(tmp_path, device_loop, steps=7, steps_per_loop=3, examples=None,
           drop_remainder=True):
  return tiny_loop.train(tmp_path, steps, steps_per_loop,
                         tiny_loop.dataset_fn(examples, drop_remainder), device_loop=device_loop)


def _weights_close(model, other):
  for var, other_var in zip(model.trainable_variables, other.trainable_variables):
    np.testing.assert_allclose(var.numpy(), other_var.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg=var.path)


@pytest.fixture(scope="module")
def device_looped(tmp_path_factory):
  """``_train``'s 7 updates through the device loop in host calls of 3, 3 and 1 (tests only
  read it)."""
  return _train(tmp_path_factory.mktemp("device"), device_loop=True)


def test_device_loop_trains_the_inline_loops_numbers(device_looped, tmp_path):
  # Host calls of 3, 3 and 1 updates: the last one's stack is padded and runs 1 update.
  trainer, model, optimizer, result = device_looped
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


def test_batches_keep_their_order_across_host_calls(device_looped, tmp_path):
  """Against one update per host call (every stack holds one batch)."""
  _, model, _, result = device_looped
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
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, device_loop=True)
  trainer.device_loop = "yes"
  with pytest.raises(ValueError, match="device_loop must be None, True or False"):
    trainer._device_loops()  # pylint: disable=protected-access
  trainer.device_loop, trainer.prefetch_to_device = True, True
  with pytest.raises(ValueError, match="exclude each other"):
    trainer._prefetches()  # pylint: disable=protected-access


@pytest.mark.parametrize("case", ["gpu", "no_gpu", "prefetch", "shape_not_static"])
def test_the_default_is_the_device_loop_on_a_gpu(tmp_path, monkeypatch, case):
  """``device_loop`` None: the device loop where a GPU is visible (measured there), unless
  tf.data prefetches the batches or their shape is not static; the inline loop otherwise.
  (The train loop built as train() builds it, after the iterator; the device loop training
  on CPU: the tests above.)"""
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(loop, "_gpu_visible", lambda: case != "no_gpu")
  attributes = {"prefetch_to_device": True} if case == "prefetch" else {}
  data = tiny_loop.dataset_fn()
  if case == "shape_not_static":
    data = tiny_loop.dataset_fn({k: v[:7] for k, v in tiny_loop.examples().items()},
                                drop_remainder=False)
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, **attributes)
  trainer.make_iterator(data)
  train_loop = trainer.build_train_loop()
  assert trainer.device_loop is None
  assert trainer._device_loops() == (case == "gpu")  # pylint: disable=protected-access
  assert hasattr(train_loop, "updates") == (case == "gpu")


def test_the_updates_run_in_one_compiled_call_per_host_call(tmp_path):
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, steps=1, steps_per_loop=1, device_loop=True)
  concrete = trainer.build_train_loop().compiled.get_concrete_function(
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


def test_the_pretraining_library_runs_the_device_loop_it_is_given(tmp_path, monkeypatch,
                                                                   workdir):
  """``run_pretraining(device_loop=True)`` (run_pretraining.py --device_loop) trains through the
  device loop, with checkpoints, to the inline loop's numbers. The whole update is made to
  compile here (on CPU it does so only on a GPU: a script there says it is not used)."""
  from bert_tf.modeling import checkpoints  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop, pretraining  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(loop.Trainer, "_whole_update_compiles",
                      lambda self: bool(self.config.jit_compile))
  looped = []
  monkeypatch.setattr(loop.Trainer, "_build_device_loop",
                      lambda self, build=loop.Trainer._build_device_loop:  # noqa: B008
                      looped.append(self) or build(self))
  config = checkpoints.load_config(str(workdir / "bert_config.json"))
  exports, lines = {}, {}
  for device_loop in (True, False):
    out = tmp_path / str(device_loop)
    lines[device_loop] = []
    pretraining.run_pretraining(
        config, f"{workdir}/data-*.tfrecord", str(out), tf.distribute.get_strategy(),
        max_seq_length=test_run_pretraining.SEQ,
        max_predictions_per_seq=test_run_pretraining.PRED, train_batch_size=8,
        learning_rate=2e-3, num_train_steps=5, num_warmup_steps=2, steps_per_loop=2,
        save_checkpoints_steps=2, jit_compile=True, device_loop=device_loop, seed=1,
        progress=lines[device_loop].append)
    exports[device_loop] = test_run_pretraining._google_export(out)  # pylint: disable=protected-access
  assert len(looped) == 1 and looped[0].device_loop is True
  assert not any("not used" in line for line in lines[True])
  losses = {k: [(int(m.group(1)), float(m.group(2))) for m in
                (re.match(r"step (\d+)/5 loss ([\d.]+) ", line) for line in v) if m]
            for k, v in lines.items()}
  assert [step for step, _ in losses[True]] == [2, 4, 5]
  for (_, a), (_, b) in zip(losses[True], losses[False]):
    assert a == pytest.approx(b, rel=1e-4)
  # Where the whole update does not compile (CPU, as it is), it says so and trains as usual.
  monkeypatch.undo()
  plain = []
  pretraining.run_pretraining(
      config, f"{workdir}/data-*.tfrecord", str(tmp_path / "plain"),
      tf.distribute.get_strategy(), max_seq_length=test_run_pretraining.SEQ,
      max_predictions_per_seq=test_run_pretraining.PRED, train_batch_size=8,
      num_train_steps=1, num_warmup_steps=1, device_loop=True, progress=plain.append)
  assert any(line.startswith("device_loop: not used here, training as usual") for line in plain)
  assert plain[-1].startswith("step 1/1 loss")
  for name, value in exports[False].items():
    np.testing.assert_allclose(exports[True][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def _fine_tuning(task_name):
  """(task, 3 batches of its training features) for a fine-tuning task of the tiny config."""
  from bert_tf.modeling import BertConfig  # pylint: disable=import-outside-toplevel
  from bert_tf.training import classifier, token_classifier  # pylint: disable=import-outside-toplevel
  config = BertConfig.from_dict(tiny_loop.CONFIG)
  base = tiny_loop.examples(batches=3)
  n, seq = base["input_ids"].shape
  rng = np.random.RandomState(7)
  features = {k: base[k] for k in ("input_ids", "input_mask", "segment_ids")}
  if task_name == "ner":
    task = token_classifier.TokenClassifierTask(config, 5)
    features["label_ids"] = rng.randint(0, 5, (n, seq)).astype(np.int32)
    features["label_mask"] = (rng.rand(n, seq) < 0.7).astype(np.int32)
  else:  # multi-label: float multi-hot labels [B,C]
    task = classifier.ClassifierTask(config, 4, multi_label=True)
    features["label_ids"] = (rng.rand(n, 4) < 0.4).astype(np.float32)
  return task, features


@pytest.mark.parametrize("task_name", ["ner", "multi_label"])
def test_fine_tuning_tasks_train_the_inline_loops_numbers(tmp_path, task_name):
  """Fine-tuning features unlike pretraining's (token labels and masks [B,S], float
  multi-hot labels [B,C]; SQuAD's span positions [B] are shaped as the next-sentence labels)
  through the device loop, which a GPU takes by default: the inline loop's loss and weights
  after 3 updates in one host call."""
  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  import keras  # pylint: disable=import-outside-toplevel
  results = {}
  for device_loop in (True, False):
    keras.utils.set_random_seed(5)
    task, features = _fine_tuning(task_name)
    model = task.build_model()
    optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=1)
    trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer,
                           loop.LoopConfig(model_dir=str(tmp_path / str(device_loop)),
                                           num_train_steps=3, steps_per_loop=3,
                                           save_checkpoints_steps=0, jit_compile=True))
    trainer.whole_update, trainer.device_loop = True, device_loop
    result = trainer.train(lambda ctx: tf.data.Dataset.from_tensor_slices(features).batch(  # pylint: disable=cell-var-from-loop
        tiny_loop.BATCH, drop_remainder=True), progress=lambda line: None)
    assert trainer._device_loops() == device_loop  # pylint: disable=protected-access
    results[device_loop] = (result["loss"], model)
  assert results[True][0] == pytest.approx(results[False][0], rel=1e-5)
  _weights_close(results[True][1], results[False][1])


def _prefetch_buffer_sizes(dataset):
  """The buffer sizes of the dataset's PrefetchDataset ops (its serialized graph)."""
  graph = tf.compat.v1.GraphDef.FromString(
      dataset._as_serialized_graph().numpy())  # pylint: disable=protected-access
  consts = {n.name: n for n in graph.node if n.op == "Const"}
  return [int(tf.make_ndarray(consts[n.input[1].split(":")[0]].attr["value"].tensor))
          for n in graph.node if n.op == "PrefetchDataset"]


@pytest.mark.parametrize("device_loop", [True, False])
def test_the_device_loop_keeps_a_host_calls_batches_ready(tmp_path, device_loop):
  """With the device loop, tf.data buffers ``steps_per_loop`` batches (the next call's, made
  while the device runs: bench/bench_device_loop_input.py); without it the input is as given."""
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, steps_per_loop=5, device_loop=device_loop)
  dataset = trainer.input_dataset_fn(tiny_loop.dataset_fn())(tf.distribute.InputContext())
  assert _prefetch_buffer_sizes(dataset) == ([5] if device_loop else [])


def test_host_calls_hold_at_most_the_stack_limit_of_batches(device_looped, tmp_path,
                                                             monkeypatch):
  """A host call stacks no more than DEVICE_LOOP_STACK_BYTES of batches: here room for 2 of
  steps_per_loop 3, so 7 updates run in calls of 2, 2, 2 and 1, to the weights of calls of
  3, 3 and 1; tf.data buffers 2."""
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  spec = tiny_loop.dataset_fn()(None).element_spec
  batch_bytes = sum(s.shape.num_elements() * s.dtype.size for s in tf.nest.flatten(spec))
  monkeypatch.setattr(loop, "DEVICE_LOOP_STACK_BYTES", int(2.5 * batch_bytes))
  calls = []
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, device_loop=True)
  assert trainer.steps_per_call(spec) == 2
  dataset = trainer.input_dataset_fn(tiny_loop.dataset_fn())(tf.distribute.InputContext())
  assert _prefetch_buffer_sizes(dataset) == [2]
  build = trainer.build_train_loop

  def counted():
    train_loop = build()
    return lambda iterator, n: calls.append(int(n)) or train_loop(iterator, n)
  trainer.build_train_loop = counted
  result = trainer.train(tiny_loop.dataset_fn(), progress=lambda line: None)
  assert calls == [2, 2, 2, 1]
  # The stack itself holds 2 batches (one list of 2 per feature).
  graph = trainer._train_loop.compiled.get_concrete_function(  # pylint: disable=protected-access
      iter(tiny_loop.dataset_fn()(None)), tf.constant(2)).graph
  reserved = [int(tf.get_static_value(op.inputs[1])) for op in graph.get_operations()
              if op.type == "TensorListReserve"]
  assert len(reserved) == len(spec) and set(reserved) == {2}
  _, model, _, looped_result = device_looped
  assert result["loss"] == pytest.approx(looped_result["loss"], rel=1e-5)
  _weights_close(trainer.model, model)


def test_a_distributed_iterators_per_replica_specs_are_read():
  """The element spec of a several-replica iterator (PerReplicaSpec, no .shape of its own)."""
  from tensorflow.python.distribute import values  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  static = values.PerReplicaSpec(tf.TensorSpec([4, 12], tf.int32), tf.TensorSpec([4, 12], tf.int32))
  ragged = values.PerReplicaSpec(tf.TensorSpec([None, 12], tf.int32),
                                 tf.TensorSpec([None, 12], tf.int32))
  assert loop._static({"input_ids": static})  # pylint: disable=protected-access
  assert not loop._static({"input_ids": ragged})  # pylint: disable=protected-access
