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
A run resumes from the newest *readable* ``ckpt-N`` (``training.resume``): a garbage
state file or a damaged checkpoint is a one-line warning, never a silent restart at step 0.
"""

import dataclasses
import datetime
import inspect
import itertools
import os
import shutil
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import faults
from bert_tf import fileio
from bert_tf import optimization
from bert_tf import progress
from bert_tf import quiet
from bert_tf.errors import BertTfError
from bert_tf.modeling import checkpoints
from bert_tf.modeling import fused_attention
from bert_tf.modeling import heads
from bert_tf.modeling import layers
from bert_tf.modeling import placement
from bert_tf.progress import log_line
from bert_tf.training import distribution
from bert_tf.training import preflight
from bert_tf.training import xla_cache
# Resuming lives in training.resume; these names are part of loop's interface.
from bert_tf.training.resume import (  # noqa: F401  pylint: disable=unused-import
    clean_save_leftovers, continue_original_run, has_checkpoint, keep_original_checkpoints,
    latest_checkpoint, original_checkpoints, restore_newest_readable)


# Every run builds its Trainer's loop functions and its evaluation step anew and traces each
# once; so ``_all_finite`` (module level) for each run's new variables (bert_tf.quiet).
quiet.per_run_functions("Trainer.", "_all_finite ", "evaluate.<locals>.bert_tf_evaluate_step ")


@dataclasses.dataclass
class LoopConfig:
  """How to run a training loop (units: optimizer updates unless said otherwise)."""
  model_dir: str
  num_train_steps: int
  steps_per_loop: int = 1000
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5  # 0: keep every checkpoint (the original's convention)
  gradient_accumulation_steps: int = 1
  # True/False, or None: XLA where it pays (resolve_jit_compile).
  jit_compile: bool = None
  # For the progress line: examples in one update (global batch) and tokens per example.
  global_batch_size: int = None
  seq_length: int = None
  # FLOPs of one training example (forward + backward), for MFU; peak FLOP/s of all devices.
  train_flops_per_example: float = None
  peak_flops: float = None
  # The Trainer's device_loop and prefetch_to_device (None: its default).
  device_loop: bool = None
  prefetch_to_device: bool = None


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


def resolve_jit_compile(jit_compile, strategy=None):
  """``jit_compile`` as given, or for None whether to XLA-compile the train step here: yes
  with a GPU or a TPU (about 4x the non-XLA step on an H100, BENCHMARKS.md); no on CPU, where
  XLA's step is faster too but a plain CPU run keeps the original's optimizer arithmetic bit
  for bit and Philox dropout masks, with no compile on its first call."""
  if jit_compile is not None:
    return bool(jit_compile)
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return True
  return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


# The most bytes of batches one host call of the device loop stacks on the device (tf.data
# buffers as many on the host): BERT-Large phase 1 (b128) or 2 (b32) at 1,000 updates per call
# is about 0.22 GB; a larger steps_per_loop with large batches makes shorter calls.
DEVICE_LOOP_STACK_BYTES = 512 * 2**20


class Trainer:
  """Builds the distributed train step for ``model``/``optimizer`` and runs it.

  Create the model and the optimizer under ``strategy.scope()`` first. The step (the task's
  loss and metrics, the model, the optimizer) is traced without AutoGraph, as written: Python
  control flow in it must not depend on tensors' values (``tf.cond``/``tf.where`` do).
  """

  def __init__(self, strategy, task, model, optimizer, config):
    self.strategy = strategy
    self.task = task
    self.model = model
    self.optimizer = optimizer
    self.config = dataclasses.replace(
        config, jit_compile=resolve_jit_compile(config.jit_compile, strategy))
    fused_attention.check_training(getattr(model, "config", None), model.compute_dtype,
                                   self.config.jit_compile)
    if self.config.jit_compile:
      # Before the first XLA compile of the run (XLA reads its flags once per process).
      added = placement.set_gpu_xla_flags()
      if added:
        logging.info("XLA_FLAGS += %s (bert_tf's choice on a Hopper GPU; name a flag in "
                     "XLA_FLAGS to choose otherwise)", " ".join(added))
    with strategy.scope():
      optimizer.build(model.trainable_variables)
    self._train_loop = None
    self._non_finite_step = None  # set by each train loop: see build_train_loop
    self._compiled_update = None
    # Forward, backward and optimizer as one XLA computation (see _whole_update_compiles);
    # None: where it pays. Set before build_train_loop.
    self.whole_update = None
    # Whether tf.data copies the batches to the device ahead of the loop (see _prefetches):
    # None (the default): no, each update takes its batch as it comes (on an H100 faster than
    # the loop's own fetch-ahead, which is gone; prefetching is not measured yet,
    # BENCHMARKS.md); True: yes, where the whole update compiles. Set before
    # build_train_loop and make_iterator.
    self.prefetch_to_device = self.config.prefetch_to_device
    # Whether each host call's updates run as one XLA computation, a loop on the device over
    # the call's batches, stacked and copied once (see _device_loops): None (the default):
    # yes on a GPU where the whole update compiles, unless prefetch_to_device is set or the
    # batches' shape is not static (on an H100 it removed the ~10 ms host stall of each
    # BERT-Large update: BENCHMARKS.md, 2026-11-28); True: yes, where the whole update
    # compiles; False: no. Not with prefetch_to_device.
    self.device_loop = self.config.device_loop
    self._batch_spec = None  # the train iterator's element_spec, once make_iterator made it
    # float16 updates skipped for overflow so far (each read its batch), checkpointed: a
    # resumed run's data goes on after step + this many batches. On the host: the in-graph
    # loop counts it outside the replicas' step.
    with tf.device("/cpu:0"):
      self._skipped_updates = tf.Variable(0, dtype=tf.int64, trainable=False,
                                          name="skipped_updates")

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

  def _global_denominators(self, features, all_reduce):
    """The global batch's loss denominators (every replica divides by the same numbers):
    this replica's, summed over replicas by ``all_reduce``, plus the task's offsets."""
    offsets = getattr(self.task, "denominator_offsets", {})
    return {k: all_reduce(v) + offsets.get(k, 0.0)
            for k, v in self.task.loss_denominators(features).items()}

  def _replica_step(self, features):
    ctx = tf.distribute.get_replica_context()
    denominators = self._global_denominators(
        features, lambda v: ctx.all_reduce(tf.distribute.ReduceOp.SUM, v))
    gradients_fn = self._compiled_gradients
    k = self.config.gradient_accumulation_steps
    if k == 1 and self._compiled_update is not None:
      return self._compiled_update(features, denominators)
    if k == 1:
      loss, grads = gradients_fn(features, denominators)
    else:
      loss, grads = None, None
      for micro in _split(features, k):
        micro_loss, micro_grads = gradients_fn(micro, denominators)
        # Embedding gradients come as IndexedSlices; dense sums are what the update uses (and
        # the clip measures: k micro-batches, one batch).
        micro_grads = optimization.dense_gradients(micro_grads)
        loss = micro_loss if loss is None else loss + micro_loss
        grads = micro_grads if grads is None else [
            a + b if a is not None else None for a, b in zip(grads, micro_grads)]
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return loss  # this replica's share of the global-batch loss

  def _update(self, features, denominators):
    """Loss, gradients and the optimizer's update of one batch (one XLA computation)."""
    if self._prefetches():  # the batch in its wire format (_to_wire)
      features = tf.nest.map_structure(
          lambda t: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t, features)
    loss, grads = self._gradients(features, denominators)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return loss

  def _whole_update_compiles(self):
    """Whether one XLA computation holds the whole update: ``whole_update`` (None: with a GPU
    or TPU; on CPU XLA runs one big update computation slower than per-variable ones),
    jit_compile, one replica (no cross-replica all-reduce or mirrored variables to leave XLA
    for), no gradient accumulation, and bert_tf's own optimizer with its fused update (not
    the float16 loss-scale wrapper, whose skip-on-overflow logic stays in TensorFlow), on
    variables that are not mirrored (a one-device MirroredStrategy's updates go through merge
    calls)."""
    whole_update = self.whole_update
    if whole_update is None:
      whole_update = _gpu_visible()
    return (whole_update and bool(self.config.jit_compile)
            and self.strategy.num_replicas_in_sync == 1
            and self.config.gradient_accumulation_steps == 1
            and hasattr(self.optimizer, "fused_update")
            and not isinstance(self.strategy, tf.distribute.TPUStrategy)
            and not any(isinstance(getattr(v, "value", v), tf.distribute.DistributedValues)
                        for v in self.model.trainable_variables))

  def _prefetches(self):
    """Whether tf.data copies each batch to the device in its own thread, two batches ahead of
    the loop (``prefetch_to_device``; ``make_iterator``), on the whole-update path only.

    Why it may pay: with the batch in host memory, the copy that feeds update ``i+1``'s XLA
    launch first waits for everything already queued on the GPU (TensorFlow's host-to-device
    copies wait for the compute stream, and the launch follows the copy's completion), so the
    GPU idles while the host prepares each launch (an H100 profile: about 7.5 ms of host stall
    per 100 ms update; BENCHMARKS.md). Copied in tf.data's thread, the waits fall outside the
    loop's. Not measured on a GPU yet, so off by default. A fetch one update ahead inside the
    loop, the first try at this, measured slower (BENCHMARKS.md) and is gone.

    The batch travels in its wire format (``_to_wire``) and the same batches are consumed in
    the same order: the numbers do not change."""
    self._check_input_options()
    return bool(self.prefetch_to_device) and self._whole_update_compiles()

  def _device_loops(self):
    """Whether each host call's ``n`` updates run as one XLA computation (``device_loop``), on
    the whole-update path only: the call fetches its ``n`` batches first (stacked, padded to
    ``steps_per_loop``, one copy to the device) and a ``while`` loop on the device runs the
    updates, each on its slice of the stack, so no copy and no launch stands between two
    updates (the host stalls that ``_prefetches`` moves out of the loop's thread cannot
    happen). The same batches in the same order; the numbers are the inline loop's to float32
    rounding (XLA compiles the update inside a loop). Batches must have one static shape.
    ``device_loop`` None: on a GPU, unless ``prefetch_to_device`` or batches whose shape is
    not static (every bert_tf training input drops its remainder)."""
    self._check_input_options()
    if not self._whole_update_compiles():
      return False
    if self.device_loop is not None:
      return bool(self.device_loop)
    return bool(_gpu_visible() and not self.prefetch_to_device
                and (self._batch_spec is None or _static(self._batch_spec)))

  def _check_input_options(self):
    for name in ("prefetch_to_device", "device_loop"):
      if getattr(self, name) not in (None, True, False):
        raise ValueError(f"{name} must be None, True or False, not {getattr(self, name)!r}")
    if self.prefetch_to_device and self.device_loop:
      raise ValueError("prefetch_to_device and device_loop exclude each other: the device "
                       "loop copies each host call's batches itself")

  @staticmethod
  def _to_wire(features):
    """``features`` as they travel to the device: int32 tensors as int64 (cast on the host),
    which the compiled update casts back to int32 (``_update``: every int64 feature; BERT's
    features are ids, masks and labels, int32 as the original's input functions make them).
    TensorFlow keeps a GPU's int32 tensors in host memory, so an int32 batch would be copied
    again at the update's launch."""
    with tf.device("/cpu:0"):
      return tf.nest.map_structure(
          lambda t: tf.cast(t, tf.int64) if t.dtype == tf.int32 else t, features)

  def input_dataset_fn(self, dataset_fn):
    """``dataset_fn`` as the train iterator reads it. With the device loop, each host call
    first takes its batches (``steps_per_call``), then the device runs their updates: a
    prefetch buffer of as many batches lets tf.data make the next call's batches
    while the device runs, so that the call takes them ready instead of waiting for the input
    pipeline with the device idle (host memory: the batches of one call more). The same
    batches in the same order."""
    if not self._device_loops():
      return dataset_fn

    def buffered(ctx):
      dataset = dataset_fn(ctx)
      return dataset.prefetch(self.steps_per_call(dataset.element_spec))
    return buffered

  def steps_per_call(self, spec=None):
    """Updates per host call: ``steps_per_loop``, but with the device loop no more than
    ``DEVICE_LOOP_STACK_BYTES`` of batches, which one call stacks on the device (and tf.data
    buffers as many on the host). ``spec``: the batches' element spec (default: the train
    iterator's, once ``make_iterator`` made it)."""
    spec = self._batch_spec if spec is None else spec
    steps = self.config.steps_per_loop
    if spec is None or not self._device_loops() or not _static(spec):
      return steps
    batch_bytes = sum(s.shape.num_elements() * s.dtype.size
                      for s in tf.nest.flatten(spec, expand_composites=True))
    return max(1, min(steps, DEVICE_LOOP_STACK_BYTES // max(1, batch_bytes)))

  def make_iterator(self, dataset_fn):
    """The iterator the train loop takes: over
    ``strategy.distribute_datasets_from_function(dataset_fn)``; with ``prefetch_to_device``
    (``_prefetches``), over ``dataset_fn``'s batches in their wire format, copied
    to the device by ``tf.data.experimental.prefetch_to_device`` two batches ahead (one
    replica: the default or a one-device strategy). With ``device_loop`` (``_device_loops``),
    tf.data keeps a host call's batches ready (``input_dataset_fn``, ``steps_per_call``)."""
    if not self._prefetches():
      iterator = iter(self.strategy.distribute_datasets_from_function(
          self.input_dataset_fn(dataset_fn)))
      self._batch_spec = iterator.element_spec
      return iterator
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/cpu:0"
    dataset = dataset_fn(tf.distribute.InputContext())
    dataset = dataset.map(lambda *batch: self._to_wire(batch[0] if len(batch) == 1 else batch))
    dataset = dataset.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=2))
    with tf.device(device):
      return iter(dataset)

  def build_train_loop(self):
    """A tf.function running ``n`` updates in-graph: ``loop(iterator, n) -> mean loss``."""
    # Library code has no Python control flow on tensors: traced as written, without
    # AutoGraph's conversion of every function it calls (seconds of tracing per run).
    self._compiled_gradients = tf.function(self._gradients, autograph=False,
                                           jit_compile=bool(self.config.jit_compile))
    self._compiled_update = None
    if self._whole_update_compiles():
      # Forward, backward, global norm, clipping and the optimizer step as one XLA module.
      self.optimizer.fuse_all_variables = True
      self._compiled_update = tf.function(self._update, jit_compile=True, autograph=False)
    if self.config.jit_compile:
      # The update of each variable as one XLA computation too (bert_tf's optimizers).
      inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
      if hasattr(inner, "fused_update"):
        inner.fused_update = True
      # Dropout masks from an integer hash XLA fuses, not its slow Philox expansion.
      layers.set_dropout_rng(self.model, "hash")
      # MLM logits as the plain x E^T product: no [B*P,V] layout copies under XLA.
      heads.set_vocab_logits_layout(self.model, vocab_major=False)
    if self._device_loops():
      return self._build_device_loop()
    strategy = self.strategy
    iterations = self.optimizer.iterations
    # float16: dynamic loss scaling skips an update whose gradients overflow (the optimizer's
    # iterations do not advance); its loss does not count, its batch was read (counted in
    # _skipped_updates, checkpointed: where a resumed run's data goes on). Other optimizers
    # apply every one.
    may_skip = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
    skipped_updates = self._skipped_updates
    # AutoGraph makes the loop below a tf.while_loop; the step itself is traced as written.
    replica_step = tf.autograph.experimental.do_not_convert(self._replica_step)

    @tf.function
    def steps(iterator, num_steps):
      # The mean loss of the applied updates and the first update (its step number) whose
      # loss was not finite, -1 if none: reduced in-graph, so no host round trip per step.
      loss_sum = tf.constant(0.0)
      applied_count = tf.constant(0.0)
      non_finite_step = tf.constant(-1, tf.int64)
      after = tf.cast(tf.identity(iterations), tf.int64)
      for _ in tf.range(num_steps):
        before = after
        per_replica = strategy.run(replica_step, args=(next(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        after = tf.cast(tf.identity(iterations), tf.int64) if may_skip else before + 1
        applied = after > before
        if may_skip:
          skipped_updates.assign_add(1 - tf.cast(applied, tf.int64))
        loss_sum += tf.where(applied, loss, 0.0)
        applied_count += tf.cast(applied, tf.float32)
        non_finite_step = tf.where(
            (non_finite_step < 0) & applied & ~tf.math.is_finite(loss), after, non_finite_step)
      return loss_sum / applied_count, non_finite_step

    return self._as_train_loop(steps)

  def _as_train_loop(self, steps, **attributes):
    """``steps(iterator, n) -> (mean loss, first non-finite step)`` as the train loop:
    ``loop(iterator, n) -> mean loss``, keeping the step for ``_check_finite``; ``.compiled``
    is ``steps`` itself (its graph: bench/hlo_census.py), plus ``attributes``."""
    def train_loop(iterator, num_steps):
      """``num_steps`` updates in-graph -> their mean loss (a scalar tensor)."""
      mean_loss, self._non_finite_step = steps(iterator, num_steps)
      return mean_loss

    train_loop.compiled = steps
    for name, value in attributes.items():
      setattr(train_loop, name, value)
    self._train_loop = train_loop
    return train_loop

  def _build_device_loop(self):
    """``build_train_loop`` for ``device_loop`` (see ``_device_loops``)."""
    iterations = self.optimizer.iterations

    @tf.function(jit_compile=True, autograph=False)
    def updates(stacked, num_steps):
      # Step numbers as the inline loop counts them (bert_tf's optimizers apply every update).
      start = tf.cast(tf.identity(iterations), tf.int64)

      def body(i, loss_sum, non_finite_step):
        features = tf.nest.map_structure(lambda t: tf.gather(t, i), stacked)
        loss = self._update(features, self._global_denominators(features, lambda v: v))
        non_finite_step = tf.where((non_finite_step < 0) & ~tf.math.is_finite(loss),
                                   start + i + 1, non_finite_step)
        return i + 1, loss_sum + loss, non_finite_step

      _, loss_sum, non_finite_step = tf.while_loop(
          lambda i, *_: i < num_steps, body,
          (tf.constant(0, tf.int64), tf.constant(0.0), tf.constant(-1, tf.int64)))
      return loss_sum / tf.cast(num_steps, tf.float32), non_finite_step

    @tf.autograph.experimental.do_not_convert  # plain Python: traced as written
    def buffers(spec):
      if not _static(spec):
        raise ValueError("device_loop needs batches of one static shape (batch with "
                         f"drop_remainder=True); the input's are {spec}")
      capacity = self.steps_per_call(spec)
      return tf.nest.map_structure(
          lambda s: tf.TensorArray(s.dtype, size=capacity, element_shape=s.shape), spec)

    @tf.function
    def steps(iterator, num_steps):
      # The call's batches, stacked; the slots past num_steps (a shorter last call) stay zero.
      arrays = buffers(iterator.element_spec)
      for i in tf.range(num_steps):
        arrays = tf.nest.map_structure(lambda a, t: a.write(i, t), arrays, next(iterator))  # pylint: disable=cell-var-from-loop
      stacked = tf.nest.map_structure(lambda a: a.stack(), arrays)
      return updates(stacked, tf.cast(num_steps, tf.int64))

    # .updates: the XLA computation itself (its HLO, for a GPU compile).
    return self._as_train_loop(steps, updates=updates)

  def _check_finite(self, loss, manager):
    """After a loop: raises a one-line ``BertTfError`` when an applied update's loss was not
    finite (``loss``, the loop's mean, is then not finite: only then is the step fetched), or
    the weights are not (a finite loss whose update overflowed), before anything is saved:
    the latest checkpoint stays the last finite one."""
    step = -1
    if not np.isfinite(loss) and self._non_finite_step is not None:  # (None: no step ran)
      step = int(self._non_finite_step.numpy())
    if step >= 0:
      what = f"the loss is not finite at step {step}"
    elif not bool(_all_finite(self.model.trainable_variables)):
      what = (f"the weights are not finite after step {int(self.optimizer.iterations.numpy())}"
              " (an update overflowed)")
    else:
      return
    latest = manager.latest_checkpoint
    kept = (f"the latest checkpoint, {os.path.basename(latest)}, holds the last finite "
            "weights" if latest else "no checkpoint was saved")
    raise BertTfError(f"{what}: training stopped without saving ({kept}); lower "
                      "--learning_rate, or check the input data")

  # === The host loop ===

  def current_learning_rate(self):
    optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
    lr = optimizer.learning_rate
    return float(lr.numpy() if hasattr(lr, "numpy") else lr)

  def train(self, dataset_fn, init_fn=None, summary_writer=None, progress=None,
            checkpoint_hook=None):
    """Trains to ``config.num_train_steps`` updates, resuming from ``model_dir`` if possible.

    Args:
      dataset_fn: ``input_context -> tf.data.Dataset`` of per-replica batches (for
        ``strategy.distribute_datasets_from_function``); it must repeat. A resumed run
        skips the batches read before its checkpoint: ``dataset_fn(ctx, skip_batches=k)``
        where it takes that keyword (to skip them cheaper than ``.skip(k)`` of its batches,
        e.g. before parsing), else ``dataset_fn(ctx).skip(k)``.
      init_fn: called with the model when there is no checkpoint to resume from (e.g. to
        load ``init_checkpoint``).
      summary_writer: optional ``tf.summary`` writer for TensorBoard scalars.
      progress: a function taking a line of text (default: ``absl.logging.info``).
      checkpoint_hook: optional, e.g. ``training.eval_during_training.EvalDuringTraining``:
        ``begin(step, resumed)`` once the weights are restored (or initialised), then
        ``saved(step)`` after each checkpoint is whole, the last one included; each returns
        True to stop training there (early stopping); ``close()`` when training ends,
        however it ends. Called on every worker.
    Returns:
      {"global_step", "loss", "stopped_early"} of the last loop; "loss" is None when this call
      trained no step (the checkpoints were already at ``num_train_steps``).
    """
    c = self.config
    progress = progress or log_line
    # Multi-worker: the chief writes checkpoints and summaries; the other workers save into a
    # temporary directory of their own (a save involves every worker), removed at the end.
    write_dir = distribution.worker_write_dir(self.strategy, c.model_dir)
    if write_dir != c.model_dir:
      summary_writer = None
    try:
      return self._train(dataset_fn, init_fn, summary_writer, progress, write_dir,
                         checkpoint_hook)
    finally:
      if write_dir != c.model_dir:
        shutil.rmtree(write_dir, ignore_errors=True)
      if checkpoint_hook is not None:
        checkpoint_hook.close()

  def _train(self, dataset_fn, init_fn, summary_writer, progress, write_dir, hook):
    c = self.config
    checkpoint = training_checkpoint(self.model, self.optimizer, self._skipped_updates)
    # Every worker resumes from the chief's checkpoints in model_dir; only the chief (which
    # writes there) cleans leftovers and rewrites a damaged state file, before its manager
    # reads the state.
    is_writer = write_dir == c.model_dir
    if is_writer:
      clean_save_leftovers(c.model_dir, progress)
    resumed = restore_newest_readable(
        lambda prefix: training_checkpoint(self.model, self.optimizer, self._skipped_updates,
                                           prefix) or checkpoint,
        self.model, c.model_dir, progress, rewrite_state=is_writer)
    # A run of Google's original code in this folder goes on as the original would resume it;
    # its first checkpoint of bert_tf's own is still to be saved (saved_step).
    continued = None if resumed else continue_original_run(
        self.model, getattr(self.optimizer, "inner_optimizer", self.optimizer), c.model_dir,
        progress)
    if continued:
      if is_writer:
        keep_original_checkpoints(c.model_dir)
      # Its input starts over, as the original's did on a restart: the batches read so far
      # (step + this) are none yet; later resumes of bert_tf's own checkpoints skip those read
      # since.
      self._skipped_updates.assign(-int(self.optimizer.iterations.numpy()))
    elif resumed:
      newer = original_checkpoints(c.model_dir, newer_than=resumed)
      if newer:
        progress(f"note: {c.model_dir} also holds {os.path.basename(newer[0])} of Google's "
                 f"original code, a later step than {os.path.basename(resumed)}: bert_tf "
                 "resumes its own checkpoints (to go on from the original's, move bert_tf's "
                 "ckpt-* and its checkpoint file away)")
    manager = tf.train.CheckpointManager(
        checkpoint, write_dir, max_to_keep=preflight.keep_checkpoint_max(c.keep_checkpoint_max),
        step_counter=self.optimizer.iterations)
    if resumed or continued:
      at = int(self.optimizer.iterations.numpy())
      if resumed:
        progress(f"resumed from {resumed} at step {at}")
      if at > c.num_train_steps:  # (a shorter --num_train_steps/--num_train_epochs)
        progress(f"training already went to step {at}, past the {c.num_train_steps} this run "
                 f"plans: nothing to train; what follows uses the weights of step {at}")
    elif init_fn is not None and not continued:
      init_fn(self.model)
      if not bool(_all_finite(self.model.trainable_variables)):
        raise BertTfError("the initial weights are not finite (the checkpoint they came from, "
                          "e.g. --init_checkpoint, holds nan or inf): nothing was trained")
    if continued and not bool(_all_finite(self.model.trainable_variables)):
      # (The original saved whatever its weights were; bert_tf's checkpoints are finite.)
      raise BertTfError(f"{continued}: its weights are not finite (the original's run "
                        "diverged there): nothing to go on from; to go on from an earlier "
                        "model.ckpt-N, move the later model.ckpt-* files away")
    step = int(self.optimizer.iterations.numpy())
    saved_step = step if resumed else None  # (continued: its step is saved as bert_tf's too)
    # A continued run has no evaluations of bert_tf's to read back: its step is evaluated at
    # its first save.
    stop = bool(hook and hook.begin(step, resumed=bool(resumed)))

    # The batches read so far: one per update, and one per float16 update skipped for overflow.
    position = step + int(self._skipped_updates.numpy())
    if position and step < c.num_train_steps and not stop:  # (said only where it trains)
      progress(f"input: skipping the {position} batches read before step {step}, to go on "
               "with the data where the run was")

    def resumed_dataset_fn(ctx):
      # Distributed iterators cannot be checkpointed, so a resumed run skips the batches the
      # steps so far consumed: with a deterministic dataset (seeded shuffles) it continues
      # exactly where the killed run was. A dataset_fn that takes ``skip_batches`` skips
      # them itself (the pretraining input: before parsing, many times faster).
      skip = position * ctx.num_replicas_in_sync // ctx.num_input_pipelines
      if skip and takes_skip_batches(dataset_fn):
        return dataset_fn(ctx, skip_batches=skip)
      dataset = dataset_fn(ctx)
      return dataset.skip(skip) if skip else dataset

    for name, used in (("device_loop", self._device_loops), ("prefetch_to_device",
                                                              self._prefetches)):
      if getattr(self, name) and not used():
        progress(f"{name}: not used here, training as usual: it needs the whole update as one "
                 "XLA computation (a GPU, XLA, one replica, no gradient accumulation, "
                 "not float16)")
    iterator = self.make_iterator(resumed_dataset_fn)
    train_loop = self._train_loop or self.build_train_loop()
    # Traced at its first call: under a persistent XLA cache, with the names a fresh run
    # gives it too, so that a resumed run loads the compiled step (xla_cache).
    xla_cache.align_function_names()
    step = int(self.optimizer.iterations.numpy())
    start_step, start_time = step, time.time()
    # The ETA's rate: from the end of the first loop once there is one (the first also
    # compiles the step and, resumed, skips the input already read: minutes at times).
    rate_since = (start_step, start_time)
    loss = float("nan")
    while step < c.num_train_steps and not stop:
      n = min(self.steps_per_call(), c.num_train_steps - step)
      if c.save_checkpoints_steps:
        n = min(n, c.save_checkpoints_steps - step % c.save_checkpoints_steps)
      loop_start = time.time()
      loss = float(_collective_errors(train_loop, step)(iterator, tf.constant(n, tf.int32))
                   .numpy())
      elapsed = time.time() - loop_start
      step = int(self.optimizer.iterations.numpy())
      if c.save_checkpoints_steps and step % c.save_checkpoints_steps == 0 or (
          not np.isfinite(loss)):
        self._check_finite(loss, manager)
      if not np.isfinite(loss):  # float16 updates skipped for overflow, none applied
        progress(f"warning: loss is {loss} at step {step}")
      stats = self._stats(step, n, elapsed, *rate_since, loss)
      if rate_since[0] == start_step:
        rate_since = (step, time.time())
      progress(format_progress(stats, c.num_train_steps))
      if summary_writer is not None:
        with summary_writer.as_default(step=step):
          for key in ("loss", "learning_rate", "examples_per_second", "tokens_per_second",
                      "mfu"):
            if stats.get(key) is not None:
              tf.summary.scalar(key, stats[key])
        summary_writer.flush()
      faults.point("step", step)
      if c.save_checkpoints_steps and step % c.save_checkpoints_steps == 0:
        manager.save(checkpoint_number=step, options=_fault_options(step))
        saved_step = step
        stop = bool(hook and hook.saved(step))
    if saved_step != step:
      self._check_finite(loss, manager)
      manager.save(checkpoint_number=step, check_interval=False, options=_fault_options(step))
      if hook:
        hook.saved(step)
    # No step this run (a finished run called again): no loss, rather than a nan that reads
    # as a diverged one.
    return {"global_step": step, "loss": loss if step > start_step else None,
            "stopped_early": stop}

  def _stats(self, step, n, elapsed, since_step, since_time, loss):
    """The progress line's numbers after a loop of ``n`` updates that took ``elapsed``
    seconds, to ``step``; the ETA at the mean rate since ``since_step`` at ``since_time``."""
    c = self.config
    stats = {"step": step, "loss": loss, "learning_rate": self.current_learning_rate()}
    if c.global_batch_size and elapsed > 0:
      examples = n * c.global_batch_size
      stats["examples_per_second"] = examples / elapsed
      if c.seq_length:
        stats["tokens_per_second"] = examples * c.seq_length / elapsed
      if c.train_flops_per_example and c.peak_flops:
        stats["mfu"] = c.train_flops_per_example * examples / elapsed / c.peak_flops
    done = step - since_step
    if done > 0:
      rate = (time.time() - since_time) / done
      stats["eta_seconds"] = rate * (c.num_train_steps - step)
    return stats


def _gpu_visible():
  """Whether this process sees a GPU (the defaults of ``whole_update`` and ``device_loop``)."""
  return bool(tf.config.list_logical_devices("GPU"))


def _static(spec):
  """Whether every tensor of an element spec (a distributed iterator's per-replica specs
  too) has a fully defined shape."""
  return all(s.shape.is_fully_defined()
             for s in tf.nest.flatten(spec, expand_composites=True))


@tf.function(autograph=False)
def _all_finite(variables):
  return tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in variables])


def _collective_errors(train_loop, step):
  """``train_loop`` with a lost worker (multi-worker) turned into a one-line error."""
  def run(*args):
    try:
      return train_loop(*args)
    except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
            tf.errors.AbortedError, tf.errors.CancelledError) as e:
      # TF's message opens with a traceback of where the op was defined; the cause follows.
      lines = [line.strip() for line in str(e).splitlines()]
      cause = next((line for line in lines if line and not line.startswith(
          ("Graph execution error", "Detected at node", "File ", "[["))), type(e).__name__)
      if cause.endswith(":") and lines.index(cause) + 1 < len(lines):
        cause += " " + lines[lines.index(cause) + 1]  # "unhealthy tasks:" names them next
      raise BertTfError(f"training stopped after step {step}: a worker of the cluster was lost "
                        f"or did not answer ({type(e).__name__}: {cause[:300]}); restart every "
                        "worker with the same command to resume from the last checkpoint") from e
  return run


def make_optimizer(strategy, learning_rate, num_train_steps, num_warmup_steps,
                   dtype="float32", optimizer_kwargs=None):
  """``optimization.create_optimizer`` under the strategy's scope, wrapped for dynamic loss
  scaling when ``dtype`` is float16 (the one place every training script builds it)."""
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


def takes_skip_batches(dataset_fn):
  """Whether ``dataset_fn`` takes ``skip_batches=`` (``Trainer.train``): a parameter of that
  name that a keyword can give (not ``**kwargs``, which may not pass it on)."""
  try:
    parameter = inspect.signature(dataset_fn).parameters.get("skip_batches")
  except (TypeError, ValueError):  # (a callable without a signature)
    return False
  return parameter is not None and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                      inspect.Parameter.KEYWORD_ONLY)


def training_checkpoint(model, optimizer, skipped_updates, prefix=None):
  """The ``tf.train.Checkpoint`` of a training run: the model's variables (Google names), the
  optimizer, the dropout generators' states, and ``skipped_updates`` (float16). Under float16
  the optimizer is the one Keras's ``LossScaleOptimizer`` wraps, under the same name as
  without it, with the loss scale as ``loss_scale``: ``--dtype`` can change on a resume.

  With ``prefix`` (a checkpoint to restore): None when that checkpoint has every part (restore
  with the checkpoint the run saves: its save counter too, so a resumed run writes the bytes
  an uninterrupted one writes); else the one to restore it with: only the optional parts it
  holds (``loss_scale``, ``skipped_updates``: a checkpoint without them restores as before),
  and for a float16 checkpoint of before (the wrapper itself as ``optimizer``) its layout.
  """
  inner = getattr(optimizer, "inner_optimizer", optimizer)
  scale = None
  if inner is not optimizer:
    scale = {"dynamic_scale": optimizer.dynamic_scale, "step_counter": optimizer.step_counter}
  parts = {"model": checkpoints.trackable_variables(model), "optimizer": inner,
           "random_states": random_states(model), "skipped_updates": skipped_updates}
  if scale:
    parts["loss_scale"] = tf.train.Checkpoint(**scale)
  if prefix is None:
    return tf.train.Checkpoint(**parts)
  names = {name for name, _ in tf.train.list_variables(prefix)}
  has = lambda part: any(n.startswith(part + "/") for n in names)  # noqa: E731
  fits = True
  for part in ("loss_scale", "skipped_updates"):
    if part in parts and not has(part):
      del parts[part]
      fits = False
  if has("optimizer/inner_optimizer"):  # the wrapper, as float16 runs wrote it before
    parts.pop("loss_scale", None)
    parts["optimizer"] = tf.train.Checkpoint(inner_optimizer=inner, **(scale or {}))
    fits = False
  return None if fits else tf.train.Checkpoint(**parts)


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


def cached_function(cache, name, python_function):
  """``tf.function(python_function)``, kept in ``cache`` (a dict, or None: not kept) under
  ``name`` and taken from there when it is already: a caller that evaluates the same model
  again (evaluation during training) traces its step once, not at every evaluation. Traced
  as written (no AutoGraph: the library's steps have no Python control flow on tensors)."""
  if cache is None:
    return tf.function(python_function, autograph=False)
  if name not in cache:
    cache[name] = tf.function(python_function, autograph=False)
  return cache[name]


def evaluate(strategy, model, task, dataset_fn, max_steps=None, cache=None):
  """Streaming evaluation: ``task.eval_metrics`` sums over every batch (and replica).

  ``task.eval_metrics(outputs, features)`` returns {name: (value_sum, weight_sum)}; the result
  is {name: value_sum / weight_sum} over the whole dataset (or ``max_steps`` batches).
  ``cache``: as ``cached_function``'s.
  """
  dataset = strategy.distribute_datasets_from_function(dataset_fn)

  def replica_fn(features):
    outputs = model(features, training=False)
    return task.eval_metrics(outputs, features)

  def bert_tf_evaluate_step(batch):
    per_replica = strategy.run(replica_fn, args=(batch,))
    return tf.nest.map_structure(
        lambda x: strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None), per_replica)

  step_fn = cached_function(cache, "evaluate", bert_tf_evaluate_step)

  totals = None
  # islice: no batch past max_steps is read (a repeating eval input has one more, always).
  batches = dataset if max_steps is None else itertools.islice(dataset, max_steps)
  for batch in progress.track(batches, max_steps, "eval batches"):
    sums = tf.nest.map_structure(lambda x: float(x.numpy()), step_fn(batch))
    totals = sums if totals is None else {
        k: (totals[k][0] + v[0], totals[k][1] + v[1]) for k, v in sums.items()}
  if totals is None:
    raise BertTfError("evaluation dataset is empty: fewer records than one batch "
                      "(--eval_batch_size, the global batch; the last partial batch is left "
                      "out, as the original)")
  return {k: s / w if w else float("nan") for k, (s, w) in totals.items()}


# === Fault points inside a save (tests only; see bert_tf.faults) ===

def _fault_options(step):
  """``CheckpointOptions`` with the fault point ``save_start`` (in TF's sharding callback,
  before any file of ``ckpt-<step>`` is written) or ``save_written`` (after its files are
  whole, before the ``checkpoint`` state file names them) when ``BERT_TF_FAULT`` names it
  for this step; else None, the normal save."""
  if faults.armed("save_written", step):
    return tf.train.CheckpointOptions(
        experimental_write_callbacks=[lambda *_: faults.point("save_written", step)])
  if not faults.armed("save_start", step):
    return None

  class FaultSharding(tf.train.experimental.ShardByTaskPolicy):
    @property
    def description(self):
      return "TF's default sharding, after the fault point save_start"

    def __call__(self, shardable_tensors):
      faults.point("save_start", step)
      return super().__call__(shardable_tensors)

  return tf.train.CheckpointOptions(experimental_sharding_callback=FaultSharding())


def restore_model(model, model_dir_or_checkpoint):
  """Restores just the model from a training checkpoint (e.g. for eval after training)."""
  path = model_dir_or_checkpoint
  if tf.io.gfile.isdir(path):
    path = latest_checkpoint(path)
    if path is None:
      raise BertTfError(f"no training checkpoint in {model_dir_or_checkpoint!r}")
  checkpoints.load_bert_tf_checkpoint(model, path)
  return path


def write_model_files(bert_config, folder, vocab_file=None):
  """``folder/bert_config.json`` and (when given) ``folder/vocab.txt``, so that the folder
  loads alone (``bert_tf.load(folder)``, ``python -m bert_tf ... --model=folder``): the config
  and vocab travel with the weights. Written through temporary names; a vocab that already is
  ``folder/vocab.txt`` is left as it is."""
  fileio.makedirs(folder)
  bert_config.to_json_file(os.path.join(folder, "bert_config.json"))
  target = os.path.join(folder, "vocab.txt")
  if vocab_file and os.path.abspath(vocab_file) != os.path.abspath(target):
    fileio.copy_atomically(vocab_file, target)


def write_model_files_if_fresh(bert_config, folder, vocab_file=None):
  """``write_model_files`` now when ``folder`` holds no checkpoint yet (a new run: a run killed
  early still leaves a folder that loads alone). A folder with checkpoints gets them at the end
  of the run instead (``write_model_files``), once restoring showed that its checkpoints fit
  this config: a run that fails (another ``--bert_config_file`` over the same folder) leaves
  the folder's files as they were."""
  if not tf.io.gfile.glob(os.path.join(folder, "ckpt-*.index")):
    write_model_files(bert_config, folder, vocab_file)


def export_google_folder(model, bert_config, output_dir, global_step, vocab_file=None):
  """``output_dir/google``: ``bert_model.ckpt`` (Google's names), ``bert_config.json`` and,
  when given, ``vocab.txt``: a folder Google's code, bert_tf and ``bert_tf.load`` all read."""
  google_dir = os.path.join(output_dir, "google")
  checkpoints.save_google_checkpoint(model, os.path.join(google_dir, "bert_model.ckpt"),
                                     global_step=global_step)
  write_model_files(bert_config, google_dir, vocab_file)
  return google_dir


def eval_results_text(value, float32=True):
  """A value as the original's ``eval_results.txt`` writes it: its metrics were float32
  numpy scalars, ``str()`` the shortest text that reads back as that float32
  (``eval_loss = 0.68227947``); integers (``global_step``) as they are. ``float32=False``:
  floats whole (scores the original never wrote, such as the official SQuAD evaluation's)."""
  if isinstance(value, (bool, np.bool_)):
    return str(value)
  if isinstance(value, (int, np.integer)):
    return str(int(value))
  if isinstance(value, (float, np.floating)):
    return str(np.float32(value)) if float32 else repr(float(value))
  return str(value)


def write_eval_results(path, results, float32=True):
  """``eval_results.txt`` as the original writes it: ``key = value`` lines, sorted by key,
  numbers as ``eval_results_text`` (``float32=False`` for scores that are not the
  Estimator's: SQuAD's, conlleval's)."""
  with fileio.atomic_write(path) as f:
    for key in sorted(results):
      f.write(f"{key} = {eval_results_text(results[key], float32)}\n")


def summary_writer(model_dir, name="train"):
  return tf.summary.create_file_writer(os.path.join(model_dir, "summaries", name))


def write_eval_summaries(model_dir, results, step):
  """An evaluation's numbers as TensorBoard scalars at ``step`` in ``summaries/eval`` (the
  original's Estimator wrote its ``eval/`` events; the evaluations during training write
  there too): a run's ``--do_eval`` beside its training curve."""
  writer = summary_writer(model_dir, "eval")
  try:
    with writer.as_default(step=int(step)):
      for key, value in sorted(results.items()):
        if (key != "global_step" and isinstance(value, (int, float, np.number))
            and not isinstance(value, (bool, np.bool_))):
          tf.summary.scalar(key, float(value))
    writer.flush()
  finally:
    writer.close()
