"""Feature extraction: the per-token activations of chosen layers, as ``extract_features.py``.

Input: one text per line; ``text_a ||| text_b`` makes a pair. Output: JSON lines in the
original's format, one per input line::

  {"linex_index": 0, "features": [{"token": "[CLS]",
      "layers": [{"index": -1, "values": [0.1234, ...]}, ...]}, ...]}

(``linex_index`` is the original's spelling.) Layer indexes count the encoder layers, -1 being
the last, as ``get_all_encoder_layers`` does; values are rounded to 6 decimals.
"""

import collections
import dataclasses
import json
import re

import numpy as np
import tensorflow as tf

from bert_tf import fileio, progress, quiet
from bert_tf.errors import BertTfError

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
  unique_id: int
  text_a: str
  text_b: str = None


def read_examples(input_file):
  """One ``InputExample`` per line of ``input_file`` (``|||`` separates a pair).

  Raises:
    BertTfError: the file is missing or empty, or a line is not UTF-8 (the original dropped
      the bytes it could not decode, changing the text without a word).
  """
  fileio.require_file(input_file, "input file", flag="input_file")
  examples = []
  with tf.io.gfile.GFile(input_file, "rb") as f:
    for unique_id, raw in enumerate(f):
      try:
        line = raw.decode("utf-8-sig" if unique_id == 0 else "utf-8").strip()
      except UnicodeDecodeError as e:
        raise fileio.not_utf8(input_file, unique_id + 1, e.start + 1) from None
      match = _PAIR.match(line)
      if match:
        examples.append(InputExample(unique_id, match.group(1), match.group(2)))
      else:
        examples.append(InputExample(unique_id, line))
  if not examples:
    raise BertTfError(f"{input_file}: empty (--input_file has one text, or 'a ||| b' pair, "
                      "a line)")
  return examples


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Pops tokens from the end of the longer list until both fit ``max_length`` (in place)."""
  while len(tokens_a) + len(tokens_b) > max_length:
    (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack_example(tokens_a, tokens_b, max_seq_length):
  """``[CLS] a [SEP] (b [SEP])`` with the original's truncation -> ``(tokens, segment_ids)``.

  As the original's ``if tokens_b``: a ``tokens_b`` without word pieces (``[]``: a text_b of
  "", or of characters the tokenizer drops) is no second segment, and a is cut to S - 2.
  """
  tokens_a = list(tokens_a)
  tokens_b = list(tokens_b) if tokens_b is not None else None
  if tokens_b:
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    tokens_a = tokens_a[:max_seq_length - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    segment_ids += [1] * (len(tokens_b) + 1)
  return tokens, segment_ids


def convert_examples_to_features(examples, max_seq_length, tokenizer):
  """Examples -> ``(tokens list, {"input_ids", "input_mask", "segment_ids"} int32 [N,S])``."""
  n = len(examples)
  input_ids = np.zeros((n, max_seq_length), np.int32)
  input_mask = np.zeros((n, max_seq_length), np.int32)
  segment_ids = np.zeros((n, max_seq_length), np.int32)
  all_tokens = []
  for i, example in enumerate(examples):
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b is not None else None
    tokens, segments = pack_example(tokenizer.tokenize(example.text_a), tokens_b,
                                    max_seq_length)
    ids = tokenizer.convert_tokens_to_ids(tokens)
    input_ids[i, :len(ids)] = ids
    input_mask[i, :len(ids)] = 1
    segment_ids[i, :len(ids)] = segments
    all_tokens.append(tokens)
  return all_tokens, {"input_ids": input_ids, "input_mask": input_mask,
                      "segment_ids": segment_ids}


def parse_layers(layers, num_hidden_layers):
  """``"-1,-2,-3,-4"`` -> ``[-1, -2, -3, -4]``, checked against the model's depth."""
  try:
    indexes = [int(x) for x in str(layers).split(",") if x.strip()]
  except ValueError:
    raise BertTfError(f"--layers must be comma-separated integers, got {layers!r}") from None
  for index in indexes:
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise BertTfError(f"--layers: index {index} is out of range for a model with "
                        f"{num_hidden_layers} layers")
  return indexes


# Each call compiles its own encode step (bert_tf.quiet).
quiet.per_run_functions("extract_features.<locals>.bert_tf_encode ")


def extract_features(model, tokenizer, input_file, output_file, layers="-1,-2,-3,-4",
                     max_seq_length=128, batch_size=32):
  """Runs ``model`` (a ``BertModel``) over ``input_file`` and writes the JSON lines.

  Returns the number of lines written. The output is written atomically.
  """
  if max_seq_length > model.config.max_position_embeddings:
    raise BertTfError(f"--max_seq_length {max_seq_length} exceeds the model's "
                      f"max_position_embeddings {model.config.max_position_embeddings}")
  indexes = parse_layers(layers, model.config.num_hidden_layers)
  examples = read_examples(input_file)
  all_tokens, features = convert_examples_to_features(examples, max_seq_length, tokenizer)

  @tf.function(reduce_retracing=True)
  def bert_tf_encode(batch):
    outputs = model(batch, training=False)["encoder_outputs"]
    return tf.stack([outputs[i] for i in indexes])  # [len(layers), B, S, H]

  written = 0
  with fileio.atomic_write(output_file) as writer:
    starts = range(0, len(examples), batch_size)
    for start in progress.track(starts, len(starts), "batches"):
      batch = {k: v[start:start + batch_size] for k, v in features.items()}
      values = bert_tf_encode(batch).numpy()
      for b in range(values.shape[1]):
        example_index = start + b
        token_features = []
        for t, token in enumerate(all_tokens[example_index]):
          layer_values = [
              collections.OrderedDict([
                  ("index", index),
                  ("values", [round(float(x), 6) for x in values[j, b, t]]),
              ]) for j, index in enumerate(indexes)
          ]
          token_features.append(
              collections.OrderedDict([("token", token), ("layers", layer_values)]))
        line = collections.OrderedDict([("linex_index", examples[example_index].unique_id),
                                        ("features", token_features)])
        writer.write(json.dumps(line) + "\n")
        written += 1
  return written
