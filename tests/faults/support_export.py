"""Shared by tests/faults/test_export_* and test_vocab_*: run a command as a user would, read
its one-line error, fingerprint a folder."""

import hashlib
import os
import pathlib
import sys

from tests import warm

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_script(*argv, timeout=600):
  """``python argv...`` from the repository root (``run_squad.py ...``, ``-m bert_tf ...``)
  -> CompletedProcess with text stdout/stderr."""
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  return warm.run([sys.executable, *map(str, argv)], capture_output=True, text=True,
                  cwd=ROOT, env=env, timeout=timeout)


def error_line(result):
  """The error a failed command printed: asserts exit status 1 and no traceback, returns the
  last line of stderr (TensorFlow's start-up chatter may precede it)."""
  assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  return result.stderr.strip().splitlines()[-1]


def digests(folder):
  """{relative path: sha256 of the bytes} of everything under ``folder`` (None for folders)."""
  folder = pathlib.Path(folder)
  return {path.relative_to(folder).as_posix():
          None if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
          for path in sorted(folder.rglob("*"))}


TINY_VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n"


def tiny_encoder(seed):
  """A one-layer ``BertModel`` whose every weight is drawn from numpy's ``RandomState(seed)``:
  the same bytes in any process (for exports compared by digest)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from bert_tf.modeling import BertConfig, BertModel  # pylint: disable=import-outside-toplevel
  model = BertModel(BertConfig(vocab_size=6, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=16,
                               max_position_embeddings=16))
  rng = np.random.RandomState(seed)
  for variable in model.weights:
    variable.assign(rng.randn(*tuple(variable.shape)).astype(np.float32))
  return model
