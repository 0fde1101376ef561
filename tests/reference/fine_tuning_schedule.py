"""The learning rates of the original's fine-tuning runs, from its formulas, and a way to see
the optimizer a bert_tf run trains with.

Google's run_classifier.py / run_squad.py: ``num_train_steps = int(num_examples /
train_batch_size * num_train_epochs)``, ``num_warmup_steps = int(num_train_steps *
warmup_proportion)``; optimization.py: ``lr(step) = init_lr * (1 - step / num_train_steps)``
(polynomial decay, power 1, to 0), replaced by ``init_lr * step / num_warmup_steps`` while
``step < num_warmup_steps``; ``step`` counts the updates already applied.
"""

import contextlib

import pytest


def steps(num_examples, train_batch_size, num_train_epochs, warmup_proportion):
  """``(num_train_steps, num_warmup_steps)`` as the original's run_*.py compute them."""
  num_train_steps = int(num_examples / train_batch_size * num_train_epochs)
  return num_train_steps, int(num_train_steps * warmup_proportion)


def learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
  """optimization.create_optimizer's learning rate for the update after ``step`` updates."""
  if step < num_warmup_steps:
    return init_lr * step / num_warmup_steps
  return init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)


@contextlib.contextmanager
def optimizers_made():
  """A list that receives every optimizer ``bert_tf.training.loop.make_optimizer`` makes
  while inside (the one place the run_* functions make theirs)."""
  from bert_tf.training import loop  # pylint: disable=import-outside-toplevel
  made = []
  make = loop.make_optimizer

  def recording(*args, **kwargs):
    made.append(make(*args, **kwargs))
    return made[-1]

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(loop, "make_optimizer", recording)
    yield made


def schedule_of(optimizer):
  """The optimizer's learning-rate schedule (inside a loss-scale wrapper too)."""
  return getattr(optimizer, "inner_optimizer", optimizer)._learning_rate  # pylint: disable=protected-access


def progress_learning_rates(lines):
  """``{step: lr}`` of the training loop's progress lines (``step 2/5 loss ... lr 5.000e-04``)."""
  found = {}
  for line in lines:
    words = line.split()
    if len(words) > 5 and words[0] == "step" and "/" in words[1] and words[4] == "lr":
      found[int(words[1].split("/")[0])] = float(words[5])
  return found
