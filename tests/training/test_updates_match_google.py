"""Fine-tuning UPDATES against Google's original run_classifier + optimization (graph mode).

The same tiny BERT classifier (dropout 0) starts from the same Google-format checkpoint and
takes 3 updates on the same 3 batches (padding, both segments, repeated word ids) with the
original's optimizer settings (AdamWeightDecay, lr 1e-3, warmup 1 of 10 steps, global-norm
clip 1.0, ACTIVE at every update: norms 5.7, 5.4, 3.0). Every variable and both Adam slots,
by Google name, must agree after every update:

  (a) the original: ``run_classifier.create_model(..., is_training=True,
      use_one_hot_embeddings=True)`` (its TPU path; token types are one-hot always) and
      ``optimization.create_optimizer(loss, lr, 10, 1, use_tpu=False)`` in a tf1 Session;
  (b) bert_tf: ``loop.Trainer`` with the ``ClassifierTask`` (as ``run_classifier``), its
      ``BertClassifier(classifier_dropout=0.0)``, ``optimization.create_optimizer`` and
      ``checkpoints.load_weights`` of the same checkpoint, one batch per loop; without XLA,
      with XLA (per-variable fused updates) and with the whole update as one XLA computation
      (the GPU path, forced on CPU).

Tolerances (float32, absolute, measured on CPU; max |bert_tf - original| after update 2 / 3):
  weights      2.1e-7 / 3.7e-7 (XLA; 1.6e-7 / 2.7e-7 without): WEIGHT_ATOL 1e-6
  key biases   3.1e-7 / 9.5e-7: KEY_BIAS_ATOL 5e-6. An attention key bias adds q.b to every
               score of a softmax row, so its gradient is 0 in exact arithmetic: what each
               side computes is rounding noise (~1e-10), which Adam (no bias correction,
               eps 1e-6) turns into ~lr * 1e-4 per update, independently on each side.
  Adam slots   1.3e-8 (adam_m; adam_v far smaller): SLOT_ATOL 1e-7
Update 1 has learning rate 0 (warmup): only the slots move, and the weights agree exactly.
Adam's step is nearly scale-free (m / sqrt(v)), so a gradient element's relative rounding
error becomes about lr x that error in its weight: these tolerances are ~1e-3 x lr, while a
real difference shows at 1e-5..1e-3 (test_a_different_update_is_seen: the original's gather
path, whose clip measures the word-embedding gradient row by row, 6e-6 / 2.8e-5; a clip norm
of 1.1 instead of 1.0, 9e-5 / 1.7e-4).
"""

import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import optimization
from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.training import classifier, loop
from tests.reference import google_models
from tests.reference.google_bert import google

tf1 = tf.compat.v1

CONFIG = google_models.tiny_config_dict(hidden_dropout_prob=0.0,
                                        attention_probs_dropout_prob=0.0)
BATCH, SEQ, NUM_LABELS = 4, 16, 2
LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS = 1e-3, 10, 1
NUM_UPDATES = 3
WEIGHT_ATOL, KEY_BIAS_ATOL, SLOT_ATOL = 1e-6, 5e-6, 1e-7
KEY_BIAS = "attention/self/key/bias"
# The checkpoint's values: N(0, 0.2) (LayerNorm gammas 1 + N(0, 0.2)), far from the
# initialisers, so that the gradients' global norm is well above the clip norm 1.
SCALE = 0.2

# Google's train_op groups the update with `global_step.assign(global_step + 1)` and no order
# between that assign and the learning-rate schedule's read of global_step (see
# test_optimization.py): one thread makes the race rare, and runs are repeated until two in a
# row agree.
_ONE_THREAD = tf1.ConfigProto(inter_op_parallelism_threads=1, intra_op_parallelism_threads=1)


def _batches(seed=7):
  """3 batches: random ids (repeated ids forced), padding, segments 0 then 1, labels 0/1."""
  rng = np.random.RandomState(seed)
  batches = []
  for _ in range(NUM_UPDATES):
    lengths = rng.randint(SEQ // 2, SEQ + 1, size=BATCH)
    lengths[0] = SEQ
    input_mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    input_ids = rng.randint(1, CONFIG["vocab_size"], size=(BATCH, SEQ))
    input_ids[:, 3] = input_ids[:, 1]                # a word twice in each example
    input_ids[1, 2] = input_ids[0, 4]                # and one across examples
    input_ids = (input_ids * input_mask).astype(np.int32)
    segment_ids = ((np.arange(SEQ)[None, :] >= lengths[:, None] // 2) * input_mask
                   ).astype(np.int32)
    label_ids = np.array([0, 1, 1, 0], np.int32)
    rng.shuffle(label_ids)
    batches.append({"input_ids": input_ids, "input_mask": input_mask,
                    "segment_ids": segment_ids, "label_ids": label_ids})
  assert all((b["segment_ids"] == 1).any() and (b["input_mask"] == 0).any() for b in batches)
  return batches


def _no_dropout(x, keep_prob=None, **_):
  del keep_prob
  return x


def _google_graph(checkpoint, use_one_hot_embeddings, make_checkpoint=False):
  """The original's training graph (placeholders, train_op, loss, gradient norm, variables,
  the model variables' saver), built once; each run restores ``checkpoint`` into it. With
  ``make_checkpoint``, first writes ``checkpoint``: every model variable (the classifier
  head's too, so that both sides start from the same head) drawn at random."""
  run_classifier, modeling = google("run_classifier"), google("modeling")
  original_optimization = google("optimization")
  graph = tf.Graph()
  with graph.as_default():
    feeds = {k: tf1.placeholder(tf.int32, [BATCH, SEQ])
             for k in ("input_ids", "input_mask", "segment_ids")}
    feeds["label_ids"] = tf1.placeholder(tf.int32, [BATCH])
    config = modeling.BertConfig.from_dict(CONFIG)
    # create_model's head applies `tf.nn.dropout(output_layer, keep_prob=0.9)` whenever
    # is_training, whatever the config: random masks no other implementation can reproduce.
    # It is the identity while the graph is built (bert_tf's side: classifier_dropout=0.0);
    # the encoder's dropouts are off through the config (modeling.dropout skips rate 0).
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(tf1.nn, "dropout", _no_dropout)
      # create_model reads `shape[-1].value` (TF1 Dimensions): TF1 shapes while it builds.
      tf1.disable_v2_tensorshape()
      try:
        loss, _, _, _ = run_classifier.create_model(
            config, True, feeds["input_ids"], feeds["input_mask"], feeds["segment_ids"],
            feeds["label_ids"], NUM_LABELS, use_one_hot_embeddings)
      finally:
        tf1.enable_v2_tensorshape()
    model_variables = tf1.global_variables()
    # The global norm of the dense gradients (what the one-hot path's clip measures), to
    # check that clipping is active.
    norm = tf1.linalg.global_norm([tf1.convert_to_tensor(g) for g in
                                   tf1.gradients(loss, tf1.trainable_variables())])
    train_op = original_optimization.create_optimizer(
        loss, LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS, use_tpu=False)
    variables = {v.op.name: v for v in tf1.global_variables()}
    init = tf1.global_variables_initializer()
    saver = tf1.train.Saver(model_variables)
    if make_checkpoint:
      rng = np.random.RandomState(3)
      assigns = [v.assign((1.0 if v.op.name.endswith("gamma") else 0.0) +
                          SCALE * rng.standard_normal(v.shape.as_list()).astype(np.float32))
                 for v in model_variables]
      with tf1.Session(graph=graph, config=_ONE_THREAD) as session:
        session.run(init)
        session.run(assigns)
        saver.save(session, checkpoint)
  return dict(graph=graph, feeds=feeds, train_op=train_op, loss=loss, norm=norm,
              variables=variables, init=init, saver=saver, checkpoint=checkpoint,
              model_names=sorted(v.op.name for v in model_variables))


def _run_google_once(g, batches):
  """Per update: ({name: value} of every variable and slot after it, loss and gradient norm
  of its batch before it)."""
  history = []
  with tf1.Session(graph=g["graph"], config=_ONE_THREAD) as session:
    session.run(g["init"])
    g["saver"].restore(session, g["checkpoint"])
    for batch in batches:
      feed = {g["feeds"][k]: v for k, v in batch.items()}
      loss, norm = session.run((g["loss"], g["norm"]), feed)
      session.run(g["train_op"], feed)
      history.append((session.run(g["variables"]), loss, norm))
  return history


def _run_google(checkpoint, batches, use_one_hot_embeddings=True, make_checkpoint=False):
  g = _google_graph(checkpoint, use_one_hot_embeddings, make_checkpoint)
  last = _run_google_once(g, batches)
  for _ in range(4):
    again = _run_google_once(g, batches)
    if all(np.array_equal(a[0][k], b[0][k]) for a, b in zip(last, again) for k in a[0]):
      return again, g["model_names"]
    last = again
  raise AssertionError("Google's reference gave different numbers in every run")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  checkpoint = str(tmp_path_factory.mktemp("init") / "bert_model.ckpt")
  batches = _batches()
  history, model_names = _run_google(checkpoint, batches, make_checkpoint=True)
  return {"checkpoint": checkpoint, "batches": batches, "history": history,
          "model_names": model_names}


class _Snapshots:
  """A Trainer checkpoint hook: every variable and Adam slot by Google name after each save
  (save_checkpoints_steps=1: after each update)."""

  def __init__(self, model, optimizer):
    self.model, self.optimizer, self.history = model, optimizer, []

  def begin(self, step, resumed):
    assert step == 0 and not resumed
    return False

  def saved(self, step):
    assert step == len(self.history) + 1
    values = {}
    for name, variable in checkpoints.google_variable_map(self.model).items():
      values[name] = variable.numpy()
      values[name + "/adam_m"] = self.optimizer.slot(variable, "m").numpy()
      values[name + "/adam_v"] = self.optimizer.slot(variable, "v").numpy()
    self.history.append(values)
    return False

  def close(self):
    pass


def _run_bert_tf(reference, tmp_path, jit_compile=False, whole_update=None, clip_norm=1.0):
  """run_classifier's training (classifier.run_classifier's Trainer) on the reference's
  batches, in order -> (per update {google_name: value} of weights and slots, loop result)."""
  task = classifier.ClassifierTask(BertConfig.from_dict(CONFIG), NUM_LABELS,
                                   classifier_dropout=0.0)
  strategy = tf.distribute.get_strategy()
  with strategy.scope():
    model = task.build_model()
    optimizer = optimization.create_optimizer(LEARNING_RATE, NUM_TRAIN_STEPS,
                                              NUM_WARMUP_STEPS, clip_norm=clip_norm)
  trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
      model_dir=str(tmp_path), num_train_steps=NUM_UPDATES, steps_per_loop=1,
      save_checkpoints_steps=1, jit_compile=jit_compile, global_batch_size=BATCH,
      seq_length=SEQ))
  trainer.whole_update = whole_update
  batches = reference["batches"]
  stacked = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
  dataset_fn = lambda ctx: tf.data.Dataset.from_tensor_slices(stacked).batch(  # noqa: E731
      BATCH, drop_remainder=True)
  snapshots = _Snapshots(model, optimizer)
  reports = []
  result = trainer.train(
      dataset_fn,
      init_fn=lambda m: reports.append(checkpoints.load_weights(m, reference["checkpoint"])),
      progress=lambda line: None, checkpoint_hook=snapshots)
  assert result["global_step"] == NUM_UPDATES and len(snapshots.history) == NUM_UPDATES
  assert not reports[0].missing and not reports[0].unexpected, reports[0]
  # The path asked for was the one taken.
  assert (trainer._compiled_update is not None) == bool(whole_update)  # pylint: disable=protected-access
  return snapshots.history, result


def _atol(name):
  if "/adam_" in name:
    return SLOT_ATOL
  return KEY_BIAS_ATOL if name.endswith(KEY_BIAS) else WEIGHT_ATOL


def _differences(want_history, got_history):
  """Per update: {"weights", "key_biases", "slots"}: max |got - want|."""
  out = []
  for want, got in zip(want_history, got_history):
    d = {"weights": 0.0, "key_biases": 0.0, "slots": 0.0}
    for name in got:
      kind = ("slots" if "/adam_" in name else
              "key_biases" if name.endswith(KEY_BIAS) else "weights")
      d[kind] = max(d[kind], float(np.abs(got[name] - want[name]).max()))
    out.append(d)
  return out


def _exceeds_tolerance(want_history, got_history):
  return any(np.any(np.abs(got[n] - want[n]) > _atol(n))
             for want, got in zip(want_history, got_history) for n in got)


def test_reference_moves_and_clips(reference):
  """The comparison can see something: clipping is active at every update (global norm > 1),
  and the weights moved (update 1 has learning rate 0, warmup: only its Adam slots move)."""
  history = reference["history"]
  norms = [norm for _, _, norm in history]
  assert min(norms) > 2.0, norms
  initial = tf.train.load_checkpoint(reference["checkpoint"])
  moved = [max(np.abs(values[n] - initial.get_tensor(n)).max() for n in reference["model_names"])
           for values, _, _ in history]
  assert moved[0] == 0.0 and moved[1] > 5e-4 and moved[2] > 1e-3, moved
  # Every variable moved by > 1e-3 (update 2: 3.8e-3 the least), but the attention key biases,
  # whose gradient is rounding noise (module docstring), by 3.4e-7 at most (2 updates, lr > 0).
  final = history[-1][0]
  key_moved = max(np.abs(final[n] - initial.get_tensor(n)).max()
                  for n in reference["model_names"] if n.endswith(KEY_BIAS))
  others_moved = min(np.abs(final[n] - initial.get_tensor(n)).max()
                     for n in reference["model_names"] if not n.endswith(KEY_BIAS))
  assert key_moved < KEY_BIAS_ATOL / 5 and others_moved > 1e-3, (key_moved, others_moved)
  assert np.abs(history[0][0]["output_weights/adam_m"]).max() > 1e-3


@pytest.mark.parametrize("jit_compile,whole_update", [(False, None), (True, False),
                                                      (True, True)],
                         ids=["graph", "xla", "xla_whole_update"])
def test_updates_match_the_original(reference, tmp_path, jit_compile, whole_update):
  history, result = _run_bert_tf(reference, tmp_path, jit_compile, whole_update)
  want_history = [values for values, _, _ in reference["history"]]
  print("max |bert_tf - original| per update:", _differences(want_history, history))
  names = sorted(k for k in history[0] if "/adam_" not in k)
  assert names == reference["model_names"]
  assert sorted(history[0]) == sorted(k for k in want_history[0] if k != "global_step")
  for step, (want, got) in enumerate(zip(want_history, history), start=1):
    for name in sorted(got):
      np.testing.assert_allclose(got[name], want[name], rtol=0, atol=_atol(name),
                                 err_msg=f"update {step}: {name}")
  # The loop's loss (its last loop: update 3's batch, before the update) is the original's.
  np.testing.assert_allclose(result["loss"], reference["history"][-1][1], rtol=1e-5)


def test_a_different_update_is_seen(reference, tmp_path):
  """The tolerances catch real differences of the update: the original's gather path
  (use_one_hot_embeddings=False: its clip measures the word-embedding gradient's gathered rows
  apart, a repeated id's rows unsummed; the TPU path and bert_tf sum them first), and bert_tf
  with clip norm 1.1 instead of the original's 1.0."""
  want_history = [values for values, _, _ in reference["history"]]
  gather, _ = _run_google(reference["checkpoint"], reference["batches"],
                          use_one_hot_embeddings=False)
  gather_history = [values for values, _, _ in gather]
  print("gather path - one-hot path:", _differences(want_history, gather_history))
  assert _exceeds_tolerance(want_history, gather_history)
  assert max(d["weights"] for d in _differences(want_history, gather_history)) > 10 * WEIGHT_ATOL

  other_clip, _ = _run_bert_tf(reference, tmp_path, clip_norm=1.1)
  print("clip 1.1 - original:", _differences(want_history, other_clip))
  assert _exceeds_tolerance(want_history, other_clip)
  assert max(d["weights"] for d in _differences(want_history, other_clip)) > 10 * WEIGHT_ATOL


# === A run of the original code continued in its own --output_dir ===

def _write_original_run(model_dir, history, steps):
  """``model_dir`` as google-research/bert's Estimator leaves it after ``steps``: for each, a
  ``model.ckpt-N`` (every variable, Adam slots and global_step, from the original's own
  history) and the ``checkpoint`` state file naming them, written by TF1's Saver."""
  graph = tf.Graph()
  with graph.as_default():
    variables = {name: tf1.Variable(value, name=name)
                 for name, value in history[steps[0] - 1][0].items()}
    feeds = {name: tf1.placeholder(v.dtype.base_dtype, v.shape) for name, v in variables.items()}
    assign = tf.group([v.assign(feeds[name]) for name, v in variables.items()])
    saver = tf1.train.Saver(variables)
    with tf1.Session(graph=graph) as session:
      for step in steps:
        session.run(assign, {feeds[name]: value for name, value in history[step - 1][0].items()})
        assert session.run(variables["global_step"]) == step
        saver.save(session, str(model_dir / "model.ckpt"), global_step=step)


class _Continued(_Snapshots):
  def begin(self, step, resumed):
    self.begun = (step, resumed)
    return False

  def saved(self, step):
    self.history.append((step, super_saved(self)))
    return False


def super_saved(snapshots):
  values = {}
  for name, variable in checkpoints.google_variable_map(snapshots.model).items():
    values[name] = variable.numpy()
    values[name + "/adam_m"] = snapshots.optimizer.slot(variable, "m").numpy()
    values[name + "/adam_v"] = snapshots.optimizer.slot(variable, "v").numpy()
  return values


def _continue_in(reference, model_dir, keep_checkpoint_max=5, batches=None,
                 num_train_steps=NUM_UPDATES):
  task = classifier.ClassifierTask(BertConfig.from_dict(CONFIG), NUM_LABELS,
                                   classifier_dropout=0.0)
  strategy = tf.distribute.get_strategy()
  with strategy.scope():
    model = task.build_model()
    optimizer = optimization.create_optimizer(LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
  trainer = loop.Trainer(strategy, task, model, optimizer, loop.LoopConfig(
      model_dir=str(model_dir), num_train_steps=num_train_steps, steps_per_loop=1,
      save_checkpoints_steps=1, keep_checkpoint_max=keep_checkpoint_max,
      global_batch_size=BATCH, seq_length=SEQ))
  batches = reference["batches"] if batches is None else batches
  stacked = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
  dataset_fn = lambda ctx: tf.data.Dataset.from_tensor_slices(stacked).batch(  # noqa: E731
      BATCH, drop_remainder=True)
  snapshots, lines = _Continued(model, optimizer), []

  def init_fn(_):
    raise AssertionError("--init_checkpoint loaded over the original's run")

  result = trainer.train(dataset_fn, init_fn=init_fn, progress=lines.append,
                         checkpoint_hook=snapshots)
  return snapshots, lines, result


def test_continues_a_run_of_the_original_in_its_folder(reference, tmp_path):
  """The original's run stopped after update 2 (its model.ckpt-1 and -2 in --output_dir, as
  its Estimator leaves them); bert_tf given the same folder takes update 3 from model.ckpt-2's
  weights, Adam slots and global_step (the learning rate of step 2, not of a new run's step 0)
  and reaches the original's own update 3. The original's files stay, whatever
  keep_checkpoint_max (TF's checkpoint manager deletes what the state file names)."""
  history = reference["history"]
  _write_original_run(tmp_path, history, steps=[1, 2])
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert state.all_model_checkpoint_paths[-1].endswith("model.ckpt-2")
  # With their times recorded (TF1's Saver records none), TF's checkpoint manager would
  # delete them beyond keep_checkpoint_max.
  from tensorflow.python.checkpoint import checkpoint_management  # pylint: disable=no-name-in-module
  now = time.time()
  checkpoint_management.update_checkpoint_state_internal(
      str(tmp_path), state.model_checkpoint_path,
      all_model_checkpoint_paths=list(state.all_model_checkpoint_paths),
      all_model_checkpoint_timestamps=[now - 2, now - 1], last_preserved_timestamp=now - 10)
  # Its input starts over, as the original's on a restart: the test gives it the batch of the
  # original's update 3 first.
  snapshots, lines, result = _continue_in(reference, tmp_path, keep_checkpoint_max=1,
                                          batches=reference["batches"][2:])
  assert snapshots.begun == (2, False)  # (no evaluations of bert_tf's to read back)
  assert result["global_step"] == 3 and [s for s, _ in snapshots.history] == [3]
  assert any("continuing the run of Google's original code" in line and "model.ckpt-2" in line
             and "global_step 2" in line for line in lines), lines
  got, want = snapshots.history[0][1], history[2][0]
  for name in sorted(got):
    np.testing.assert_allclose(got[name], want[name], rtol=0, atol=_atol(name),
                               err_msg=f"update 3: {name}")
  # The update really moved what it compares (update 3 against the original's update 2).
  assert max(np.abs(history[2][0][n] - history[1][0][n]).max()
             for n in reference["model_names"]) > 1e-3
  for step in (1, 2):
    for suffix in (".index", ".meta", ".data-00000-of-00001"):
      assert (tmp_path / f"model.ckpt-{step}{suffix}").exists(), (step, suffix)
  assert loop.latest_checkpoint(str(tmp_path)).endswith("ckpt-3")

  # Again: bert_tf's own checkpoint is resumed now, not the original's; its data position
  # counts the one batch read since the original's step 2.
  snapshots, lines, result = _continue_in(reference, tmp_path,
                                          batches=reference["batches"][2:])
  assert result["global_step"] == 3 and snapshots.begun == (3, True)
  assert not any("original" in line for line in lines), lines


def test_a_continued_run_resumed_later_reads_on_from_where_it_was(reference, tmp_path):
  """Continued from the original's model.ckpt-1 (its input starting over: batch 2 first),
  stopped after update 2, then resumed from bert_tf's own ckpt-2: it skips the one batch it
  read since the original's step, and reaches the original's update 3."""
  history = reference["history"]
  _write_original_run(tmp_path, history, steps=[1])
  batches = reference["batches"][1:]
  _, _, result = _continue_in(reference, tmp_path, batches=batches, num_train_steps=2)
  assert result["global_step"] == 2
  snapshots, lines, result = _continue_in(reference, tmp_path, batches=batches)
  assert result["global_step"] == 3 and snapshots.begun == (2, True), lines
  got, want = snapshots.history[-1][1], history[2][0]
  for name in sorted(got):
    np.testing.assert_allclose(got[name], want[name], rtol=0, atol=_atol(name),
                               err_msg=f"update 3: {name}")


def test_a_newer_original_checkpoint_beside_bert_tfs_is_said(reference, tmp_path):
  """bert_tf's ckpt-2 (continued from the original's step 1) and a later model.ckpt-3 of the
  original's: bert_tf resumes its own and says so; following the note (its ckpt-* and its
  checkpoint file moved away) goes on from model.ckpt-3."""
  history = reference["history"]
  _write_original_run(tmp_path, history, steps=[1])
  _continue_in(reference, tmp_path, batches=reference["batches"][1:], num_train_steps=2)
  later = tmp_path / "later"
  later.mkdir()
  _write_original_run(later, history, steps=[3])
  for path in later.glob("model.ckpt-3.*"):
    path.rename(tmp_path / path.name)
  _, lines, _ = _continue_in(reference, tmp_path, batches=reference["batches"][1:])
  assert any(line.startswith("note: ") and "model.ckpt-3" in line and "ckpt-2" in line
             and "checkpoint file" in line for line in lines), lines
  aside = tmp_path / "aside"
  aside.mkdir()
  for path in list(tmp_path.glob("ckpt-*")) + [tmp_path / "checkpoint"]:
    path.rename(aside / path.name)
  snapshots, lines, result = _continue_in(reference, tmp_path)
  assert any("continuing the run" in line and "model.ckpt-3" in line for line in lines), lines
  assert result["global_step"] == 3 and [s for s, _ in snapshots.history] == [3]


def test_a_finished_run_of_the_original_is_saved_as_it_is(reference, tmp_path):
  """The original's run ended at --num_train_steps; bert_tf given the same command trains
  nothing and saves the original's last weights as its own checkpoint (what an eval after
  it uses), without a traceback (the loss check met no step), the original's state file
  still naming its model.ckpt-3 for its own code until then."""
  _write_original_run(tmp_path, reference["history"], steps=[3])
  snapshots, lines, result = _continue_in(reference, tmp_path)
  assert result == {"global_step": 3, "loss": None, "stopped_early": False}
  assert [s for s, _ in snapshots.history] == [3]  # evaluated once, at its save
  got, want = snapshots.history[0][1], reference["history"][2][0]
  for name in sorted(got):
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)
  assert loop.latest_checkpoint(str(tmp_path)).endswith("/ckpt-3")
  assert (tmp_path / "model.ckpt-3.index").exists()


def test_continues_the_originals_run_squad(tmp_path):
  """A run of Google's run_squad: its optimizer never updated the pooler (no gradient: it
  skips such variables and makes no Adam slots for them), so its checkpoint has the pooler's
  weights and no moments; bert_tf's span model goes on from it, the pooler's moments at 0, the
  others the original's."""
  run_squad, modeling = google("run_squad"), google("modeling")
  original_optimization = google("optimization")
  rng = np.random.RandomState(0)
  ids = rng.randint(1, CONFIG["vocab_size"], (BATCH, SEQ)).astype(np.int32)
  graph = tf.Graph()
  with graph.as_default():
    tf1.disable_v2_tensorshape()
    try:
      start, end = run_squad.create_model(
          modeling.BertConfig.from_dict(CONFIG), True, tf1.constant(ids),
          tf1.ones_like(ids), tf1.zeros_like(ids), False)
    finally:
      tf1.enable_v2_tensorshape()
    loss = tf1.reduce_mean(start[:, 1]) - tf1.reduce_mean(end[:, 2])
    train_op = original_optimization.create_optimizer(loss, 1e-3, 10, 1, use_tpu=False)
    saver = tf1.train.Saver()
    with tf1.Session(graph=graph, config=_ONE_THREAD) as session:
      session.run(tf1.global_variables_initializer())
      for _ in range(2):
        session.run(train_op)
      saver.save(session, str(tmp_path / "model.ckpt"),
                 global_step=tf1.train.get_global_step())
  reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-2"))
  saved = reader.get_variable_to_shape_map()
  assert "bert/pooler/dense/kernel" in saved and "bert/pooler/dense/kernel/adam_m" not in saved
  from bert_tf.training import squad  # pylint: disable=import-outside-toplevel
  model = squad.SquadTask(BertConfig.from_dict(CONFIG)).build_model()
  optimizer = optimization.create_optimizer(1e-3, 10, 1)
  optimizer.build(model.trainable_variables)
  lines = []
  assert loop.continue_original_run(model, optimizer, str(tmp_path), lines.append)
  assert int(optimizer.iterations.numpy()) == 2 and "global_step 2" in lines[0]
  for name, variable in checkpoints.google_variable_map(model).items():
    np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(name), err_msg=name)
    for slot in ("m", "v"):
      value = optimizer.slot(variable, slot).numpy()
      if name.startswith("bert/pooler/"):
        assert not value.any(), name
      else:
        np.testing.assert_array_equal(value, reader.get_tensor(f"{name}/adam_{slot}"),
                                      err_msg=name)


def test_an_original_checkpoint_that_cannot_go_on_is_refused(reference, tmp_path):
  """Without Adam's moments (or of another model) the original's checkpoint is not silently
  passed over for --init_checkpoint and a run from step 0: one line, naming it."""
  values = {n: v for n, v in reference["history"][1][0].items() if "/adam_v" not in n}
  _write_original_run(tmp_path, [(values,)] * 2, steps=[2])
  with pytest.raises(Exception) as raised:
    _continue_in(reference, tmp_path)
  assert type(raised.value).__name__ == "BertTfError"
  message = str(raised.value)
  assert "model.ckpt-2" in message and "adam_v" in message and "--init_checkpoint=" in message
  assert "\n" not in message
  assert not list(tmp_path.glob("ckpt-*"))


def test_an_original_checkpoint_of_non_finite_weights_is_refused(reference, tmp_path):
  """The original saved whatever its weights were (it checked no loss): its newest
  checkpoint of a diverged run is said to be, not called "the last finite weights" after a
  nan first step."""
  values = dict(reference["history"][1][0])
  name = next(n for n in values if n.endswith("pooler/dense/kernel"))
  values[name] = np.full_like(values[name], np.nan)
  _write_original_run(tmp_path, [(values,)] * 2, steps=[2])
  with pytest.raises(Exception) as raised:
    _continue_in(reference, tmp_path)
  assert type(raised.value).__name__ == "BertTfError"
  message = str(raised.value)
  assert message.startswith(f"{tmp_path}/model.ckpt-2: its weights are not finite")
  assert "\n" not in message
  assert not list(tmp_path.glob("ckpt-*"))


def test_eval_without_training_takes_the_original_run_checkpoint(reference, tmp_path):
  """An eval of the original's --output_dir (no --do_train) evaluates its newest
  model.ckpt-N, as its Estimator did, not --init_checkpoint."""
  from bert_tf.training import eval_during_training
  _write_original_run(tmp_path, reference["history"], steps=[1, 2])
  task = classifier.ClassifierTask(BertConfig.from_dict(CONFIG), NUM_LABELS,
                                   classifier_dropout=0.0)
  model = task.build_model()
  lines = []
  step = eval_during_training.restore_without_training(
      model, str(tmp_path), reference["checkpoint"], "--do_eval", False, lines.append)
  assert step == 2 and "model.ckpt-2" in lines[-1], lines
  want = reference["history"][1][0]
  for name, variable in checkpoints.google_variable_map(model).items():
    np.testing.assert_array_equal(variable.numpy(), want[name], err_msg=name)
  assert loop.has_checkpoint(str(tmp_path))


def test_an_original_runs_checkpoint_loads_as_init_checkpoint_with_nothing_left_over(
    reference, tmp_path):
  """The original's fine-tuning checkpoint (model.ckpt-N: the weights, their adam_m/adam_v
  slots and global_step, from TF1's Saver) given as --init_checkpoint: every weight loaded,
  nothing missing, and its optimizer slots and step counter are not model variables: neither
  an error (bert/.../adam_m is no encoder variable of another config) nor reported as
  unexpected."""
  _write_original_run(tmp_path, reference["history"], steps=[2])
  saved = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-2")).get_variable_to_shape_map()
  assert "global_step" in saved and "bert/pooler/dense/kernel/adam_m" in saved
  model = classifier.ClassifierTask(BertConfig.from_dict(CONFIG), NUM_LABELS).build_model()
  report = checkpoints.load_weights(model, str(tmp_path / "model.ckpt-2"))
  assert not report.missing and not report.unexpected, report
  assert sorted(report.loaded) == reference["model_names"]
  want = reference["history"][1][0]
  for name, variable in checkpoints.google_variable_map(model).items():
    np.testing.assert_array_equal(variable.numpy(), want[name], err_msg=name)


def test_a_head_the_model_has_not_is_said(reference, tmp_path):
  """An original checkpoint with a head this model lacks (its next-sentence head, continued
  with --use_next_sentence=False) goes on with a note naming what is left out."""
  values = dict(reference["history"][1][0])
  values["cls/seq_relationship/output_weights"] = np.zeros([2, CONFIG["hidden_size"]],
                                                           np.float32)
  values["cls/seq_relationship/output_weights/adam_m"] = values[
      "cls/seq_relationship/output_weights"]
  _write_original_run(tmp_path, [(values,)] * 2, steps=[2])
  model = classifier.ClassifierTask(BertConfig.from_dict(CONFIG), NUM_LABELS).build_model()
  optimizer = optimization.create_optimizer(LEARNING_RATE, NUM_TRAIN_STEPS, NUM_WARMUP_STEPS)
  optimizer.build(model.trainable_variables)
  lines = []
  loop.continue_original_run(model, optimizer, str(tmp_path), lines.append)
  assert lines[0] == ("note: model.ckpt-2's cls/seq_relationship is not in this model: "
                      "left out"), lines
  assert "continuing the run" in lines[1]


def test_an_original_state_file_with_times_keeps_its_relative_names(tmp_path):
  """keep_original_checkpoints rewrites a state file that records times (which would let TF's
  manager delete what it names) without them, its names relative as the Estimator wrote
  them: a folder moved elsewhere still names its checkpoints."""
  from tensorflow.python.checkpoint import checkpoint_management  # pylint: disable=no-name-in-module
  for step in (1, 2):
    (tmp_path / f"model.ckpt-{step}.index").write_bytes(b"")
  now = time.time()
  checkpoint_management.update_checkpoint_state_internal(
      str(tmp_path), "model.ckpt-2", all_model_checkpoint_paths=["model.ckpt-1", "model.ckpt-2"],
      all_model_checkpoint_timestamps=[now - 2, now - 1], last_preserved_timestamp=now - 10,
      save_relative_paths=True)
  loop.keep_original_checkpoints(str(tmp_path))
  text = (tmp_path / "checkpoint").read_text()
  assert text == ('model_checkpoint_path: "model.ckpt-2"\n'
                  'all_model_checkpoint_paths: "model.ckpt-1"\n'
                  'all_model_checkpoint_paths: "model.ckpt-2"\n'), text
