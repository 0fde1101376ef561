"""What tracing a train or eval step converts with AutoGraph: only the host loop the Trainer
writes with a ``for`` over ``tf.range`` (``steps``). The library's steps, losses, metrics and
optimizer updates have no Python control flow on tensors and are traced as written: AutoGraph
would parse and rewrite each of them, and wrap every call inside, at every run's start (about
half the trace of a tiny pretraining run, ~2 s; BENCHMARKS.md)."""

import collections

import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api as autograph_api

from bert_tf.training import loop
from tests.training import tiny_loop


@pytest.fixture(name="converted")
def _converted(monkeypatch):
  """{module.qualname: times} of the bert_tf functions AutoGraph converts from here on."""
  seen = collections.Counter()
  convert = autograph_api._convert_actual  # pylint: disable=protected-access

  def recording(entity, program_ctx):
    module = getattr(entity, "__module__", "") or ""
    if module.startswith(("bert_tf", "tests")):
      seen[f"{module}.{getattr(entity, '__qualname__', entity)}"] += 1
    return convert(entity, program_ctx)

  monkeypatch.setattr(autograph_api, "_convert_actual", recording)
  return seen


def _besides_the_loop(converted):
  return {name for name in converted
          if not name.endswith(("build_train_loop.<locals>.steps",
                                "_build_device_loop.<locals>.steps"))}


@pytest.mark.parametrize("path", ["inline", "whole_update", "device_loop"])
def test_only_the_host_loop_is_converted(converted, tmp_path, path):
  """``inline``: the CPU default (a step per iteration, per-variable XLA updates through the
  optimizer's update_step); ``whole_update``: a step per iteration, the whole update one XLA
  computation (a GPU with ``--nodevice_loop``); ``device_loop``: that computation run in
  XLA's while (the GPU default). Traced, not run."""
  attributes = {"inline": dict(whole_update=False), "whole_update": dict(device_loop=False),
                "device_loop": dict(device_loop=True)}[path]
  trainer, _, _ = tiny_loop.make_trainer(tmp_path, **attributes)
  train_loop = trainer.build_train_loop()
  iterator = trainer.make_iterator(tiny_loop.dataset_fn())
  train_loop.compiled.get_concrete_function(iterator, tf.constant(2))
  assert converted, "the host loop itself is AutoGraph's: nothing was recorded"
  assert not _besides_the_loop(converted), sorted(converted)


def test_an_evaluation_step_and_the_finite_check_are_not_converted(converted, tmp_path):
  trainer, model, _ = tiny_loop.make_trainer(tmp_path)
  metrics = loop.evaluate(trainer.strategy, model, trainer.task, tiny_loop.dataset_fn(),
                          max_steps=1)
  assert "masked_lm_accuracy" in metrics
  assert bool(loop._all_finite(model.trainable_variables))  # pylint: disable=protected-access
  assert not converted, sorted(converted)
