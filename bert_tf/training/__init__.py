"""Training: the optimizer lives in ``bert_tf.optimization``; here the distribution resolver
(``distribution``), the shared script flags (``flags``) and the training loop.

Submodules are imported explicitly (``from bert_tf.training import distribution``).
"""

import functools
import gc
import traceback

from bert_tf.errors import BertTfError

# --dtype -> Keras dtype policy (variables stay float32 under the mixed policies).
DTYPE_POLICIES = {
    "float32": "float32",
    "bfloat16": "mixed_bfloat16",
    "float16": "mixed_float16",
}


def frees_its_memory(run):
  """Decorates a training run (``run_pretraining``...): when it returns or raises, a cyclic
  garbage collection frees what it made. Keras models, their optimizers and the loop's
  tf.functions refer to one another in cycles, which Python frees only at a later collection
  of its oldest generation: until then a finished run's variables (on a GPU, its weights and
  optimizer slots) stay allocated beside the next run's, in a notebook that fine-tunes twice.

  A run stopped (Ctrl-C, a notebook's Stop button) or refused (``BertTfError``) leaves its
  frames' locals cleared: IPython keeps the last traceback (``%debug``), whose frames held the
  run's model, optimizer and open summary file for the rest of the session. Other errors keep
  them, for a post-mortem."""

  @functools.wraps(run)
  def wrapper(*args, **kwargs):
    try:
      return run(*args, **kwargs)
    except (KeyboardInterrupt, BertTfError) as e:
      seen, chained = set(), e
      while chained is not None and id(chained) not in seen:  # and the errors it chains
        seen.add(id(chained))
        traceback.clear_frames(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__
      raise
    finally:
      gc.collect()

  return wrapper
