"""Pretraining data: the feature spec (``features``), instance creation as Google's
create_pretraining_data (``pretraining``) and the tf.data reader (``pipeline``).

  from bert_tf.data import create_pretraining_data, pretraining_dataset
"""

from bert_tf.data.features import PRETRAINING_FEATURE_NAMES  # noqa: F401
from bert_tf.data.features import PRETRAINING_FEATURES  # noqa: F401
from bert_tf.data.features import pretraining_feature_spec  # noqa: F401
from bert_tf.data.pipeline import pretraining_dataset  # noqa: F401
from bert_tf.data.pretraining import InstanceOptions  # noqa: F401
from bert_tf.data.pretraining import create_pretraining_data  # noqa: F401
