"""Pretraining data: instance creation (``pretraining``), the feature spec (``features``) and
the tf.data reader (``pipeline``).

  from bert_tf.data import pretraining_dataset, pretraining_feature_spec
"""

from bert_tf.data.features import PRETRAINING_FEATURE_NAMES  # noqa: F401
from bert_tf.data.features import PRETRAINING_FEATURES  # noqa: F401
from bert_tf.data.features import pretraining_feature_spec  # noqa: F401
