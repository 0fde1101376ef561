"""A training run called from Python (a notebook that fine-tunes twice) leaves nothing of
itself alive when it returns: every variable it made (the model's, the optimizer's slots; on a
GPU their memory) is freed then, not at some later cyclic garbage collection. Keras models
and tf.functions hold reference cycles, so without a collection at the return the previous
run's weights stay on the device while the next one allocates its own."""

import gc
import weakref

import pytest
import tensorflow as tf

from bert_tf.modeling import BertConfig, checkpoints
from bert_tf.training import classifier, pretraining
from tests.reference import google_models
from tests.training import multi_worker as mw
from tests.training.test_eval_during_training import MRPC


def _made_variables(run):
  """Weak references to the variables ``run()`` made, with the automatic collector off
  during the call (so that what is alive afterwards does not depend on when it ran)."""
  made = []

  def record(next_creator, **kwargs):
    variable = next_creator(**kwargs)
    made.append(weakref.ref(variable))
    return variable

  enabled = gc.isenabled()
  gc.collect()
  gc.disable()
  try:
    with tf.variable_creator_scope(record):
      run()
    alive = [ref() for ref in made]
    return len(made), [v.name for v in alive if v is not None]
  finally:
    if enabled:
      gc.enable()


@pytest.mark.parametrize("jit_compile", [False, True])
def test_run_pretraining_frees_its_variables_when_it_returns(tmp_path, uncased_vocab,
                                                             jit_compile):
  work = mw.pretraining_workdir(tmp_path, uncased_vocab, num_files=1)
  config = checkpoints.load_config(str(work / "bert_config.json"))
  made, alive = _made_variables(lambda: pretraining.run_pretraining(
      config, f"{work}/data-*.tfrecord", str(tmp_path / "out"), tf.distribute.get_strategy(),
      max_seq_length=mw.SEQ, max_predictions_per_seq=mw.PRED, train_batch_size=4,
      num_train_steps=2, num_warmup_steps=1, steps_per_loop=1, jit_compile=jit_compile,
      seed=1, progress=lambda line: None))
  assert made > 40  # the model's and the optimizer's (not vacuous)
  assert alive == []


def test_run_classifier_frees_its_variables_when_it_returns(tmp_path, uncased_vocab):
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  made, alive = _made_variables(lambda: classifier.run_classifier(
      config, "MRPC", str(uncased_vocab), str(tmp_path / "out"), tf.distribute.get_strategy(),
      data_dir=str(MRPC), max_seq_length=16, do_train=True, do_eval=True, train_batch_size=2,
      eval_batch_size=2, num_train_epochs=1, seed=3, progress=lambda line: None))
  assert made > 40
  assert alive == []


def test_runs_one_after_another_do_not_warn_of_retracing(tmp_path, caplog):
  """Each run traces its own loop functions once (a new Trainer's). TensorFlow counts traces
  per Python function across instances and, at the fifth run in a process, logged "N out of
  the last M calls to <function Trainer...> triggered tf.function retracing ... define your
  @tf.function outside of the loop": advice for a loop that retraces, which this is not."""
  from bert_tf import optimization  # pylint: disable=import-outside-toplevel
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  from tests.training import tiny_loop  # pylint: disable=import-outside-toplevel
  with caplog.at_level("WARNING", logger="tensorflow"):
    for i in range(5):  # tiny runs of one update, without XLA (what TensorFlow counts: traces)
      task = tiny_loop.PretrainingTask(BertConfig.from_dict(tiny_loop.CONFIG))
      trainer = loop.Trainer(
          tf.distribute.get_strategy(), task, task.build_model(),
          optimization.create_optimizer(1e-3, num_train_steps=2, num_warmup_steps=1),
          loop.LoopConfig(model_dir=str(tmp_path / str(i)), num_train_steps=1,
                          steps_per_loop=1, save_checkpoints_steps=0, jit_compile=False))
      trainer.train(tiny_loop.dataset_fn(), progress=lambda line: None)
  assert [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()] == []


def test_a_stopped_run_frees_its_variables_though_its_traceback_is_kept(tmp_path,
                                                                       uncased_vocab):
  """A notebook's Stop button: a KeyboardInterrupt in the middle of training. IPython keeps
  the traceback (sys.last_traceback, for %debug); its frames held the run's model, optimizer
  and summary file alive beside the next run's (a MiniLM fine-tuning: 545 MB) until some
  later cell raised. The stopped run's frames are cleared."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522))
  kept = []

  def stop(line):
    if line.startswith("step "):  # the first step's progress line: model and optimizer made
      raise KeyboardInterrupt

  def run():
    try:
      classifier.run_classifier(
          config, "MRPC", str(uncased_vocab), str(tmp_path / "out"),
          tf.distribute.get_strategy(), data_dir=str(MRPC), max_seq_length=16, do_train=True,
          train_batch_size=2, num_train_epochs=1, seed=3, steps_per_loop=1, progress=stop)
    except KeyboardInterrupt as e:
      kept.append(e.__traceback__)  # what IPython keeps

  made, alive = _made_variables(run)
  assert len(kept) == 1 and made > 40
  assert alive == []
