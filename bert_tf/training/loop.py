"""The custom training loop: ``steps_per_loop`` steps in-graph per host call, as TPUs need.

A *task* says what a model computes and how its loss is normalised:

  ``task.loss_denominators(features)`` -> {name: float32 scalar}, from labels/weights alone
  ``task.loss_numerators(outputs, features)`` -> {name: float32 scalar}
  ``task.denominator_offsets`` (optional) -> {name: float} added once to the global sum
  loss = sum over names of numerator / (denominator + offset)

Splitting the loss this way makes it exactly the loss of the whole *global* batch whatever
the number of replicas and micro-batches: denominators are summed over replicas (and over
the micro-batches of gradient accumulation) before any numerator is divided by them. So
2 replicas, or 4 accumulated micro-batches, give the same update as one device with the whole
batch. (Google's TPU code normalised the masked-LM loss per core; on one device the two are
the same.)

Checkpoints are ``tf.train.CheckpointManager`` checkpoints of the model (dropout's random
state included) and the optimizer (with its step counter), so a killed run restarted with the
same command resumes at the same step and learning rate; the input skips the batches already
consumed, so with a deterministic input (seeded shuffles) it resumes at the same place in the
data too. Checkpoint files get new names (``ckpt-<step>``) and the ``checkpoint`` index is
updated only after they are whole, so a kill mid-save leaves the previous checkpoint in use.
"""

import dataclasses
import datetime
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import progress
from bert_tf.errors import BertTfError
from bert_tf.modeling import checkpoints
from bert_tf.modeling import layers


@dataclasses.dataclass
class LoopConfig:
  """How to run a training loop (units: optimizer updates unless said otherwise)."""
  model_dir: str
  num_train_steps: int
  steps_per_loop: int = 1000
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  gradient_accumulation_steps: int = 1
  jit_compile: bool = False
  # For the progress line: examples in one update (global batch) and tokens per example.
  global_batch_size: int = None
  seq_length: int = None
  # FLOPs of one training example (forward + backward), for MFU; peak FLOP/s of all devices.
  train_flops_per_example: float = None
  peak_flops: float = None


def _split(features, parts):
  """Splits every feature along the batch axis into ``parts`` equal micro-batches."""
  def split_one(x):
    batch = x.shape[0]
    if batch is not None and batch % parts:
      raise ValueError(f"per-replica batch {batch} is not divisible by "
                       f"gradient_accumulation_steps {parts}")
    return tf.split(x, parts, axis=0)
  pieces = {k: split_one(v) for k, v in features.items()}
  return [{k: v[i] for k, v in pieces.items()} for i in range(parts)]


def total_loss(task, outputs, features, denominators):
  numerators = task.loss_numerators(outputs, features)
  return tf.add_n([numerators[k] / denominators[k] for k in sorted(numerators)])


class Trainer:
  """Builds the distributed train step for ``model``/``optimizer`` and runs it.

  Create the model and the optimizer under ``strategy.scope()`` first.
  """

  def __init__(self, strategy, task, model, optimizer, config):
    self.strategy = strategy
    self.task = task
    self.model = model
    self.optimizer = optimizer
    self.config = config
    with strategy.scope():
      optimizer.build(model.trainable_variables)
    self._train_loop = None

  # === One update on one replica ===

  def _gradients(self, features, denominators):
    """Loss and gradients of one micro-batch (XLA-compiled when ``jit_compile``)."""
    with tf.GradientTape() as tape:
      outputs = self.model(features, training=True)
      loss = total_loss(self.task, outputs, features, denominators)
      scaled = (self.optimizer.scale_loss(loss)
                if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) else loss)
    grads = tape.gradient(scaled, self.model.trainable_variables)
    return loss, grads

  def _replica_step(self, features):
    ctx = tf.distribute.get_replica_context()
    denominators = self.task.loss_denominators(features)
    # The global batch's denominators: every replica divides by the same numbers.
    offsets = getattr(self.task, "denominator_offsets", {})
    denominators = {k: ctx.all_reduce(tf.distribute.ReduceOp.SUM, v) + offsets.get(k, 0.0)
                    for k, v in denominators.items()}
    gradients_fn = self._compiled_gradients
    k = self.config.gradient_accumulation_steps
    if k == 1:
      loss, grads = gradients_fn(features, denominators)
    else:
      loss, grads = None, None
      for micro in _split(features, k):
        micro_loss, micro_grads = gradients_fn(micro, denominators)
        # Embedding gradients come as IndexedSlices; dense sums are what the update uses.
        micro_grads = [tf.convert_to_tensor(g) if g is not None else None for g in micro_grads]
        loss = micro_loss if loss is None else loss + micro_loss
        grads = micro_grads if grads is None else [
            a + b if a is not None else None for a, b in zip(grads, micro_grads)]
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return loss  # this replica's share of the global-batch loss

  def build_train_loop(self):
    """A tf.function running ``n`` updates in-graph: ``loop(iterator, n) -> mean loss``."""
    self._compiled_gradients = tf.function(self._gradients,
                                           jit_compile=bool(self.config.jit_compile))
    if self.config.jit_compile:
      # The update of each variable as one XLA computation too (bert_tf's optimizers).
      inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
      if hasattr(inner, "fused_update"):
        inner.fused_update = True
      # Dropout masks from an integer hash XLA fuses, not its slow Philox expansion.
      layers.set_dropout_rng(self.model, "hash")
    strategy = self.strategy

    @tf.function
    def train_loop(iterator, num_steps):
      loss_sum = tf.constant(0.0)
      for _ in tf.range(num_steps):
        per_replica = strategy.run(self._replica_step, args=(next(iterator),))
        loss_sum += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
      return loss_sum / tf.cast(num_steps, tf.float32)

    self._train_loop = train_loop
    return train_loop

  # === The host loop ===

  def current_learning_rate(self):
    optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
    lr = optimizer.learning_rate
    return float(lr.numpy() if hasattr(lr, "numpy") else lr)

  def train(self, dataset_fn, init_fn=None, summary_writer=None, progress=None):
    """Trains to ``config.num_train_steps`` updates, resuming from ``model_dir`` if possible.

    Args:
      dataset_fn: ``input_context -> tf.data.Dataset`` of per-replica batches (for
        ``strategy.distribute_datasets_from_function``); it must repeat.
      init_fn: called with the model when there is no checkpoint to resume from (e.g. to
        load ``init_checkpoint``).
      summary_writer: optional ``tf.summary`` writer for TensorBoard scalars.
      progress: a function taking a line of text (default: ``absl.logging.info``).
    Returns:
      {"global_step", "loss"} of the last loop.
    """
    c = self.config
    progress = progress or (lambda line: logging.info("%s", line))
    checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_variables(self.model),
                                     optimizer=self.optimizer,
                                     random_states=random_states(self.model))
    manager = tf.train.CheckpointManager(
        checkpoint, c.model_dir, max_to_keep=c.keep_checkpoint_max,
        step_counter=self.optimizer.iterations)
    if manager.latest_checkpoint:
      checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
      progress(f"resumed from {manager.latest_checkpoint} at step "
               f"{int(self.optimizer.iterations.numpy())}")
    elif init_fn is not None:
      init_fn(self.model)
    step = int(self.optimizer.iterations.numpy())

    def resumed_dataset_fn(ctx):
      # Distributed iterators cannot be checkpointed, so a resumed run skips the batches the
      # steps so far consumed: with a deterministic dataset (seeded shuffles) it continues
      # exactly where the killed run was.
      dataset = dataset_fn(ctx)
      if step:
        dataset = dataset.skip(step * ctx.num_replicas_in_sync // ctx.num_input_pipelines)
      return dataset

    iterator = iter(self.strategy.distribute_datasets_from_function(resumed_dataset_fn))
    train_loop = self._train_loop or self.build_train_loop()
    step = int(self.optimizer.iterations.numpy())
    start_step, start_time = step, time.time()
    loss = float("nan")
    while step < c.num_train_steps:
      n = min(c.steps_per_loop, c.num_train_steps - step)
      if c.save_checkpoints_steps:
        n = min(n, c.save_checkpoints_steps - step % c.save_checkpoints_steps)
      loop_start = time.time()
      loss = float(train_loop(iterator, tf.constant(n, tf.int32)).numpy())
      elapsed = time.time() - loop_start
      step = int(self.optimizer.iterations.numpy())
      if not np.isfinite(loss):
        progress(f"warning: loss is {loss} at step {step}")
      stats = self._stats(step, n, elapsed, start_step, start_time, loss)
      progress(format_progress(stats, c.num_train_steps))
      if summary_writer is not None:
        with summary_writer.as_default(step=step):
          for key in ("loss", "learning_rate", "examples_per_second", "tokens_per_second",
                      "mfu"):
            if stats.get(key) is not None:
              tf.summary.scalar(key, stats[key])
        summary_writer.flush()
      if c.save_checkpoints_steps and step % c.save_checkpoints_steps == 0:
        manager.save(checkpoint_number=step)
    if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(f"-{step}"):
      manager.save(checkpoint_number=step, check_interval=False)
    return {"global_step": step, "loss": loss}

  def _stats(self, step, n, elapsed, start_step, start_time, loss):
    c = self.config
    stats = {"step": step, "loss": loss, "learning_rate": self.current_learning_rate()}
    if c.global_batch_size and elapsed > 0:
      examples = n * c.global_batch_size
      stats["examples_per_second"] = examples / elapsed
      if c.seq_length:
        stats["tokens_per_second"] = examples * c.seq_length / elapsed
      if c.train_flops_per_example and c.peak_flops:
        stats["mfu"] = c.train_flops_per_example * examples / elapsed / c.peak_flops
    done = step - start_step
    if done > 0:
      rate = (time.time() - start_time) / done
      stats["eta_seconds"] = rate * (c.num_train_steps - step)
    return stats


def make_optimizer(strategy, learning_rate, num_train_steps, num_warmup_steps,
                   dtype="float32", optimizer_kwargs=None):
  """``optimization.create_optimizer`` under the strategy's scope, wrapped for dynamic loss
  scaling when ``dtype`` is float16 (the one place every training script builds it)."""
  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  with strategy.scope():
    optimizer = optimization.create_optimizer(
        learning_rate, num_train_steps, num_warmup_steps, **(optimizer_kwargs or {}))
    if dtype == "float16":
      optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
  return optimizer


def random_states(model):
  """The state variables of the model's random generators (dropout), for checkpointing.

  Keras keeps them outside the model's tracked weights; without them a resumed run would
  draw different dropout masks than an uninterrupted one.
  """
  states = []
  for layer in model._flatten_layers():  # pylint: disable=protected-access
    generator = getattr(layer, "seed_generator", None)
    if generator is not None and getattr(generator, "state", None) is not None:
      states.append(generator.state)
  return states


def format_progress(stats, num_train_steps):
  """``step 100/1000 loss 7.1234 lr 1.00e-04 512.3 examples/s 65574 tokens/s ETA 0:01:23``."""
  parts = [f"step {stats['step']}/{num_train_steps}", f"loss {stats['loss']:.4f}",
           f"lr {stats['learning_rate']:.3e}"]
  if "examples_per_second" in stats:
    parts.append(f"{stats['examples_per_second']:.1f} examples/s")
  if "tokens_per_second" in stats:
    parts.append(f"{stats['tokens_per_second']:.0f} tokens/s")
  if "mfu" in stats:
    parts.append(f"MFU {100 * stats['mfu']:.1f}%")
  if "eta_seconds" in stats:
    parts.append(f"ETA {datetime.timedelta(seconds=int(stats['eta_seconds']))}")
  return " ".join(parts)


def evaluate(strategy, model, task, dataset_fn, max_steps=None):
  """Streaming evaluation: ``task.eval_metrics`` sums over every batch (and replica).

  ``task.eval_metrics(outputs, features)`` returns {name: (value_sum, weight_sum)}; the result
  is {name: value_sum / weight_sum} over the whole dataset (or ``max_steps`` batches).
  """
  dataset = strategy.distribute_datasets_from_function(dataset_fn)

  def replica_fn(features):
    outputs = model(features, training=False)
    return task.eval_metrics(outputs, features)

  @tf.function
  def step_fn(batch):
    per_replica = strategy.run(replica_fn, args=(batch,))
    return tf.nest.map_structure(
        lambda x: strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None), per_replica)

  totals, steps = None, 0
  for batch in progress.track(dataset, max_steps, "eval batches"):
    if max_steps is not None and steps >= max_steps:
      break
    sums = tf.nest.map_structure(lambda x: float(x.numpy()), step_fn(batch))
    totals = sums if totals is None else {
        k: (totals[k][0] + v[0], totals[k][1] + v[1]) for k, v in sums.items()}
    steps += 1
  if totals is None:
    raise BertTfError("evaluation dataset is empty (fewer examples than one batch?)")
  return {k: s / w if w else float("nan") for k, (s, w) in totals.items()}


def latest_checkpoint(model_dir):
  """The newest training checkpoint in ``model_dir``, or None."""
  return tf.train.latest_checkpoint(model_dir) if tf.io.gfile.isdir(model_dir) else None


def restore_model(model, model_dir_or_checkpoint):
  """Restores just the model from a training checkpoint (e.g. for eval after training)."""
  path = model_dir_or_checkpoint
  if tf.io.gfile.isdir(path):
    path = tf.train.latest_checkpoint(path)
    if path is None:
      raise BertTfError(f"no training checkpoint in {model_dir_or_checkpoint!r}")
  checkpoints.load_bert_tf_checkpoint(model, path)
  return path


def write_model_files(bert_config, folder, vocab_file=None):
  """``folder/bert_config.json`` and (when given) ``folder/vocab.txt``, so that the folder
  loads alone (``bert_tf.load(folder)``, ``python -m bert_tf ... --model=folder``): the config
  and vocab travel with the weights. Written through temporary names; a vocab that already is
  ``folder/vocab.txt`` is left as it is."""
  from bert_tf import fileio  # pylint: disable=import-outside-toplevel
  fileio.makedirs(folder)
  bert_config.to_json_file(os.path.join(folder, "bert_config.json"))
  target = os.path.join(folder, "vocab.txt")
  if vocab_file and os.path.abspath(vocab_file) != os.path.abspath(target):
    fileio.copy_atomically(vocab_file, target)


def export_google_folder(model, bert_config, output_dir, global_step, vocab_file=None):
  """``output_dir/google``: ``bert_model.ckpt`` (Google's names), ``bert_config.json`` and,
  when given, ``vocab.txt``: a folder Google's code, bert_tf and ``bert_tf.load`` all read."""
  google_dir = os.path.join(output_dir, "google")
  checkpoints.save_google_checkpoint(model, os.path.join(google_dir, "bert_model.ckpt"),
                                     global_step=global_step)
  write_model_files(bert_config, google_dir, vocab_file)
  return google_dir


def write_eval_results(path, results):
  """``eval_results.txt`` as the original writes it: ``key = value`` lines, sorted by key."""
  from bert_tf import fileio  # pylint: disable=import-outside-toplevel
  with fileio.atomic_write(path) as f:
    for key in sorted(results):
      f.write(f"{key} = {results[key]}\n")


def summary_writer(model_dir, name="train"):
  return tf.summary.create_file_writer(os.path.join(model_dir, "summaries", name))
