"""Pretraining instances as Google's create_pretraining_data.py (moved; being split by stage)."""

from bert_tf.data.pretraining import instances as _instances

globals().update({k: v for k, v in vars(_instances).items() if not k.startswith("__")})
