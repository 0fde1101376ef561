"""The original BERT optimizer and learning-rate schedule, plus AdamW and LAMB, for Keras 3.

Three optimizers share one skeleton (``_BertOptimizer``): the same Adam moments, the same
decoupled weight decay with the same name-based exclusion, the same global-norm clipping.
They differ only in how the moments become an update:

  ``AdamWeightDecay`` ("adamw_original"), Google's ``AdamWeightDecayOptimizer`` exactly:
      m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
      u = m / (sqrt(v) + eps) [+ weight_decay_rate * param]      NO bias correction
      param -= lr * u
  ``AdamW`` ("adamw"), Loshchilov & Hutter 2019 with Adam's bias correction:
      m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)             t = 1, 2, ... (update count)
      u = m_hat / (sqrt(v_hat) + eps) [+ weight_decay_rate * param];  param -= lr * u
  ``LAMB`` ("lamb"), You et al. 2019 (arXiv:1904.00962, Algorithm 2):
      u as AdamW;  ratio = ||param|| / ||u|| (1 where either norm is 0, or the variable is
      excluded from layer adaptation);  param -= lr * ratio * u

The arithmetic of ``AdamWeightDecay`` and ``WarmupPolynomialDecay`` follows the original's
float32 operations op for op (same constants, same casts, same order), so that the two agree
to the last bit or nearly; ``tests/training/test_optimization.py`` checks them step for step
against bert-tensorflow 1.0.4 run in graph mode.

Weight decay exclusion: a variable is exempt when any pattern of ``exclude_from_weight_decay``
(default ``["LayerNorm", "layer_norm", "bias"]``) matches its name by ``re.search``. The name
is the Keras 3 variable's ``path`` (e.g. ``bert/encoder/layer_0/attention/output/LayerNorm/gamma``),
not its ``name`` (just ``gamma``), so that ``LayerNorm`` is seen as in the original's TF1
names; a plain ``tf.Variable`` is matched by its ``name`` without the ``:0`` suffix.

Clipping: with ``global_clipnorm`` set, gradients are clipped with ``tf.clip_by_global_norm``
(the original's own op, so the same arithmetic) AFTER they are summed over replicas, i.e. on
the gradient of the global batch. An embedding's gradient (``tf.gather``'s ``IndexedSlices``,
a row per token) is summed into its dense ``[V,H]`` gradient first, so the norm is the
gradient's own: the original's on a TPU, where its embeddings are one-hot products (and its
token-type table everywhere); on a GPU or CPU the original's word-embedding gradient was
measured row by row, repeated ids counted apart, which made the clip depend on how a batch is
cut (gradient accumulation, replicas). (Stock Keras clips each replica's gradient before the
all-reduce.) The original on TPU clipped each core's gradient and then summed the clipped
gradients (``CrossShardOptimizer``); on one device the two agree. The whole-update XLA path
(``fuse_all_variables``, what the training loop takes with a GPU) computes the same norm with
``grouped_global_norm``: far fewer GPU kernels, the float32 sums in another order.

Usage, in a custom loop or ``model.compile``:

    with strategy.scope():
      optimizer = create_optimizer(init_lr=1e-4, num_train_steps=1000, num_warmup_steps=100)
      optimizer.build(model.trainable_variables)  # before a jit-compiled / TPU step
    ...
    optimizer.apply_gradients(zip(grads, model.trainable_variables))  # inside strategy.run

The optimizer must be created under the strategy's scope (Keras records the strategy then).
Gradient accumulation belongs to the training loop (sum micro-batch gradients, then apply
once), so Keras's ``gradient_accumulation_steps`` is refused here: Keras would feed the
learning-rate schedule the micro-step count. The moment slots of a variable are
``optimizer.slot(var, "m")`` and ``optimizer.slot(var, "v")`` (Google checkpoints name them
``<var>/adam_m`` and ``<var>/adam_v``).
"""

import re

import keras
import tensorflow as tf

from bert_tf import quiet
from bert_tf.errors import BertTfError
from bert_tf.modeling.placement import in_xla_computation

# The original's hyperparameters (optimization.py, create_optimizer); flags import these.
DEFAULT_WEIGHT_DECAY_RATE = 0.01
DEFAULT_BETA_1 = 0.9
DEFAULT_BETA_2 = 0.999
DEFAULT_EPSILON = 1e-6
DEFAULT_CLIP_NORM = 1.0
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
DEFAULT_OPTIMIZER_TYPE = "adamw_original"


# Gradients of at most this many elements are squared and summed together (grouped_global_norm).
SMALL_GRADIENT_ELEMENTS = 1 << 16
# Vectors per concatenation: a GPU kernel takes a bounded number of operands.
NORM_PIECES_PER_GROUP = 48


def grouped_global_norm(tensors):
  """``tf.linalg.global_norm(tensors)`` in far fewer reductions.

  The same value, ``sqrt(sum(t ** 2))`` over every element of every tensor (an IndexedSlices
  as its dense sum, ``dense_gradients``); only the order of the float32 additions differs.
  Each tensor becomes a vector of squares: a small one (at most ``SMALL_GRADIENT_ELEMENTS``
  elements) its squared elements, a matrix its rows' sums of squares (one row reduction); the
  vectors are concatenated ``NORM_PIECES_PER_GROUP`` at a time and each group summed once.
  ``tf.linalg.global_norm`` reduces every tensor to a scalar on its own: under XLA on a GPU
  one kernel per small tensor and two per matrix (XLA splits a large reduction to a scalar in
  two), each far shorter than its launch; BERT-Large has 398 variables (BENCHMARKS.md, "The
  global norm in fewer reductions").
  """
  with tf.name_scope("global_norm"):
    pieces = []
    for tensor in dense_gradients(tensors):
      if tensor is None:
        continue
      tensor = tf.convert_to_tensor(tensor)
      size = tensor.shape.num_elements()
      if size is not None and size <= SMALL_GRADIENT_ELEMENTS:
        pieces.append(tf.reshape(tf.square(tensor), [-1]))
      elif tensor.shape.rank is not None and tensor.shape.rank >= 2:
        pieces.append(tf.reshape(tf.reduce_sum(tf.square(tensor), axis=-1), [-1]))
      else:
        pieces.append(tf.reshape(tf.reduce_sum(tf.square(tensor)), [1]))
    if not pieces:
      return tf.constant(0.0)
    groups = [tf.concat(pieces[start:start + NORM_PIECES_PER_GROUP], 0)
              for start in range(0, len(pieces), NORM_PIECES_PER_GROUP)]
    if in_xla_computation():
      # XLA's simplifier rewrites the sum of a concatenation as the sum of each part's sum,
      # one reduction per part again; the barrier keeps each group one reduction.
      from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
      groups = xla.optimization_barrier(*groups)
    return tf.sqrt(tf.add_n([tf.reduce_sum(group) for group in groups]))


def dense_gradients(grads):
  """``grads`` with every ``IndexedSlices`` (an embedding's gradient: a row per token, repeated
  ids apart) summed into its dense tensor, what the update uses and the clip measures."""
  return [_dense(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def _dense(slices):
  dense = tf.convert_to_tensor(slices)
  shape = tf.get_static_value(slices.dense_shape)
  if shape is not None:
    dense.set_shape(shape)  # (a traced sum's first dimension is not known without it)
  return dense


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """The original BERT learning rate: linear warmup, then polynomial decay to an end value.

    lr(step) = (init_lr - end_lr) * (1 - min(step, num_train_steps) / num_train_steps)^power
               + end_lr
    lr(step) = init_lr * step / num_warmup_steps        while step < num_warmup_steps

  ``step`` counts updates already applied (0 for the first update, as the original's
  ``global_step``). Computed in float32 with the original's ops and casts
  (``tf.train.polynomial_decay``, then the warmup blend ``(1 - w) * decayed + w * warmup``).

  Example:
    >>> schedule = WarmupPolynomialDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    >>> float(schedule(5)), float(schedule(55))
    (4.999999873689376e-05, 4.499999704421498e-05)
  """

  def __init__(self, initial_learning_rate, num_train_steps, num_warmup_steps=0,
               end_learning_rate=0.0, power=1.0, name=None):
    super().__init__()
    self.initial_learning_rate = initial_learning_rate
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.end_learning_rate = end_learning_rate
    self.power = power
    self.name = name

  def __call__(self, step):
    """Returns the learning rate for ``step`` (an int scalar), a float32 scalar tensor."""
    with tf.name_scope(self.name or "WarmupPolynomialDecay"):
      step = tf.convert_to_tensor(step)
      # tf.train.polynomial_decay(tf.constant(init_lr), global_step, num_train_steps,
      # end_learning_rate, power, cycle=False): float32 throughout.
      initial_learning_rate = tf.constant(self.initial_learning_rate, dtype=tf.float32)
      end_learning_rate = tf.cast(self.end_learning_rate, tf.float32)
      power = tf.cast(self.power, tf.float32)
      decay_steps = tf.cast(self.num_train_steps, tf.float32)
      decay_step = tf.minimum(tf.cast(step, tf.float32), decay_steps)
      p = tf.divide(decay_step, decay_steps)
      learning_rate = tf.add(
          tf.multiply(initial_learning_rate - end_learning_rate, tf.pow(1 - p, power)),
          end_learning_rate)
      if self.num_warmup_steps:
        # The original goes through int32 before float32 here.
        step_int = tf.cast(step, tf.int32)
        warmup_steps_int = tf.constant(self.num_warmup_steps, dtype=tf.int32)
        warmup_percent_done = (tf.cast(step_int, tf.float32) /
                               tf.cast(warmup_steps_int, tf.float32))
        warmup_learning_rate = self.initial_learning_rate * warmup_percent_done
        is_warmup = tf.cast(step_int < warmup_steps_int, tf.float32)
        learning_rate = ((1.0 - is_warmup) * learning_rate +
                         is_warmup * warmup_learning_rate)
      return learning_rate

  def get_config(self):
    return {
        "initial_learning_rate": self.initial_learning_rate,
        "num_train_steps": self.num_train_steps,
        "num_warmup_steps": self.num_warmup_steps,
        "end_learning_rate": self.end_learning_rate,
        "power": self.power,
        "name": self.name,
    }


def variable_name(variable):
  """The name weight-decay exclusion patterns are matched against (see module docstring)."""
  path = getattr(variable, "path", None)
  if path:
    return path
  return re.sub(r":\d+$", "", variable.name)


def _tf_variable(variable):
  """The ``tf.Variable`` behind a Keras variable (or ``variable`` itself)."""
  return variable.value if isinstance(variable, keras.Variable) else variable


# Each optimizer's fused updates are its own tf.functions, traced once (bert_tf.quiet).
quiet.per_run_functions("_BertOptimizer.")


class _BertOptimizer(keras.optimizers.Optimizer):
  """Adam moments + decoupled weight decay with name exclusion + clipping after all-reduce.

  Subclasses implement ``_update(param, next_m, next_v, learning_rate, decay, adapt)``
  returning the new parameter value; moments are computed here with the original's
  arithmetic.

  ``fused_update``: compute each variable's new (param, m, v) in one XLA-compiled function
  (one pass over memory instead of about fifteen elementwise ops, each a pass of its own),
  which also assigns them in place unless the variables are mirrored. With
  ``fuse_all_variables`` too, the whole update (learning rate, global norm and clipping,
  every variable's step, assigned in place) is ONE XLA function: no TensorFlow kernels between
  XLA computations, which is what a GPU wants; on CPU it is slower (BENCHMARKS.md: XLA's CPU
  backend runs the one computation's many small loops one after another, where the
  per-variable computations run in parallel), so the training loop sets it only with a GPU
  or TPU.
  The training loop turns it on with ``jit_compile``. XLA may contract multiply-adds, so the
  numbers then agree with the original's to float32 rounding, not to the bit.
  """

  _UNSUPPORTED = ("weight_decay", "gradient_accumulation_steps", "use_ema")

  def __init__(self, learning_rate, weight_decay_rate=DEFAULT_WEIGHT_DECAY_RATE,
               beta_1=DEFAULT_BETA_1, beta_2=DEFAULT_BETA_2, epsilon=DEFAULT_EPSILON,
               exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
               fused_update=False, name=None, **kwargs):
    for key in self._UNSUPPORTED:
      if kwargs.get(key):
        raise ValueError(
            f"{type(self).__name__} does not support Keras's `{key}`: weight decay is "
            "`weight_decay_rate`, gradient accumulation belongs to the training loop.")
      kwargs.pop(key, None)
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self._weight_decay_exclusions = list(exclude_from_weight_decay or [])
    self.fused_update = bool(fused_update)
    # With fused_update: all variables in ONE XLA function rather than one per variable (the
    # training loop sets it where that pays: with a GPU or TPU).
    self.fuse_all_variables = False
    self._fused_new_values = None
    self._fused_assign = None
    self._fused_apply_all = None

  # === Variables ===

  def build(self, variables):
    """Creates the ``m`` and ``v`` slots of each variable and fixes who gets weight decay."""
    if self.built:
      return
    super().build(variables)
    self._m, self._v = self.add_optimizer_variables(variables, ["m", "v"])
    self._use_decay = [self.uses_weight_decay(var) for var in variables]

  def slot(self, variable, slot_name):
    """The optimizer variable ``slot_name`` ("m" or "v") of model ``variable``."""
    slots = {"m": self._m, "v": self._v}
    if slot_name not in slots:
      raise ValueError(f"slot_name must be 'm' or 'v', got {slot_name!r}")
    return slots[slot_name][self._get_variable_index(variable)]

  def uses_weight_decay(self, variable):
    """Whether ``variable`` is decayed: rate nonzero and no exclusion pattern matches."""
    return self._decays_name(variable_name(variable), self._weight_decay_exclusions)

  def _decays_name(self, name, patterns):
    if not self.weight_decay_rate:
      return False
    return not any(re.search(pattern, name) is not None for pattern in patterns)

  def exclude_from_weight_decay(self, var_list=None, var_names=None):
    """Keras's API, mapped to this optimizer's rule: adds patterns (``var_names``)."""
    if self.built:
      raise ValueError("exclude_from_weight_decay() must be called before build().")
    if var_list:
      raise ValueError(f"{type(self).__name__} excludes by name pattern only (var_names).")
    self._weight_decay_exclusions.extend(var_names or [])

  # === Update ===

  def _clip_gradients(self, grads):
    if self.global_clipnorm and self.global_clipnorm > 0:
      # The original's op: norm = sqrt(2 * sum(l2_loss(g))), scale = clip * min(1/norm, 1/clip).
      clipped, _ = tf.clip_by_global_norm(dense_gradients(grads), self.global_clipnorm)
      return clipped
    return super()._clip_gradients(grads)

  def _backend_apply_gradients(self, grads, trainable_variables):
    # Keras would clip each replica's gradient and all-reduce afterwards; BERT clips the
    # gradient of the whole batch, so reduce first, then clip, then update.
    tf_variables = [_tf_variable(v) for v in trainable_variables]
    grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, tf_variables)))
    grads = [g for g, _ in grads_and_vars]  # (IndexedSlices made dense below, in each path)
    if (self.fused_update and self.fuse_all_variables
        and not self._has_distributed_values(tf_variables)):
      # The whole update (learning rate, global norm, clipping, every variable's new
      # param/m/v, assigned in place) as ONE XLA computation: no TensorFlow kernels (the
      # norm's L2Loss per variable, the schedule) between XLA computations, one launch
      # sequence instead of one computation per variable shape.
      if self._fused_apply_all is None:
        self._fused_apply_all = tf.function(self._apply_all, jit_compile=True, autograph=False)
      indices = [self._get_variable_index(v) for v in trainable_variables]
      slots = [(_tf_variable(self._m[i]), _tf_variable(self._v[i])) for i in indices]
      self._fused_apply_all(tf_variables, slots, grads, tuple(indices))
      return
    grads = dense_gradients(grads)
    clip_scale = None
    if self.fused_update and self.global_clipnorm and self.global_clipnorm > 0:
      clip_scale = self._clip_scale(grads)
    else:
      grads = self._clip_gradients(grads)
    tf.__internal__.distribute.interim.maybe_merge_call(
        self._distributed_update, self._distribution_strategy,
        list(zip(grads, tf_variables)), self.learning_rate, clip_scale)

  @staticmethod
  def _has_distributed_values(tf_variables):
    return any(isinstance(x, tf.distribute.DistributedValues) for x in tf_variables)

  def _clip_scale(self, grads, norm=None):
    """tf.clip_by_global_norm's factor (applied inside the fused updates): clip * min(1/norm,
    1/clip), NaN when the norm is not finite, as the original. ``norm``: the gradients' global
    norm when the caller computed it (default ``tf.linalg.global_norm(grads)``)."""
    if norm is None:
      norm = tf.linalg.global_norm(grads)
    clip_scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
    return clip_scale + (norm - norm)

  def _apply_all(self, params, slots, grads, indices):
    """Every variable's update in one function (XLA-compiled by the caller): ``params``
    tf.Variables, ``slots`` their (m, v), ``grads`` their gradients (tensors or
    IndexedSlices), ``indices`` (Python ints) the optimizer's index of each variable."""
    grads = dense_gradients(grads)  # inside the XLA computation
    clip_scale = None
    if self.global_clipnorm and self.global_clipnorm > 0:
      clip_scale = self._clip_scale(grads, norm=grouped_global_norm(grads))
    learning_rate = tf.cast(self.learning_rate, tf.float32)
    # The learning rate and the clip factor as one [2] vector that every variable's update
    # reads: a shared operand that is not a scalar lets XLA fuse sibling updates of one shape
    # into one multi-output kernel (it does not for shared scalars).
    coefficients = tf.stack([learning_rate,
                             learning_rate if clip_scale is None else clip_scale])
    if in_xla_computation():
      from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
      (coefficients,) = xla.optimization_barrier(coefficients)
    cast_coefficients = {dtype: tf.cast(coefficients, dtype)
                         for dtype in {param.dtype for param in params}}
    for param, (m, v), grad, index in zip(params, slots, grads, indices):
      dtype = param.dtype
      # Dense gradients: the original multiplies IndexedSlices by constants, which densifies
      # them, so every row of m and v decays each step.
      own = cast_coefficients[dtype]
      self._assign_new_values(
          param, m, v, tf.cast(tf.convert_to_tensor(grad), dtype), own[0],
          None if clip_scale is None else own[1],
          self._use_decay[index], self._adapts(index))

  def _distributed_update(self, distribution, grads_and_vars, learning_rate, clip_scale):
    def update_var(var, grad, learning_rate, clip_scale):
      return self.update_step(grad, var, learning_rate, clip_scale)

    for grad, var in grads_and_vars:
      distribution.extended.update(var, update_var, args=(grad, learning_rate, clip_scale),
                                   group=False)

  def update_step(self, gradient, variable, learning_rate, clip_scale=None):
    index = self._get_variable_index(variable)
    m, v = self._m[index], self._v[index]
    # The original multiplies IndexedSlices by constants, which densifies them: every row of
    # m and v decays each step.
    grad = tf.cast(tf.convert_to_tensor(gradient), variable.dtype)
    if clip_scale is not None:
      clip_scale = tf.cast(clip_scale, variable.dtype)
    learning_rate = tf.cast(learning_rate, variable.dtype)
    decay, adapt = self._use_decay[index], self._adapts(index)
    tf_vars = [_tf_variable(x) for x in (variable, m, v)]
    args = (grad, learning_rate, clip_scale, decay, adapt)
    if self.fused_update and not any(isinstance(x, tf.distribute.DistributedValues)
                                     for x in tf_vars):
      # Reads and assignments inside the XLA computation: it updates the buffers in place
      # (about a third less time than assigning its results). Mirrored variables take the
      # path below, where the strategy's update context picks each replica's copy.
      if self._fused_assign is None:
        self._fused_assign = tf.function(self._assign_new_values, jit_compile=True, autograph=False)
      self._fused_assign(*tf_vars, *args)
      return
    values = (tf.convert_to_tensor(variable), tf.convert_to_tensor(m), tf.convert_to_tensor(v))
    if self.fused_update:
      if self._fused_new_values is None:
        self._fused_new_values = tf.function(self._new_values, jit_compile=True, autograph=False)
      next_param, next_m, next_v = self._fused_new_values(*values, *args)
    else:
      next_param, next_m, next_v = self._new_values(*values, *args)
    self.assign(variable, next_param)
    self.assign(m, next_m)
    self.assign(v, next_v)

  def _assign_new_values(self, param, m, v, grad, learning_rate, clip_scale, decay, adapt):
    next_param, next_m, next_v = self._new_values(
        param.read_value(), m.read_value(), v.read_value(), grad, learning_rate, clip_scale,
        decay, adapt)
    param.assign(next_param)
    m.assign(next_m)
    v.assign(next_v)

  def _new_values(self, param, m, v, grad, learning_rate, clip_scale, decay, adapt):
    """(param, m, v) after one update; ``decay``/``adapt`` are Python bools, ``clip_scale``
    the global-norm clipping factor (None: ``grad`` is already clipped)."""
    if clip_scale is not None:
      grad = grad * clip_scale
    next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
    next_v = tf.multiply(self.beta_2, v) + tf.multiply(1.0 - self.beta_2, tf.square(grad))
    return self._update(param, next_m, next_v, learning_rate, decay, adapt), next_m, next_v

  def _adapts(self, index):
    """Whether variable ``index`` gets layer adaptation (LAMB only)."""
    del index
    return False

  def _update(self, param, next_m, next_v, learning_rate, decay, adapt):
    raise NotImplementedError

  def _bias_corrected_direction(self, param, next_m, next_v, decay):
    """m_hat / (sqrt(v_hat) + eps) [+ weight_decay_rate * param], t = updates so far + 1."""
    step = tf.cast(self.iterations + 1, param.dtype)
    m_hat = next_m / (1.0 - tf.pow(tf.cast(self.beta_1, param.dtype), step))
    v_hat = next_v / (1.0 - tf.pow(tf.cast(self.beta_2, param.dtype), step))
    update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
    if decay:
      update += self.weight_decay_rate * param
    return update

  # === Config ===

  def get_config(self):
    config = super().get_config()
    for key in self._UNSUPPORTED:
      config.pop(key, None)
    config.update({
        "weight_decay_rate": self.weight_decay_rate,
        "beta_1": self.beta_1,
        "beta_2": self.beta_2,
        "epsilon": self.epsilon,
        "exclude_from_weight_decay": list(self._weight_decay_exclusions),
        "fused_update": self.fused_update,
    })
    return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(_BertOptimizer):
  """Google's ``AdamWeightDecayOptimizer``: Adam without bias correction, decoupled decay.

  Same arithmetic as the original (see the module docstring); slots ``m``/``v`` are the
  original's ``adam_m``/``adam_v``.
  """

  def __init__(self, learning_rate, name="AdamWeightDecay", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)

  def _update(self, param, next_m, next_v, learning_rate, decay, adapt):
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    if decay:
      update += self.weight_decay_rate * param
    return param - learning_rate * update


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamW(_BertOptimizer):
  """Adam with bias correction and decoupled weight decay (Loshchilov & Hutter 2019).

  ``param -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay_rate * param)``; eps is added
  to sqrt(v_hat) as in the Adam paper's Algorithm 1 (Keras's Adam adds it to sqrt(v)).
  """

  def __init__(self, learning_rate, name="AdamW", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)

  def _update(self, param, next_m, next_v, learning_rate, decay, adapt):
    return param - learning_rate * self._bias_corrected_direction(param, next_m, next_v, decay)


@keras.saving.register_keras_serializable(package="bert_tf")
class LAMB(_BertOptimizer):
  """LAMB (You et al. 2019): the AdamW direction scaled per variable by ||param|| / ||update||.

  Args (beyond ``AdamWeightDecay``'s):
    exclude_from_layer_adaptation: name patterns whose variables get trust ratio 1; None
      means the same patterns as ``exclude_from_weight_decay`` (as in TF Addons and NVIDIA's
      BERT LAMB).
  """

  def __init__(self, learning_rate, exclude_from_layer_adaptation=None, name="LAMB",
               **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self._layer_adaptation_exclusions = (
        list(exclude_from_layer_adaptation) if exclude_from_layer_adaptation is not None
        else None)

  def build(self, variables):
    if self.built:
      return
    super().build(variables)
    patterns = (self._weight_decay_exclusions if self._layer_adaptation_exclusions is None
                else self._layer_adaptation_exclusions)
    self._use_layer_adaptation = [
        not any(re.search(p, variable_name(var)) for p in patterns) for var in variables]

  def _adapts(self, index):
    return self._use_layer_adaptation[index]

  def _update(self, param, next_m, next_v, learning_rate, decay, adapt):
    update = self._bias_corrected_direction(param, next_m, next_v, decay)
    if adapt:
      param_norm = tf.norm(param)
      update_norm = tf.norm(update)
      trust_ratio = tf.where(
          param_norm > 0,
          tf.where(update_norm > 0, param_norm / update_norm, tf.ones_like(param_norm)),
          tf.ones_like(param_norm))
      update = trust_ratio * update
    return param - learning_rate * update

  def get_config(self):
    config = super().get_config()
    config["exclude_from_layer_adaptation"] = self._layer_adaptation_exclusions
    return config


OPTIMIZERS = {
    "adamw_original": AdamWeightDecay,
    "adamw": AdamW,
    "lamb": LAMB,
}


def create_optimizer(init_lr, num_train_steps, num_warmup_steps,
                     optimizer_type=DEFAULT_OPTIMIZER_TYPE,
                     weight_decay_rate=DEFAULT_WEIGHT_DECAY_RATE,
                     beta_1=DEFAULT_BETA_1, beta_2=DEFAULT_BETA_2, epsilon=DEFAULT_EPSILON,
                     clip_norm=DEFAULT_CLIP_NORM,
                     exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                     exclude_from_layer_adaptation=None,
                     end_learning_rate=0.0, power=1.0):
  """The original ``create_optimizer``'s optimizer: schedule + optimizer + global-norm clip.

  Args:
    init_lr: peak learning rate (float).
    num_train_steps: updates until the learning rate reaches ``end_learning_rate``.
    num_warmup_steps: updates of linear warmup from 0 (0 = no warmup).
    optimizer_type: "adamw_original" (Google's, default), "adamw" or "lamb".
    clip_norm: global-norm clip of the summed gradient before each update; 0 or None: none.
    exclude_from_layer_adaptation: LAMB only (see ``LAMB``).
  Returns:
    A Keras optimizer (create it under the strategy's scope).
  Raises:
    BertTfError: a value that cannot make a schedule or an unknown ``optimizer_type``.
  """
  if optimizer_type not in OPTIMIZERS:
    raise BertTfError(f"optimizer_type {optimizer_type!r} is not one of "
                      f"{', '.join(OPTIMIZERS)}")
  if int(num_train_steps) != num_train_steps or num_train_steps < 1:
    raise BertTfError(f"num_train_steps must be a positive integer, got {num_train_steps}")
  if int(num_warmup_steps) != num_warmup_steps or num_warmup_steps < 0:
    raise BertTfError(f"num_warmup_steps must be an integer >= 0, got {num_warmup_steps}")
  if clip_norm is not None and clip_norm < 0:
    raise BertTfError(f"clip_norm must be >= 0 (0 = no clipping), got {clip_norm}")
  schedule = WarmupPolynomialDecay(
      float(init_lr), int(num_train_steps), int(num_warmup_steps),
      end_learning_rate=end_learning_rate, power=power)
  kwargs = {}
  if optimizer_type == "lamb":
    kwargs["exclude_from_layer_adaptation"] = exclude_from_layer_adaptation
  return OPTIMIZERS[optimizer_type](
      learning_rate=schedule,
      weight_decay_rate=weight_decay_rate,
      beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
      exclude_from_weight_decay=list(exclude_from_weight_decay or []),
      global_clipnorm=clip_norm or None,
      **kwargs)
