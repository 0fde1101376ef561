"""``BertConfig``: the fields of Google's ``bert_config.json``, read from either format.

Google's ``bert_config.json`` and Hugging Face's ``config.json`` name the same fields, but
``hidden_act: "gelu"`` means different functions: Google's ``modeling.py`` uses the tanh
approximation, Hugging Face the exact erf form (its ``gelu_new`` is the tanh one). bert_tf keeps
Google's meaning for ``"gelu"`` and calls the erf form ``"gelu_exact"``; the Hugging Face reader
translates, so each format keeps its own meaning.
"""

import dataclasses
import json
import math

import tensorflow as tf

from bert_tf.errors import BertTfError

# Activation names bert_tf understands (Google's meaning for "gelu").
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear", "swish")

# Hugging Face's activation names -> bert_tf's.
_HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
    "silu": "swish",
    "swish": "swish",
}

# bert_tf's activation names -> Hugging Face's (the function itself, not the same word:
# Google's tanh "gelu" is Hugging Face's "gelu_new", the same formula term for term).
_TO_HF_ACTIVATIONS = {
    "gelu": "gelu_new",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
    "swish": "silu",
}

# Values of attention_implementation (what each means: modeling.fused_attention).
ATTENTION_IMPLEMENTATIONS = ("auto", "xla", "xla_recompute", "cudnn", "cudnn_dropout",
                             "cudnn_btnh")

# The fields every Google bert_config.json carries.
_GOOGLE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "hidden_act", "hidden_dropout_prob",
                  "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                  "initializer_range")


@dataclasses.dataclass
class BertConfig:
  """Hyper-parameters of a BERT encoder, with the defaults of Google's ``BertConfig``.

  Example:
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=4, intermediate_size=64)
    >>> config.head_size
    8
  """
  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02
  # Not in Google's files (always 1e-12 there); kept for Hugging Face models that differ.
  layer_norm_eps: float = 1e-12
  # How attention runs (``modeling.fused_attention``): "auto", "xla", "xla_recompute", "cudnn",
  # "cudnn_dropout" or "cudnn_btnh". A choice of this run, not of the model: never written by
  # ``to_dict``.
  attention_implementation: str = "auto"

  def __post_init__(self):
    self.validate()

  @property
  def head_size(self):
    return self.hidden_size // self.num_attention_heads

  def validate(self, source="BertConfig"):
    """Raises ``BertTfError`` naming ``source`` for a config no BERT can have."""
    for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BertTfError(f"{source}: {name} must be a positive integer, got {value!r}")
    if self.hidden_size % self.num_attention_heads:
      raise BertTfError(
          f"{source}: hidden_size ({self.hidden_size}) is not a multiple of "
          f"num_attention_heads ({self.num_attention_heads})")
    if not isinstance(self.hidden_act, str) or self.hidden_act not in ACTIVATIONS:
      raise BertTfError(f"{source}: unknown hidden_act {self.hidden_act!r}; "
                        f"expected one of {', '.join(ACTIVATIONS)}")
    for name, low, high, rule in (
        ("hidden_dropout_prob", 0.0, 1.0, "in [0, 1)"),
        ("attention_probs_dropout_prob", 0.0, 1.0, "in [0, 1)"),
        ("initializer_range", 0.0, math.inf, "a number >= 0"),
        # A LayerNorm epsilon <= 0 divides by zero on a constant vector: NaN out.
        ("layer_norm_eps", 0.0, math.inf, "a number > 0")):
      value = getattr(self, name)
      number = (isinstance(value, (int, float)) and not isinstance(value, bool) and
                math.isfinite(value))
      in_range = number and low <= value < high and (name != "layer_norm_eps" or value > 0)
      if not in_range:
        raise BertTfError(f"{source}: {name} must be {rule}, got {value!r}")
    if self.attention_implementation not in ATTENTION_IMPLEMENTATIONS:
      raise BertTfError(f"{source}: attention_implementation must be one of "
                        f"{', '.join(ATTENTION_IMPLEMENTATIONS)}, got "
                        f"{self.attention_implementation!r}")

  # --- Google's format ---
  @classmethod
  def from_dict(cls, values, source="config"):
    """From a dict in Google's format (all eleven fields required)."""
    missing = [f for f in _GOOGLE_FIELDS if f not in values]
    if missing:
      raise BertTfError(f"{source}: missing field(s) {', '.join(missing)}")
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in values.items() if k in known}
    try:
      config = cls.__new__(cls)
      for f in dataclasses.fields(cls):
        setattr(config, f.name, kwargs.get(f.name, f.default))
    except TypeError as e:
      raise BertTfError(f"{source}: {e}") from None
    config.validate(source)
    return config

  def to_dict(self):
    """Google's ``bert_config.json`` fields (plus ``layer_norm_eps`` when not 1e-12)."""
    values = {f: getattr(self, f) for f in _GOOGLE_FIELDS}
    if self.layer_norm_eps != 1e-12:
      values["layer_norm_eps"] = self.layer_norm_eps
    return values

  def to_json_string(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  @classmethod
  def from_json_file(cls, path):
    """Reads a Google ``bert_config.json`` or a Hugging Face ``config.json`` (detected)."""
    values = _read_json(path)
    if is_hugging_face_config(values):
      return cls.from_hugging_face_dict(values, source=path)
    return cls.from_dict(values, source=path)

  def to_json_file(self, path):
    from bert_tf.fileio import atomic_write  # pylint: disable=import-outside-toplevel
    with atomic_write(path) as f:
      f.write(self.to_json_string())

  # --- Hugging Face's format ---
  @classmethod
  def from_hugging_face_dict(cls, values, source="config.json"):
    """From a Hugging Face ``BertConfig`` dict; ``"gelu"`` there becomes ``"gelu_exact"``."""
    model_type = values.get("model_type", "bert")
    if model_type not in ("bert", None):
      raise BertTfError(f"{source}: model_type {model_type!r} is not a BERT model")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise BertTfError(f"{source}: position_embedding_type {position_type!r} is not supported "
                        "(only 'absolute', as in Google's BERT)")
    act = values.get("hidden_act", "gelu")
    if act not in _HF_ACTIVATIONS:
      raise BertTfError(f"{source}: unknown hidden_act {act!r}")
    translated = dict(values)
    translated["hidden_act"] = _HF_ACTIVATIONS[act]
    translated.setdefault("layer_norm_eps", 1e-12)
    return cls.from_dict(translated, source=source)

  def to_hugging_face_dict(self, architectures=None):
    """Hugging Face's ``config.json`` fields (``from_hugging_face_dict`` reads them back to
    this config): ``hidden_act`` in its words (``"gelu"`` -> ``"gelu_new"``)."""
    values = {f: getattr(self, f) for f in _GOOGLE_FIELDS}
    values.update(hidden_act=_TO_HF_ACTIVATIONS[self.hidden_act],
                  layer_norm_eps=self.layer_norm_eps, model_type="bert",
                  position_embedding_type="absolute", tie_word_embeddings=True,
                  dtype="float32")
    if architectures:
      values["architectures"] = list(architectures)
    return values


def is_hugging_face_config(values):
  """Whether a parsed config dict is Hugging Face's (rather than Google's) format."""
  return any(k in values for k in ("model_type", "architectures", "transformers_version",
                                   "layer_norm_eps"))


def _read_json(path):
  if not path or not tf.io.gfile.exists(path):
    raise BertTfError(f"config file not found: {path!r}")
  from bert_tf import fileio  # pylint: disable=import-outside-toplevel
  if tf.io.gfile.isdir(path):
    raise BertTfError(f"config file {path!r} is a folder (give its bert_config.json or "
                      "config.json)")
  values = fileio.read_json(path)
  if not isinstance(values, dict):
    raise BertTfError(f"{path}: expected a JSON object of config fields")
  return values
