"""Training: the optimizer lives in ``bert_tf.optimization``; here the distribution resolver
(``distribution``), the shared script flags (``flags``) and the training loop.

Submodules are imported explicitly (``from bert_tf.training import distribution``).
"""

import functools
import gc

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
  (What an exception's traceback still holds is freed with it.)"""

  @functools.wraps(run)
  def wrapper(*args, **kwargs):
    try:
      return run(*args, **kwargs)
    finally:
      gc.collect()

  return wrapper
