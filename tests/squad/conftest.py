"""Shared fixtures for the SQuAD tests: Google's original run_squad.py, the real tokenizer."""

import contextlib
import json

import pytest

from tests.conftest import FIXTURES
from tests.reference.google_bert import google

SQUAD_FIXTURES = FIXTURES / "squad"
V1_SAMPLE = SQUAD_FIXTURES / "allennlp_squad_v1.1_sample.json"
V2_HANDMADE = SQUAD_FIXTURES / "handmade_squad_v2.0.json"


@pytest.fixture(scope="session")
def run_squad():
  """Google's original run_squad.py (bert-tensorflow 1.0.4)."""
  return google("run_squad")


@pytest.fixture(scope="session")
def google_tokenizer(uncased_vocab):
  """Google's original FullTokenizer on the real bert-base-uncased vocab."""
  return google("tokenization").FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="session")
def google_basic_tokenizer():
  return google("tokenization").BasicTokenizer(do_lower_case=True)


@contextlib.contextmanager
def original_flags(**values):
  """Sets the absl flags the original's library functions read, then restores them."""
  from absl import flags
  old = {name: getattr(flags.FLAGS, name) for name in values}
  try:
    for name, value in values.items():
      setattr(flags.FLAGS, name, value)
    yield
  finally:
    for name, value in old.items():
      setattr(flags.FLAGS, name, value)


def training_copy(src, dst):
  """A copy of a SQuAD file fit for training: only the first gold answer of each question."""
  squad = json.loads(src.read_text(encoding="utf-8"))
  for article in squad["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qa["answers"] = qa["answers"][:1]
  dst.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
  return dst
