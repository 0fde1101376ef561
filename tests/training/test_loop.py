"""The training loop: loss falls; 2 replicas = 1 device; accumulation = large batch; resume.

The reference in each case is an independent run of the same arithmetic on one device with
one batch (the definition of the global-batch update), not a stored number.
"""

import itertools
import shutil
import types

import numpy as np
import pytest
import keras
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.training import distribution, loop
from bert_tf.training.pretraining import PretrainingTask
from tests.reference import google_models

CONFIG = google_models.tiny_config_dict(hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)


def _examples(n=16, seed=0):
  return google_models.random_pretraining_features(CONFIG, batch_size=n, seq_length=12,
                                                   num_predictions=4, seed=seed)


def _dataset_fn(global_batch, n=16):
  examples = _examples(n)

  def dataset_fn(ctx):
    per_replica = ctx.get_per_replica_batch_size(global_batch) if ctx else global_batch
    ds = tf.data.Dataset.from_tensor_slices(examples).repeat()
    return ds.batch(per_replica, drop_remainder=True)

  return dataset_fn


def _train(tmp_path, strategy=None, steps=4, global_batch=8, accumulation=1, config=CONFIG,
           steps_per_loop=2, save_every=2, init_weights=None, lr=1e-3, sgd=False, examples=16,
           clip_norm=optimization.DEFAULT_CLIP_NORM, dtype=None, initial_scale=None,
           dataset_fn=None):
  strategy = strategy or tf.distribute.get_strategy()
  keras.utils.set_random_seed(7)
  task = PretrainingTask(BertConfig.from_dict(config))
  with strategy.scope():
    model = task.build_model("mixed_float16" if dtype == "float16" else None)
    if init_weights is not None:
      model.set_weights(init_weights)
    if sgd:
      # Plain SGD keeps the comparison linear: Adam's 1/(sqrt(v) + eps) would magnify
      # summation-order rounding in near-zero gradients into visible differences.
      optimizer = keras.optimizers.SGD(learning_rate=0.5)
    else:
      optimizer = optimization.create_optimizer(lr, num_train_steps=20, num_warmup_steps=2,
                                                clip_norm=clip_norm)
    if dtype == "float16":  # as loop.make_optimizer, with a chosen first loss scale
      optimizer = keras.optimizers.LossScaleOptimizer(optimizer,
                                                      initial_scale=initial_scale or 2.0 ** 15)
  trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path), num_train_steps=steps, steps_per_loop=steps_per_loop,
      save_checkpoints_steps=save_every, gradient_accumulation_steps=accumulation,
      global_batch_size=global_batch, seq_length=12))
  lines = []
  result = trainer.train(dataset_fn or _dataset_fn(global_batch, examples),
                         progress=lines.append)
  return model, result, lines


def test_loss_falls_and_progress_is_reported(tmp_path):
  _, first, _ = _train(tmp_path / "a", steps=1, steps_per_loop=1)
  model, last, lines = _train(tmp_path / "b", steps=12, steps_per_loop=4, save_every=4,
                              lr=3e-3)
  assert last["global_step"] == 12
  assert last["loss"] < first["loss"] - 0.5
  assert lines[-1].startswith("step 12/12 loss ")
  for needle in (" lr ", " examples/s", " tokens/s", "ETA "):
    assert needle in lines[-1]
  # Checkpoints every 4 steps, kept by the manager.
  assert loop.latest_checkpoint(str(tmp_path / "b")).endswith("ckpt-12")


def test_eta_leaves_out_the_first_loops_warm_up(tmp_path, monkeypatch):
  # The first loop compiles the step (and, resumed, skips the input already read): here it
  # takes 1000 s of a clock that otherwise ticks 1 s per reading. The first line can only
  # count it; later lines' ETA is (steps left) x (time per step since the first loop ended),
  # a few seconds, not the 1000 s spread over the steps so far.
  readings = itertools.count(1000)
  first = [0]

  def clock():
    return first.pop() if first else next(readings)

  monkeypatch.setattr(loop, "time", types.SimpleNamespace(time=clock))
  _, _, lines = _train(tmp_path, steps=4, steps_per_loop=1)
  etas = [line.split("ETA ")[1].split()[0] for line in lines if line.startswith("step ")]
  def seconds(eta):
    h, m, s = map(int, eta.split(":"))
    return 3600 * h + 60 * m + s
  assert len(etas) == 4
  assert seconds(etas[0]) > 3 * 1000  # 3 steps left at the first loop's 1000+ s
  assert all(seconds(eta) < 30 for eta in etas[1:]), etas
  assert seconds(etas[-1]) == 0


def test_two_replicas_equal_one_device(tmp_path):
  cpus = tf.config.list_logical_devices("CPU")
  if len(cpus) < 2:
    pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
  one_model, one, _ = _train(tmp_path / "one", sgd=True)
  mirrored = distribution.get_strategy("mirrored")
  assert mirrored.num_replicas_in_sync == 2
  two_model, two, _ = _train(tmp_path / "two", strategy=mirrored, sgd=True)
  np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-5)
  for a, b in zip(one_model.get_weights(), two_model.get_weights()):
    np.testing.assert_allclose(a, b, atol=1e-6)
  # The same with Google's optimizer (adaptive, so rounding is magnified: looser tolerance).
  one_model, one, _ = _train(tmp_path / "one_adam")
  two_model, two, _ = _train(tmp_path / "two_adam", strategy=mirrored)
  np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-4)


def test_accumulation_equals_large_batch(tmp_path):
  big_model, big, _ = _train(tmp_path / "big", global_batch=8, sgd=True)
  acc_model, acc, _ = _train(tmp_path / "acc", global_batch=8, accumulation=4, sgd=True)
  np.testing.assert_allclose(acc["loss"], big["loss"], rtol=1e-5)
  for a, b in zip(big_model.get_weights(), acc_model.get_weights()):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_accumulation_and_replicas_clip_as_one_large_batch(tmp_path):
  """With the clip active (the original's optimizer, a clip norm far below the gradients'):
  4 micro-batches, and 2 replicas, update as one batch. The embeddings' gradients (a row per
  token) were measured row by row on one batch but summed on micro-batches: another clip."""
  run = dict(global_batch=8, clip_norm=0.01, steps=2, lr=1e-2)
  big_model, big, _ = _train(tmp_path / "big", **run)
  acc_model, acc, _ = _train(tmp_path / "acc", accumulation=4, **run)
  runs = [(acc_model, acc)]
  if len(tf.config.list_logical_devices("CPU")) >= 2:
    runs.append(_train(tmp_path / "two", strategy=distribution.get_strategy("mirrored"),
                       **run)[:2])
  for model, result in runs:
    np.testing.assert_allclose(result["loss"], big["loss"], rtol=1e-5)
    for a, b in zip(big_model.get_weights(), model.get_weights()):
      np.testing.assert_allclose(a, b, atol=1e-6)


def test_resume_gives_the_same_weights_as_one_run(tmp_path):
  """Stop at step 3, start again with a larger num_train_steps: same result as one run of 6,
  dropout included (its random state is checkpointed; the input skips the batches used).
  Every batch of the run holds other examples (6 x 8, none repeated), so a skip off by any
  number of batches trains on other data and fails the comparison."""
  config = google_models.tiny_config_dict()
  run = dict(steps_per_loop=1, save_every=1, config=config, examples=6 * 8)
  straight, _, _ = _train(tmp_path / "straight", steps=6, **run)
  _train(tmp_path / "resumed", steps=3, **run)
  resumed, result, lines = _train(tmp_path / "resumed", steps=6, **run)
  assert lines[0].startswith("resumed from") and "at step 3" in lines[0]
  assert result["global_step"] == 6 and np.isfinite(result["loss"])
  for a, b in zip(straight.get_weights(), resumed.get_weights()):
    np.testing.assert_array_equal(a, b)
  # Again with fewer steps than done: nothing to train, and said so (it was silent).
  again, result, lines = _train(tmp_path / "resumed", steps=4, **run)
  # No loss either (it was nan, which reads as a diverged run).
  assert result["global_step"] == 6 and result["loss"] is None and lines[:2] == [
      lines[0], "training already went to step 6, past the 4 this run plans: nothing to "
      "train; what follows uses the weights of step 6"]
  # (No input is skipped "to go on with the data" where nothing goes on; nor for a finished
  # run called again.)
  for steps in (4, 6):
    _, _, lines = _train(tmp_path / "resumed", steps=steps, **run)
    assert not [line for line in lines if line.startswith("input: skipping")], lines
  for a, b in zip(straight.get_weights(), again.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_a_dataset_fn_that_takes_skip_batches_skips_each_pipelines_share(tmp_path):
  """A resumed run gives a dataset_fn that takes ``skip_batches`` (run_pretraining.py's) the
  per-replica batches its pipeline read before the checkpoint: with 2 replicas in one
  pipeline, 2 per update (an oracle here: ``.skip`` of its own batches). Every batch holds
  other examples, so another count trains on other data and fails the comparison."""
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
  mirrored = distribution.get_strategy("mirrored")
  base = _dataset_fn(8, 6 * 8)
  calls = []

  def dataset_fn(ctx, skip_batches=0):
    calls.append((ctx.num_input_pipelines, ctx.num_replicas_in_sync, skip_batches))
    return base(ctx).skip(skip_batches)

  run = dict(strategy=mirrored, steps_per_loop=1, save_every=1, examples=6 * 8)
  straight, _, _ = _train(tmp_path / "straight", steps=6, **run)
  _train(tmp_path / "resumed", steps=3, dataset_fn=dataset_fn, **run)
  assert calls == [(1, 2, 0)], calls  # (a run from step 0 skips nothing)
  calls.clear()
  resumed, _, lines = _train(tmp_path / "resumed", steps=6, dataset_fn=dataset_fn, **run)
  assert calls == [(1, 2, 6)], calls
  assert "input: skipping the 3 batches read before step 3, to go on with the data where the " \
         "run was" in lines
  for a, b in zip(straight.get_weights(), resumed.get_weights()):
    np.testing.assert_array_equal(a, b)


def test_which_dataset_fns_take_skip_batches():
  import functools  # pylint: disable=import-outside-toplevel

  def takes(ctx, skip_batches=0):
    return ctx, skip_batches

  class Callable:
    def __call__(self, ctx, *, skip_batches=0):
      return ctx, skip_batches

  assert loop.takes_skip_batches(takes)
  assert loop.takes_skip_batches(functools.partial(takes))
  assert loop.takes_skip_batches(Callable())
  assert not loop.takes_skip_batches(lambda ctx: ctx)
  assert not loop.takes_skip_batches(lambda ctx, **kwargs: ctx)  # (may not pass it on)
  def positional(ctx, skip_batches=0, /):  # (a keyword cannot give it)
    return ctx, skip_batches

  assert not loop.takes_skip_batches(positional)
  assert not loop.takes_skip_batches(dict)  # (no signature)


def test_eval_metrics_match_definitions(tmp_path):
  """Streaming eval over 2 batches equals the definitions computed by hand in numpy. The
  padded prediction slots (weight 0) are labelled with what the model predicts there, so
  that counting them would change the masked LM accuracy (the original's is weighted)."""
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model()
  examples = _examples(8)
  outputs = model(examples, training=False)
  lp = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy()
  w = examples["masked_lm_weights"]
  padded = w == 0
  examples["masked_lm_ids"] = np.where(padded, lp.argmax(-1), examples["masked_lm_ids"]).astype(
      examples["masked_lm_ids"].dtype)
  ids = examples["masked_lm_ids"]
  ds_fn = lambda ctx: tf.data.Dataset.from_tensor_slices(examples).batch(4)
  metrics = loop.evaluate(tf.distribute.get_strategy(), model, task, ds_fn)
  nll = -np.take_along_axis(lp, ids[..., None], -1)[..., 0]
  acc = (lp.argmax(-1) == ids)
  assert padded.any() and acc[padded].all()
  assert not np.isclose(acc.mean(), (w * acc).sum() / w.sum())  # unweighted would differ
  np.testing.assert_allclose(metrics["masked_lm_accuracy"], (w * acc).sum() / w.sum(),
                             rtol=1e-6)
  np.testing.assert_allclose(metrics["masked_lm_loss"], (w * nll).sum() / w.sum(), rtol=1e-5)
  nlp = tf.nn.log_softmax(outputs["next_sentence_logits"]).numpy()
  labels = examples["next_sentence_labels"][:, 0]
  nsp_nll = -nlp[np.arange(8), labels]
  np.testing.assert_allclose(metrics["next_sentence_loss"], nsp_nll.mean(), rtol=1e-5)
  np.testing.assert_allclose(metrics["next_sentence_accuracy"],
                             (nlp.argmax(-1) == labels).mean(), rtol=1e-6)
  batch_losses = [(w[s] * nll[s]).sum() / (w[s].sum() + 1e-5) + nsp_nll[s].mean()
                  for s in (slice(0, 4), slice(4, 8))]
  np.testing.assert_allclose(metrics["loss"], np.mean(batch_losses), rtol=1e-5)


def test_jit_compile_loop_matches_eager(tmp_path):
  """--jit_compile: the loop's XLA-compiled gradients give the same training as without."""
  plain_model, plain, _ = _train(tmp_path / "plain", sgd=True)
  keras.utils.set_random_seed(7)
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model()
  optimizer = keras.optimizers.SGD(learning_rate=0.5)
  trainer = loop.Trainer(tf.distribute.get_strategy(), task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path / "xla"), num_train_steps=4, steps_per_loop=2,
      save_checkpoints_steps=2, jit_compile=True))
  xla = trainer.train(_dataset_fn(8), progress=lambda line: None)
  np.testing.assert_allclose(xla["loss"], plain["loss"], rtol=1e-4)
  for a, b in zip(plain_model.get_weights(), model.get_weights()):
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_eval_results_are_written_as_the_original_wrote_them(tmp_path):
  """The original wrote ``"%s = %s" % (key, str(value))`` of the Estimator's results: float32
  numpy metrics (str: the shortest text of the float32) and an integer global_step. Hand-made:
  1/3 as float32 is 0.33333334, 0.6822794914245606 is 0.68227947."""
  path = tmp_path / "eval_results.txt"
  loop.write_eval_results(str(path), {"eval_loss": 0.6822794914245606, "global_step": 12,
                                      "eval_accuracy": 1 / 3, "f1": 100.0,
                                      "eval_spearman": float("nan"), "steps": np.int64(5)})
  assert path.read_text() == ("eval_accuracy = 0.33333334\neval_loss = 0.68227947\n"
                              "eval_spearman = nan\nf1 = 100.0\nglobal_step = 12\nsteps = 5\n")
  loop.write_eval_results(str(path), {"f1": 81.20151371807, "best_f1_thresh": -1.23456789},
                          float32=False)
  assert path.read_text() == "best_f1_thresh = -1.23456789\nf1 = 81.20151371807\n"


def test_float16_skipped_updates_resume_at_the_data_they_read(tmp_path):
  """float16's loss scaling skips updates whose gradients overflow (a first scale of 2**24:
  the first updates overflow, each halves it); each skipped update read its batch. A resumed
  run skipped only the applied updates' batches and trained on batches the uninterrupted run
  had passed (every batch holds other examples)."""
  run = dict(steps_per_loop=1, save_every=1, examples=16 * 8, dtype="float16",
             initial_scale=2.0 ** 24)
  straight, _, _ = _train(tmp_path / "straight", steps=6, **run)
  _train(tmp_path / "resumed", steps=3, **run)
  resumed, _, lines = _train(tmp_path / "resumed", steps=6, **run)
  assert lines[0].startswith("resumed from") and "at step 3" in lines[0]
  reader = tf.train.load_checkpoint(loop.latest_checkpoint(str(tmp_path / "straight")))
  skipped = reader.get_tensor("skipped_updates/.ATTRIBUTES/VARIABLE_VALUE")
  assert skipped >= 3  # the test means something: updates were skipped
  for a, b in zip(straight.get_weights(), resumed.get_weights()):
    np.testing.assert_array_equal(a, b)


def _restores_the_saved_slots(folder, dtype, prefix_key):
  """Restores ``folder``'s latest checkpoint into a fresh model and optimizer of ``dtype``
  (``training_checkpoint``, as a resume does): every optimizer variable (step, m, v) equals
  the checkpoint's, which names them ``<prefix_key>/_variables/<i>``."""
  task = PretrainingTask(BertConfig.from_dict(CONFIG))
  model = task.build_model("mixed_float16" if dtype == "float16" else None)
  optimizer = optimization.create_optimizer(1e-3, num_train_steps=20, num_warmup_steps=2)
  if dtype == "float16":
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  optimizer.build(model.trainable_variables)
  prefix = loop.latest_checkpoint(str(folder))
  skipped = tf.Variable(0, dtype=tf.int64)
  full = loop.training_checkpoint(model, optimizer, skipped)
  restorer = loop.training_checkpoint(model, optimizer, skipped, prefix) or full
  restorer.restore(prefix).expect_partial().assert_existing_objects_matched()
  saved = tf.train.load_checkpoint(prefix)
  inner = getattr(optimizer, "inner_optimizer", optimizer)
  assert inner.iterations.numpy() == saved.get_tensor(
      f"{prefix_key}/_iterations/.ATTRIBUTES/VARIABLE_VALUE") > 0
  for i, variable in enumerate(inner.variables[1:], start=1):
    np.testing.assert_array_equal(variable.numpy(), saved.get_tensor(
        f"{prefix_key}/_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE"))
  assert max(np.abs(v.numpy()).max() for v in inner.variables[1:]) > 0


def test_dtype_can_change_on_resume(tmp_path, monkeypatch):
  """float32 -> float16 -> float32 resumes keep the step and the optimizer's slots (the
  loss-scale wrapper named the optimizer otherwise: 'all checkpoints damaged'); a float16
  checkpoint written with the wrapper as the optimizer (before) resumes too."""
  folder = tmp_path / "run"
  _train(folder, steps=2)
  _restores_the_saved_slots(folder, "float16", "optimizer")
  _, _, lines = _train(folder, steps=4, dtype="float16")
  assert lines[0].startswith("resumed from") and "at step 2" in lines[0]
  _restores_the_saved_slots(folder, None, "optimizer")
  _, third, lines = _train(folder, steps=6)
  assert lines[0].startswith("resumed from") and "at step 4" in lines[0]
  assert third["global_step"] == 6 and np.isfinite(third["loss"])
  # The earlier layout: a float16 run's checkpoint with the wrapper as "optimizer".
  legacy = tmp_path / "legacy"
  original = loop.training_checkpoint
  monkeypatch.setattr(loop, "training_checkpoint", lambda model, optimizer, skipped, prefix=None: (
      None if prefix else tf.train.Checkpoint(
          model=checkpoints.trackable_variables(model), optimizer=optimizer,
          random_states=loop.random_states(model))))
  _train(legacy, steps=2, dtype="float16")
  monkeypatch.setattr(loop, "training_checkpoint", original)
  for dtype in ("float16", None):
    _restores_the_saved_slots(legacy, dtype, "optimizer/inner_optimizer")
    copy = tmp_path / f"legacy_{dtype}"
    shutil.copytree(legacy, copy)
    _, result, lines = _train(copy, steps=3, dtype=dtype)
    assert lines[0].startswith("resumed from") and "at step 2" in lines[0], lines[:2]
    assert result["global_step"] == 3
