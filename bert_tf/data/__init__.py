"""Pretraining data: the feature spec (``features``), instance creation as Google's
create_pretraining_data (``pretraining``) and the tf.data reader (``pipeline``).

  from bert_tf.data import create_pretraining_data, pretraining_dataset

The names are imported on first use, so that instance creation (``pretraining``) runs
without importing TensorFlow.
"""

import importlib

_EXPORTS = {
    "PRETRAINING_FEATURE_NAMES": "bert_tf.data.features",
    "PRETRAINING_FEATURES": "bert_tf.data.features",
    "pretraining_feature_spec": "bert_tf.data.features",
    "pretraining_dataset": "bert_tf.data.pipeline",
    "InstanceOptions": "bert_tf.data.pretraining",
    "create_pretraining_data": "bert_tf.data.pretraining",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
  module = _EXPORTS.get(name)
  if module is None:
    raise AttributeError(f"module 'bert_tf.data' has no attribute {name!r}")
  return getattr(importlib.import_module(module), name)


def __dir__():
  return sorted(list(globals()) + list(_EXPORTS))
