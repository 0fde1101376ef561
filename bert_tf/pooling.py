"""Pooling token vectors into one vector per text (``InferenceModel.embed``) and combining
the hidden states of several layers per token.

Shape legend: k = layers chosen, b = texts, s = tokens, H = hidden size, D = H or k*H.
"""

import re

import numpy as np

from bert_tf.errors import BertTfError

# Token pooling for ``embed``; "lastK_mean"/"lastK_concat"/"lastK_sum" are shorthands.
POOLINGS = ("cls", "mean", "max", "pooler")
COMBINES = ("mean", "concat", "sum")
LAST_K = re.compile(r"^last(\d+)_(mean|concat|sum)$")


def parse_pooling(pooling, layers=None, combine=None):
  """``(token_pooling, layer_indexes or None, combine)`` from ``embed``'s arguments.

  ``"lastK_mean"`` / ``"lastK_concat"`` / ``"lastK_sum"`` mean: the last K layers, combined
  per token (mean, concatenation or sum), then a mask-aware mean over the tokens.
  """
  match = LAST_K.match(str(pooling))
  if match:
    if layers is not None:
      raise BertTfError(f"pooling={pooling!r} already names the layers; drop layers=")
    k = int(match.group(1))
    if k < 1:
      raise BertTfError(f"pooling={pooling!r}: K in lastK_{match.group(2)} must be at least 1")
    return "mean", list(range(-k, 0)), match.group(2)
  if pooling not in POOLINGS:
    raise BertTfError(f"unknown pooling {pooling!r}; expected one of "
                      f"{', '.join(POOLINGS)} or lastK_mean/lastK_concat/lastK_sum")
  if pooling == "pooler" and layers is not None:
    raise BertTfError("pooling='pooler' uses the pooled output; drop layers=")
  combine = combine or "mean"
  if combine not in COMBINES:
    raise BertTfError(f"unknown combine {combine!r}; expected one of {', '.join(COMBINES)}")
  if isinstance(layers, (int, str)):  # One layer: an index, or "embeddings".
    layers = [layers]
  return pooling, (list(layers) if layers is not None else None), combine


def combine_layers(chosen, combine):
  """The chosen hidden states ``[k,b,s,H]`` -> ``[b,s,D]``."""
  if combine == "mean":
    return chosen.mean(axis=0)
  if combine == "sum":
    return chosen.sum(axis=0)
  return np.concatenate(list(chosen), axis=-1)  # "concat"


def pool_tokens(per_token, mask, pooling):
  """``[b,s,D]`` token vectors -> ``[b,D]``: ``cls`` (first token), or a mask-aware ``mean``
  or ``max`` over the positions where ``mask`` ([b,s] 0/1) is 1."""
  if pooling == "cls":
    return per_token[:, 0]
  weights = mask.astype(np.float32)[:, :, None]  # [b,s,1]
  if pooling == "mean":
    return (per_token * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
  if pooling == "max":
    return np.where(weights > 0, per_token, -np.inf).max(axis=1)
  raise BertTfError(f"unknown pooling {pooling!r}")
