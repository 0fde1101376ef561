"""bert_tf.optimization against Google's optimization.py (graph mode) and published formulas."""

import contextlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.errors import BertTfError
from bert_tf.training import distribution

# BERT-named variables: a LayerNorm gamma and a bias (no decay), a kernel and a head weight
# (decay). Shapes are tiny; values are random so that decay and clipping matter.
VARIABLES = {
    "bert/encoder/layer_0/attention/output/LayerNorm/gamma": (4,),
    "bert/encoder/layer_0/attention/output/dense/bias": (4,),
    "bert/encoder/layer_0/attention/output/dense/kernel": (3, 4),
    "cls/seq_relationship/output_weights": (2, 4),
}
NUM_STEPS = 10
NUM_TRAIN_STEPS = 12
NUM_WARMUP_STEPS = 3
INIT_LR = 0.1  # Large, so that each update moves the weights visibly.


def _initial_values(seed=0):
  rng = np.random.RandomState(seed)
  return {name: rng.normal(size=shape).astype(np.float32) for name, shape in VARIABLES.items()}


def _gradients(seed=1):
  """NUM_STEPS lists of gradients; global norms alternate above and below the clip norm 1."""
  rng = np.random.RandomState(seed)
  steps = []
  for step in range(NUM_STEPS):
    grads = [rng.normal(size=shape).astype(np.float32) for shape in VARIABLES.values()]
    norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    target = 3.0 if step % 2 == 0 else 0.5
    steps.append([(g * (target / norm)).astype(np.float32) for g in grads])
  return steps


def _keras_variable(path, value):
  """A Keras variable whose ``path`` is ``path`` (Keras names may not contain '/')."""
  *scopes, name = path.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(keras.name_scope(scope))
    variable = keras.Variable(value, name=name)
  assert variable.path == path
  return variable


# Google's train_op groups the update with `global_step.assign(global_step + 1)` and no
# ordering between that assign and the learning-rate schedule's read of global_step: with
# several inter-op threads the read can, rarely, see the incremented step (one step of the
# schedule off; seen twice in this suite). With one inter-op thread the order is fixed, and
# the read comes first (the pre-increment step, as the original intends and bert_tf does).
_ONE_THREAD = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=1,
                                       intra_op_parallelism_threads=1)


def _agreed(run):
  """``run()`` of a Google reference, repeated until two runs in a row give the same numbers.

  One inter-op thread made the race above rare, not impossible (it still showed once in the
  sparse-embedding test); a racing run disagrees with the runs around it.
  """
  same = lambda a, b: all(np.array_equal(x, y)  # noqa: E731
                          for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)))
  last = run()
  for _ in range(4):
    again = run()
    if same(last, again):
      return again
    last = again
  raise AssertionError("Google's reference gave different numbers in every run")


def _run_google(initial_values, gradient_steps):
  """Google's create_optimizer in graph mode; returns per step {name: (param, adam_m, adam_v)}."""
  return _agreed(lambda: _run_google_once(initial_values, gradient_steps))


def _run_google_once(initial_values, gradient_steps):
  from tests.reference.google_bert import google
  original = google("optimization")
  tf1 = tf.compat.v1
  history = []
  with tf.Graph().as_default():
    params, feeds = [], []
    for name, value in initial_values.items():
      scope, short_name = name.rsplit("/", 1)
      with tf1.variable_scope(scope):
        params.append(tf1.get_variable(short_name, initializer=tf.constant(value)))
      feeds.append(tf1.placeholder(tf.float32, value.shape))
    # d/dparam sum(g * param) = g exactly: the original computes tf.gradients(loss) itself.
    loss = tf.add_n([tf.reduce_sum(tf.stop_gradient(g) * p) for g, p in zip(feeds, params)])
    train_op = original.create_optimizer(
        loss, INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS, use_tpu=False)
    slots = {v.op.name: v for v in tf1.global_variables()}
    with tf1.Session(config=_ONE_THREAD) as session:
      session.run(tf1.global_variables_initializer())
      for grads in gradient_steps:
        session.run(train_op, feed_dict=dict(zip(feeds, grads)))
        history.append({name: session.run((slots[name], slots[name + "/adam_m"],
                                           slots[name + "/adam_v"]))
                        for name in initial_values})
      assert session.run(tf1.train.get_global_step()) == len(gradient_steps)
  return history


def _run_ours(optimizer, variables, gradient_steps, jit_compile=False):
  optimizer.build(variables)

  @tf.function(jit_compile=jit_compile)
  def apply(grads):
    optimizer.apply_gradients(zip(grads, variables))

  history = []
  for grads in gradient_steps:
    apply([tf.constant(g) for g in grads])
    history.append({v.path: (v.numpy(), optimizer.slot(v, "m").numpy(),
                             optimizer.slot(v, "v").numpy()) for v in variables})
  return history


@pytest.mark.parametrize("fused", [False, True, "whole"])
def test_adam_weight_decay_matches_google_step_for_step(fused):
  """Unfused: the original's ops, to the last bit or nearly. Fused (each variable's update
  and the clipping in one XLA computation): the same to float32 rounding. Whole (every
  variable's update, the grouped global norm and the clipping in ONE XLA computation, what
  the training loop uses with a GPU): the same to float32 rounding."""
  initial_values, gradient_steps = _initial_values(), _gradients()
  expected = _run_google(initial_values, gradient_steps)
  variables = [_keras_variable(name, value) for name, value in initial_values.items()]
  optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
  optimizer.fused_update = bool(fused)
  optimizer.fuse_all_variables = fused == "whole"
  assert isinstance(optimizer, optimization.AdamWeightDecay)
  assert [optimizer.uses_weight_decay(v) for v in variables] == [False, False, True, True]
  actual = _run_ours(optimizer, variables, gradient_steps)
  rtol, atol = (1e-5, 1e-7) if fused else (1e-7, 1e-9)
  for step, (want, got) in enumerate(zip(expected, actual)):
    for name in initial_values:
      for what, w, g in zip(("param", "adam_m", "adam_v"), want[name], got[name]):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                   err_msg=f"step {step + 1} {name} {what}")
  # The test must be able to fail: the weights really moved, decay and clipping included.
  first = expected[-1]["bert/encoder/layer_0/attention/output/dense/kernel"][0]
  assert np.abs(first - initial_values["bert/encoder/layer_0/attention/output/dense/kernel"]
                ).max() > 0.1


def test_adam_weight_decay_same_under_jit_compile():
  initial_values, gradient_steps = _initial_values(2), _gradients(3)
  histories = []
  for jit_compile in (False, True):
    variables = [_keras_variable(name, value) for name, value in initial_values.items()]
    optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
    histories.append(_run_ours(optimizer, variables, gradient_steps[:4], jit_compile))
  for eager_step, jit_step in zip(*histories):
    for name in initial_values:
      np.testing.assert_allclose(jit_step[name][0], eager_step[name][0], rtol=1e-6, atol=1e-7)


def _schedule_formula(step, init_lr, num_train_steps, num_warmup_steps, end_lr=0.0, power=1.0):
  if num_warmup_steps and step < num_warmup_steps:
    return init_lr * step / num_warmup_steps
  step = min(step, num_train_steps)
  return (init_lr - end_lr) * (1 - step / num_train_steps) ** power + end_lr


@pytest.mark.parametrize("num_warmup_steps,end_lr,power", [(10, 0.0, 1.0), (0, 0.0, 1.0),
                                                            (7, 1e-6, 0.5)])
def test_schedule_matches_formula(num_warmup_steps, end_lr, power):
  schedule = optimization.WarmupPolynomialDecay(
      2e-5, num_train_steps=100, num_warmup_steps=num_warmup_steps,
      end_learning_rate=end_lr, power=power)
  for step in [0, 1, 5, 6, 9, 10, 11, 50, 99, 100, 150]:
    want = _schedule_formula(step, 2e-5, 100, num_warmup_steps, end_lr, power)
    got = float(schedule(tf.constant(step, tf.int64)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12, err_msg=f"step {step}")
  assert float(schedule(0)) == (0.0 if num_warmup_steps else np.float32(2e-5))
  restored = optimization.WarmupPolynomialDecay.from_config(schedule.get_config())
  assert float(restored(42)) == float(schedule(42))


def _numpy_reference(kind, initial_values, gradient_steps, decayed, weight_decay_rate=0.01,
                     beta_1=0.9, beta_2=0.999, epsilon=1e-6, clip_norm=1.0):
  """AdamW (Loshchilov & Hutter) and LAMB (You et al., Alg. 2) in float64, from the papers."""
  params = {n: v.astype(np.float64) for n, v in initial_values.items()}
  m = {n: np.zeros_like(v) for n, v in params.items()}
  v = {n: np.zeros_like(p) for n, p in params.items()}
  history = []
  for t, grads in enumerate(gradient_steps, start=1):
    grads = [g.astype(np.float64) for g in grads]
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
    lr = _schedule_formula(t - 1, INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
    for name, g in zip(params, grads):
      m[name] = beta_1 * m[name] + (1 - beta_1) * g
      v[name] = beta_2 * v[name] + (1 - beta_2) * g ** 2
      m_hat = m[name] / (1 - beta_1 ** t)
      v_hat = v[name] / (1 - beta_2 ** t)
      r = m_hat / (np.sqrt(v_hat) + epsilon)
      if decayed[name]:
        r = r + weight_decay_rate * params[name]
      if kind == "lamb" and decayed[name]:  # Layer adaptation follows the decay exclusion.
        w_norm, r_norm = np.linalg.norm(params[name]), np.linalg.norm(r)
        r = r * (w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0)
      params[name] = params[name] - lr * r
    history.append(dict(params))
  return history


@pytest.mark.parametrize("fused", [False, True, "whole"])
@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_adamw_and_lamb_match_published_formulas(optimizer_type, fused):
  initial_values, gradient_steps = _initial_values(4), _gradients(5)
  decayed = {name: not any(p in name for p in ("LayerNorm", "bias")) for name in VARIABLES}
  expected = _numpy_reference(optimizer_type, initial_values, gradient_steps, decayed)
  variables = [_keras_variable(name, value) for name, value in initial_values.items()]
  optimizer = optimization.create_optimizer(
      INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS, optimizer_type=optimizer_type)
  optimizer.fused_update = bool(fused)
  optimizer.fuse_all_variables = fused == "whole"  # one XLA computation, as with a GPU
  actual = _run_ours(optimizer, variables, gradient_steps)
  for step, (want, got) in enumerate(zip(expected, actual)):
    for name in initial_values:
      np.testing.assert_allclose(got[name][0], want[name], rtol=2e-5, atol=2e-6,
                                 err_msg=f"{optimizer_type} step {step + 1} {name}")


def test_lamb_can_keep_layer_adaptation_for_excluded_variables():
  initial_values, gradient_steps = _initial_values(6), _gradients(7)
  name = "bert/encoder/layer_0/attention/output/LayerNorm/gamma"
  variable = _keras_variable(name, initial_values[name])
  optimizer = optimization.create_optimizer(
      INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS, optimizer_type="lamb",
      exclude_from_layer_adaptation=[])
  grads = [[g[0]] for g in gradient_steps[:NUM_WARMUP_STEPS + 1]]
  actual = _run_ours(optimizer, [variable], grads)[-1][name][0]
  # No decay (name matches LayerNorm) but the trust ratio applies: the last step moves the
  # parameter by lr * ||w|| along the unit Adam direction.
  before = _run_ours(optimization.create_optimizer(
      INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS, optimizer_type="lamb",
      exclude_from_layer_adaptation=[]), [_keras_variable(name, initial_values[name])],
      grads[:-1])[-1][name][0]
  lr = _schedule_formula(NUM_WARMUP_STEPS, INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
  np.testing.assert_allclose(np.linalg.norm(actual - before), lr * np.linalg.norm(before),
                             rtol=1e-5)


@pytest.mark.parametrize("fused", [False, True, "whole"])
def test_lamb_trust_ratio_is_one_where_a_norm_is_zero(fused):
  """LAMB's ratio ||w|| / ||u|| is 1 where either norm is 0 (TF Addons' and NVIDIA's LAMB):
  a kernel that starts at zero moves by the Adam direction, lr * g / (|g| + eps) at the first
  update (bias-corrected m_hat = g, v_hat = g^2); one whose gradient and decay are zero stays
  where it is (mutation audit: a ratio of 0 for a zero weight, and 0/0 where the update is 0,
  went unnoticed: the random weights of the tests above are never zero)."""
  zero = _keras_variable("bert/encoder/layer_0/intermediate/dense/kernel",
                         np.zeros((3, 4), np.float32))
  still = _keras_variable("bert/encoder/layer_0/output/dense/kernel",
                          _initial_values()["bert/encoder/layer_0/attention/output/dense/kernel"])
  optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, 0, optimizer_type="lamb",
                                            weight_decay_rate=0.0, clip_norm=0.0)
  optimizer.fused_update = bool(fused)
  optimizer.fuse_all_variables = fused == "whole"
  grad = np.random.RandomState(8).normal(size=(3, 4)).astype(np.float32)
  before = still.numpy()
  after = _run_ours(optimizer, [zero, still], [[grad, np.zeros((3, 4), np.float32)]])[-1]
  assert optimizer._use_layer_adaptation == [True, True]  # pylint: disable=protected-access
  np.testing.assert_allclose(after[zero.path][0], -INIT_LR * grad / (np.abs(grad) + 1e-6),
                             rtol=1e-5)
  np.testing.assert_array_equal(after[still.path][0], before)


@pytest.mark.parametrize("fused", [False, True])
def test_clipping_happens_on_the_global_gradient(fused):
  """Global norm 1: a gradient of norm 5 moves Adam's m by (1 - b1) * g / 5."""
  variable = _keras_variable("dense/kernel", np.zeros((2,), np.float32))
  optimizer = optimization.create_optimizer(0.1, 10, 0, weight_decay_rate=0.0)
  optimizer.fused_update = fused
  _run_ours(optimizer, [variable], [[np.array([3.0, 4.0], np.float32)]])
  np.testing.assert_allclose(optimizer.slot(variable, "m").numpy(), [0.06, 0.08], rtol=1e-6)
  unclipped = optimization.create_optimizer(0.1, 10, 0, weight_decay_rate=0.0, clip_norm=0)
  variable = _keras_variable("dense/kernel", np.zeros((2,), np.float32))
  _run_ours(unclipped, [variable], [[np.array([3.0, 4.0], np.float32)]])
  np.testing.assert_allclose(unclipped.slot(variable, "m").numpy(), [0.3, 0.4], rtol=1e-6)


def _mirrored_or_skip():
  if len(tf.config.list_logical_devices("CPU")) < 2:
    pytest.skip("needs the 2 logical CPUs from tests/conftest.py")
  return distribution.get_strategy("mirrored")


@pytest.mark.parametrize("optimizer_type,fused", [("adamw_original", False), ("lamb", False),
                                                  ("adamw_original", True)])
def test_mirrored_strategy_sums_then_clips_like_one_device(optimizer_type, fused):
  """Two replicas with gradients a and b update as one device with a + b (clip after sum).

  a = g + d and b = -d, d random with a global norm of 2: each replica's own gradient is above
  the clip norm and points elsewhere than the sum, so clipping them before the sum (a replica
  clipping its own gradient) would give another update; parts along g (0.25 g, 0.75 g) could
  not show it (mutation audit: a clip before the all-reduce went unnoticed)."""
  strategy = _mirrored_or_skip()
  assert strategy.num_replicas_in_sync == 2
  initial_values, gradient_steps = _initial_values(8), _gradients(9)[:4]
  rng = np.random.RandomState(4)
  halves = []
  for grads in gradient_steps:
    d = [rng.normal(size=g.shape).astype(np.float32) for g in grads]
    scale = 2.0 / np.sqrt(sum(float(np.sum(x.astype(np.float64) ** 2)) for x in d))
    d = [(x * scale).astype(np.float32) for x in d]
    halves.append([[g + x for g, x in zip(grads, d)], [-x for x in d]])

  with strategy.scope():
    variables = [_keras_variable(n, v) for n, v in initial_values.items()]
    optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS,
                                              optimizer_type=optimizer_type)
    optimizer.fused_update = fused
    optimizer.build(variables)

  @tf.function
  def distributed_step(per_replica_grads):
    def step(grads):
      optimizer.apply_gradients(zip(grads, variables))
    strategy.run(step, args=(per_replica_grads,))

  for replica_grads in halves:
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx, rg=replica_grads: [tf.constant(g) for g in rg[ctx.replica_id_in_sync_group]])
    distributed_step(per_replica)

  one_device = [_keras_variable(n, v) for n, v in initial_values.items()]
  expected = _run_ours(optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS,
                                                     NUM_WARMUP_STEPS,
                                                     optimizer_type=optimizer_type),
                       one_device, gradient_steps)[-1]
  assert int(optimizer.iterations.numpy()) == len(gradient_steps)
  for variable in variables:
    for replica_value in strategy.experimental_local_results(variable.value):
      np.testing.assert_allclose(replica_value.numpy(), expected[variable.path][0],
                                 rtol=1e-5 if fused else 1e-6, atol=1e-7, err_msg=variable.path)


@pytest.mark.parametrize("fused", [False, True, "whole"])
def test_sparse_embedding_gradient_matches_google(fused):
  """An IndexedSlices gradient (tf.gather, repeated ids) updates as the original's one-hot
  embeddings (its TPU path, use_one_hot_embeddings=True; its token types everywhere): the
  clip measures the dense gradient, rows of repeated ids summed, and the update is dense.
  (The original's gather on a GPU measured the rows apart: another clip, checked to differ.)
  """
  from tests.reference.google_bert import google
  original, modeling = google("optimization"), google("modeling")
  tf1 = tf.compat.v1
  rng = np.random.RandomState(13)
  table = rng.normal(size=(5, 3)).astype(np.float32)
  ids = np.array([1, 3, 1, 4], np.int32)
  upstreams = [rng.normal(size=(4, 3)).astype(np.float32) * scale for scale in (2.0, 0.1, 1.0)]

  def run_google(one_hot):
    with tf.Graph().as_default():
      with tf1.variable_scope("bert/embeddings"):
        output, embeddings = modeling.embedding_lookup(
            tf.constant(ids[np.newaxis]), 5, 3, use_one_hot_embeddings=one_hot)
      upstream = tf1.placeholder(tf.float32, (4, 3))
      loss = tf.reduce_sum(tf.reshape(output, [4, 3]) * tf.stop_gradient(upstream))
      train_op = original.create_optimizer(loss, INIT_LR, NUM_TRAIN_STEPS, 1, use_tpu=False)
      with tf1.Session(config=_ONE_THREAD) as session:
        session.run(tf1.global_variables_initializer())
        embeddings.load(table, session)
        values = []
        for value in upstreams:
          session.run(train_op, {upstream: value})
          values.append(session.run(embeddings))
    return values

  expected = _agreed(lambda: run_google(one_hot=True))
  gathered = run_google(one_hot=False)
  # The row-by-row clip is another (Adam's first step hardly sees a scale; later ones do).
  assert max(np.abs(g - e).max() for g, e in zip(gathered, expected)) > 1e-4

  variable = _keras_variable("bert/embeddings/word_embeddings", table)
  optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, 1)
  optimizer.fused_update = bool(fused)
  optimizer.fuse_all_variables = fused == "whole"
  optimizer.build([variable])
  rtol, atol = (1e-6, 1e-8) if fused else (1e-7, 1e-9)
  for value, want in zip(upstreams, expected):
    grad = tf.IndexedSlices(tf.constant(value), tf.constant(ids), tf.constant([5, 3]))
    optimizer.apply_gradients([(grad, variable)])
    np.testing.assert_allclose(variable.numpy(), want, rtol=rtol, atol=atol)
  assert np.abs(expected[-1] - table).max() > 0.05


def test_loss_scale_optimizer_wrapping_gives_the_unscaled_update():
  """Keras's LossScaleOptimizer (float16 training) unscales, then ours clips and updates."""
  initial_values, gradient_steps = _initial_values(14), _gradients(15)[:3]
  plain = [_keras_variable(n, v) for n, v in initial_values.items()]
  expected = _run_ours(optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS,
                                                     NUM_WARMUP_STEPS),
                       plain, gradient_steps)[-1]
  scaled = [_keras_variable(n, v) for n, v in initial_values.items()]
  inner = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
  optimizer = keras.optimizers.LossScaleOptimizer(inner, initial_scale=2.0 ** 15)
  optimizer.build(scaled)
  for grads in gradient_steps:
    optimizer.apply_gradients(zip([tf.constant(g) * 2.0 ** 15 for g in grads], scaled))
  for variable in scaled:
    np.testing.assert_array_equal(variable.numpy(), expected[variable.path][0])
  assert int(inner.iterations.numpy()) == len(gradient_steps)


def test_keras_fit_applies_the_same_updates_as_a_custom_loop():
  rng = np.random.RandomState(10)
  x = rng.normal(size=(8, 3)).astype(np.float32)
  y = rng.normal(size=(8, 2)).astype(np.float32)

  def make_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="dense")])

  model = make_model()
  model.compile(optimizer=optimization.create_optimizer(0.01, 10, 2), loss="mse")
  model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)

  reference = make_model()
  optimizer = optimization.create_optimizer(0.01, 10, 2)
  for batch in range(2):
    with tf.GradientTape() as tape:
      prediction = reference(x[batch * 4:(batch + 1) * 4])
      loss = tf.reduce_mean(tf.reduce_mean(tf.square(prediction - y[batch * 4:][:4]), -1))
    grads = tape.gradient(loss, reference.trainable_variables)
    optimizer.apply_gradients(zip(grads, reference.trainable_variables))
  assert int(model.optimizer.iterations.numpy()) == 2
  for got, want in zip(model.trainable_variables, reference.trainable_variables):
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
  assert np.abs(model.get_layer("dense").kernel.numpy() -
                make_model().get_layer("dense").kernel.numpy()).max() > 1e-4


def test_checkpoint_restores_slots_and_step(tmp_path):
  """A run resumed from a tf.train.Checkpoint continues exactly as the uninterrupted run."""
  initial_values, gradient_steps = _initial_values(11), _gradients(12)[:4]

  def fresh():
    variables = [_keras_variable(n, v) for n, v in initial_values.items()]
    optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
    optimizer.build(variables)
    return variables, optimizer, tf.train.Checkpoint(optimizer=optimizer, variables=variables)

  variables, optimizer, checkpoint = fresh()
  _run_ours(optimizer, variables, gradient_steps[:2])
  path = checkpoint.write(str(tmp_path / "ckpt"))
  uninterrupted = _run_ours(optimizer, variables, gradient_steps[2:])[-1]

  variables, optimizer, checkpoint = fresh()
  checkpoint.read(path).assert_consumed()
  assert int(optimizer.iterations.numpy()) == 2
  resumed = _run_ours(optimizer, variables, gradient_steps[2:])[-1]
  for name in initial_values:
    for want, got in zip(uninterrupted[name], resumed[name]):
      np.testing.assert_array_equal(got, want, err_msg=name)


def test_bad_arguments_are_one_line_errors():
  with pytest.raises(BertTfError, match="optimizer_type 'sgd' is not one of"):
    optimization.create_optimizer(1e-4, 10, 1, optimizer_type="sgd")
  with pytest.raises(BertTfError, match="num_train_steps must be a positive integer, got 0"):
    optimization.create_optimizer(1e-4, 0, 0)
  with pytest.raises(BertTfError, match="num_warmup_steps must be an integer >= 0"):
    optimization.create_optimizer(1e-4, 10, -1)
  with pytest.raises(ValueError, match="gradient_accumulation_steps"):
    optimization.AdamWeightDecay(1e-4, gradient_accumulation_steps=2)


@pytest.mark.parametrize("optimizer_type", ["adamw_original", "adamw", "lamb"])
def test_config_round_trips_through_keras_serialization(optimizer_type):
  optimizer = optimization.create_optimizer(
      3e-5, 50, 5, optimizer_type=optimizer_type, weight_decay_rate=0.02,
      exclude_from_weight_decay=["LayerNorm"], clip_norm=2.0)
  restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
  assert type(restored) is type(optimizer)
  assert restored.get_config() == optimizer.get_config()
  assert float(restored.learning_rate) == float(optimizer.learning_rate) == 0.0
  # The restored optimizer decides decay the same way: bias is decayed, LayerNorm is not.
  bias = _keras_variable("dense/bias", np.zeros(2, np.float32))
  gamma = _keras_variable("LayerNorm/gamma", np.ones(2, np.float32))
  assert [restored.uses_weight_decay(v) for v in (bias, gamma)] == [True, False]


def test_grouped_global_norm_is_the_global_norm():
  """The whole-update path's norm (small gradients summed in concatenated groups) against the
  norm written out in float64, and tf.linalg.global_norm, eager and under XLA."""
  rng = np.random.RandomState(3)
  small = [rng.normal(size=(int(n),)).astype(np.float32) for n in rng.randint(1, 2000, 100)]
  small.append(rng.normal(size=(64, 8)).astype(np.float32))
  large = [rng.normal(size=(300, 300)).astype(np.float32) * 0.01 for _ in range(2)]
  rows = rng.normal(size=(4, 3)).astype(np.float32)
  sparse = tf.IndexedSlices(tf.constant(rows), tf.constant([1, 3, 1, 4]), tf.constant([5, 3]))
  tensors = [tf.constant(t) for t in small[:50]] + [sparse] + [tf.constant(t) for t in large]
  tensors += [None] + [tf.constant(t) for t in small[50:]]
  # An IndexedSlices counts as its dense sum (rows of repeated ids added first), as the
  # original's one-hot embeddings' gradient.
  dense = np.zeros((5, 3))
  np.add.at(dense, [1, 3, 1, 4], rows.astype(np.float64))
  assert abs(np.sum(np.square(dense)) - np.sum(np.square(rows.astype(np.float64)))) > 0.1
  want = np.sqrt(sum(np.sum(np.square(t.astype(np.float64))) for t in small + large + [dense]))
  eager = optimization.grouped_global_norm(tensors).numpy()
  compiled = tf.function(optimization.grouped_global_norm, jit_compile=True)(tensors).numpy()
  reference = tf.linalg.global_norm(
      optimization.dense_gradients([t for t in tensors if t is not None])).numpy()
  np.testing.assert_allclose(reference, want, rtol=1e-6)
  np.testing.assert_allclose(eager, want, rtol=1e-6)
  np.testing.assert_allclose(compiled, want, rtol=1e-6)
  # 102 small tensors and 2 matrices (one row reduction each): ceil(104 / 48) = 3 groups.
  # (Traced over the tensors as constants: the IndexedSlices' dense shape known, as a
  # variable's gradient's is.)
  graph = tf.function(lambda: optimization.grouped_global_norm(tensors)).get_concrete_function(
  ).graph
  ops = [op.type for op in graph.get_operations()]
  assert ops.count("ConcatV2") == 3 and ops.count("Sum") == 2 + 3
  assert optimization.grouped_global_norm([]).numpy() == 0.0


def test_whole_update_shares_its_coefficients_as_one_vector():
  """The whole-update XLA computation hands every variable's update the learning rate and the
  clip factor as one f32[2] vector behind an optimization barrier (XLA cannot fold it back into
  scalars; a GPU then fuses sibling updates of one shape into one kernel, BENCHMARKS.md), and
  the global norm's groups behind one too. The numbers: the step-for-step test above."""
  values = {"a/bias": np.ones(4, np.float32), "b/bias": np.full(4, 2.0, np.float32),
            "c/kernel": np.ones((3, 4), np.float32)}
  variables = [_keras_variable(name, value) for name, value in values.items()]
  optimizer = optimization.create_optimizer(INIT_LR, NUM_TRAIN_STEPS, 0)
  optimizer.fused_update = True
  optimizer.fuse_all_variables = True
  grads = [tf.constant(np.full(v.shape, 0.5, np.float32)) for v in variables]
  optimizer.apply_gradients(zip(grads, variables))
  tf_variables = [optimization._tf_variable(v) for v in variables]  # pylint: disable=protected-access
  slots = [(optimization._tf_variable(optimizer.slot(v, "m")),  # pylint: disable=protected-access
            optimization._tf_variable(optimizer.slot(v, "v")))  # pylint: disable=protected-access
           for v in variables]
  indices = tuple(optimizer._get_variable_index(v) for v in variables)  # pylint: disable=protected-access
  hlo = optimizer._fused_apply_all.experimental_get_compiler_ir(  # pylint: disable=protected-access
      tf_variables, slots, grads, indices)(stage="hlo")
  barriers = [line for line in hlo.splitlines() if "opt-barrier(" in line]
  assert any(re.search(r"= \(?f32\[2\]\S* opt-barrier", line) for line in barriers), barriers
  assert len(barriers) == 2, barriers  # the coefficients, the norm's one group
  # The updates moved the variables (the computation is the real update, not a stub).
  assert np.abs(variables[0].numpy() - values["a/bias"]).max() > 0
