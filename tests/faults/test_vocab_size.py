"""A vocab.txt that does not have exactly the config's vocab_size tokens is an error (issue 17).

Before: a smaller vocab loaded silently (fill-mask printed ``[unused id 22382]`` for the rows no
token reached); only a larger one was refused. Token id i is row i of the embedding table, so
the two sizes must be equal wherever a vocab meets a config: ``bert_tf.load`` / ``--model``,
run_classifier, run_squad (and extract_features, run_pretraining --dynamic_masking, which call
the same ``tokenization.check_vocab_size``).
"""

import json
import shutil

import pytest
import tensorflow as tf

import bert_tf
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig
from bert_tf.training import classifier, squad
from tests.conftest import FIXTURES
from tests.faults.support_export import digests, error_line, run_script
from tests.reference import google_models

TINY = FIXTURES / "tiny_hf_pretraining"  # config.json says vocab_size 44; vocab.txt has 44.


def _model_with_vocab(tmp_path, tokens):
  folder = tmp_path / "model"
  shutil.copytree(TINY, folder)
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
  return folder


def test_fill_mask_with_a_smaller_vocab(tmp_path):
  tokens = (TINY / "vocab.txt").read_text().split("\n")[:-1]
  assert len(tokens) == json.loads((TINY / "config.json").read_text())["vocab_size"] == 44
  folder = _model_with_vocab(tmp_path, tokens[:-1])
  before = digests(tmp_path)
  result = run_script("-m", "bert_tf", "fill-mask", f"--model={folder}", "the [MASK] .")
  assert error_line(result) == (
      f"bert_tf fill-mask: error: vocab file '{folder}/vocab.txt' has 43 tokens but the BERT "
      f"config '{folder}/config.json' says vocab_size 44: they are not of the same model")
  assert result.stdout == ""
  assert digests(tmp_path) == before


def test_load_refuses_larger_and_smaller_accepts_equal(tmp_path):
  tokens = (TINY / "vocab.txt").read_text().split("\n")[:-1]
  for size in (43, 45, 1):
    vocab = tmp_path / f"vocab{size}.txt"
    vocab.write_text("".join(t + "\n" for t in (tokens + ["extra"])[:size]))
    with pytest.raises(BertTfError) as error:
      bert_tf.load(str(TINY), vocab_file=str(vocab))
    assert str(error.value) == (
        f"vocab file '{vocab}' has {size} tokens but the BERT config '{TINY}/config.json' "
        "says vocab_size 44: they are not of the same model")
  assert bert_tf.load(str(TINY)).config.vocab_size == 44


@pytest.mark.parametrize("vocab_size", [30521, 30523])
def test_scripts_refuse_a_vocab_of_another_size(tmp_path, uncased_vocab, vocab_size):
  """run_classifier and run_squad (as their scripts call them) with the real 30522-token
  vocab and a config one token smaller or larger: the error, and nothing written."""
  config = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=vocab_size))
  message = (f"vocab file '{uncased_vocab}' has 30522 tokens but the BERT config says "
             f"vocab_size {vocab_size}: they are not of the same model")
  strategy = tf.distribute.get_strategy()
  with pytest.raises(BertTfError) as error:
    classifier.run_classifier(config, "MRPC", str(uncased_vocab), str(tmp_path / "mrpc"),
                              strategy, data_dir=str(FIXTURES / "glue" / "MRPC"),
                              do_train=True, max_seq_length=16)
  assert str(error.value) == message
  with pytest.raises(BertTfError) as error:
    squad.run_squad(config, str(uncased_vocab), str(tmp_path / "squad"), strategy,
                    export_dir=str(tmp_path / "qa"), max_seq_length=48, doc_stride=16,
                    max_query_length=12)
  assert str(error.value) == message
  assert sorted(p.name for p in tmp_path.iterdir()) == []
