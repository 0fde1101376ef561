"""Mistakes are found before training, not after it (issue 27, item 4).

Before: a missing, empty or header-only dev.tsv, a vocab without [UNK] or a zero eval batch
size were each reported after the whole training; ``--do_eval`` alone on a folder without a
checkpoint evaluated a random model and exited 0. Now every input the run will need is read
and every count checked before the model is built: each case is a one-line ``BertTfError``
and the output folder is not even made (no checkpoint, no feature file, nothing).
"""

import json
import shutil

import pytest
import tensorflow as tf

from bert_tf.errors import BertTfError
from bert_tf.modeling import BertConfig, BertModel, checkpoints
from bert_tf.training import classifier, pretraining, squad
from tests.conftest import FIXTURES
from tests.faults.support_export import digests
from tests.reference import google_models

CONFIG = BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522,
                                                             max_position_embeddings=64))
SQUAD_LENGTHS = dict(max_seq_length=48, doc_stride=16, max_query_length=12)


@pytest.fixture(name="mrpc")
def _mrpc(tmp_path):
  data = tmp_path / "MRPC"
  shutil.copytree(FIXTURES / "glue" / "MRPC", data)
  return data


def _classifier(vocab, out, data, **kwargs):
  args = dict(data_dir=str(data), max_seq_length=32, train_batch_size=2, eval_batch_size=2,
              predict_batch_size=2, num_train_epochs=1.0)
  args.update(kwargs)
  return classifier.run_classifier(CONFIG, "MRPC", str(vocab), str(out),
                                   tf.distribute.get_strategy(), **args)


def _refused(call, *args, **kwargs):
  with pytest.raises(BertTfError) as error:
    call(*args, **kwargs)
  message = str(error.value)
  assert "\n" not in message
  return message


@pytest.mark.parametrize("damage", ["missing", "empty", "header only"])
def test_a_bad_dev_tsv_is_found_before_training(tmp_path, uncased_vocab, mrpc, damage):
  dev = mrpc / "dev.tsv"
  if damage == "missing":
    dev.unlink()
  else:
    dev.write_text(dev.read_text().splitlines(keepends=True)[0] if damage == "header only"
                   else "")
  out = tmp_path / "out"
  message = _refused(_classifier, uncased_vocab, out, mrpc, do_train=True, do_eval=True)
  assert message == (f"mrpc dev file not found (--data_dir): {str(dev)!r}" if damage == "missing"
                     else f"{dev}: no examples (empty, or a header only); --do_eval needs some")
  assert not out.exists()


def test_an_empty_test_tsv_is_found_before_training(tmp_path, uncased_vocab, mrpc):
  (mrpc / "test.tsv").write_text("")
  out = tmp_path / "out"
  assert _refused(_classifier, uncased_vocab, out, mrpc, do_train=True, do_predict=True) == (
      f"{mrpc}/test.tsv: no examples (empty, or a header only); --do_predict needs some")
  assert not out.exists()


def test_a_squad_predict_file_without_questions_is_found_before_training(tmp_path,
                                                                        uncased_vocab):
  empty = tmp_path / "dev.json"
  empty.write_text(json.dumps({"version": "1.1", "data": []}))
  out = tmp_path / "out"
  message = _refused(squad.run_squad, CONFIG, str(uncased_vocab), str(out),
                     tf.distribute.get_strategy(), do_train=True, do_predict=True,
                     train_file=str(FIXTURES / "squad" / "allennlp_squad_v1.1_sample.json"),
                     predict_file=str(empty), train_batch_size=2, predict_batch_size=2,
                     **SQUAD_LENGTHS)
  assert message == f"{empty}: no questions; --do_predict needs some"
  assert not out.exists()


def test_a_fresh_run_refused_late_leaves_no_model_files(tmp_path, uncased_vocab, mrpc):
  """Refusals that come after a fresh training run wrote its bert_config.json, vocab.txt and
  classifier.json (no training step in the data; a SQuAD training file the original refuses;
  an --init_checkpoint of other shapes): the new folder gets none of them (it held a model's
  config and no weights), and is not even left when nothing else was written."""
  out = tmp_path / "out"
  assert _refused(_classifier, uncased_vocab, out, mrpc, do_train=True,
                  num_train_epochs=0.01).endswith("gives no training step")
  assert not out.exists()
  three_answers = FIXTURES / "squad" / "allennlp_squad_v1.1_sample.json"  # as released
  message = _refused(squad.run_squad, CONFIG, str(uncased_vocab), str(out),
                     tf.distribute.get_strategy(), do_train=True, train_file=str(three_answers),
                     train_batch_size=2, **SQUAD_LENGTHS)
  assert "answer" in message and not out.exists()
  def other_checkpoint(name, **sizes):
    model = BertModel(BertConfig.from_dict(google_models.tiny_config_dict(vocab_size=30522,
                                                                          **sizes)))
    model({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
           "segment_ids": tf.zeros([1, 4], tf.int32)})
    return checkpoints.save_google_checkpoint(model, str(tmp_path / name / "bert_model.ckpt"))

  # Another hidden size: refused before anything is written (checkpoints.check_config_fits).
  assert "word_embeddings has shape [30522, 48] in the checkpoint" in _refused(
      _classifier, uncased_vocab, out, mrpc, do_train=True,
      init_checkpoint=other_checkpoint("other", hidden_size=48))
  assert not out.exists()
  # Another position table: found by the load itself, once the run has begun.
  assert "position_embeddings has shape [128, 32]" in _refused(
      _classifier, uncased_vocab, out, mrpc, do_train=True,
      init_checkpoint=other_checkpoint("positions", max_position_embeddings=128))
  left = {p.name for p in out.iterdir()}
  assert "train.tf_record" in left  # the features' cache stays
  assert not left & {"bert_config.json", "vocab.txt", "classifier.json", "run_settings.json"}


def test_a_fresh_training_run_sets_aside_an_earlier_runs_results(tmp_path, uncased_vocab,
                                                                  mrpc):
  """An eval/predict-only run of another model (the --init_checkpoint) left its results in
  the folder; a new training run there left them beside its own model (a 2-column
  test_results.tsv beside a 3-label classifier). Now they go once the new run has a
  checkpoint, with a line, and stay when it fails before one."""
  out = tmp_path / "out"
  out.mkdir()
  earlier = {"eval_results.txt": "eval_accuracy = 0.5\nglobal_step = 0\n",
             "test_results.tsv": "0.4\t0.6\n", "MRPC.tsv": "index\tprediction\n0\t1\n"}
  for name, text in earlier.items():
    (out / name).write_text(text)
  _refused(_classifier, uncased_vocab, out, mrpc, do_train=True, num_train_epochs=0.01)
  assert {p.name: p.read_text() for p in out.iterdir()} == earlier  # as it was
  lines = []
  _classifier(uncased_vocab, out, mrpc, do_train=True, progress=lines.append)
  assert ("set aside eval_results.txt, test_results.tsv, MRPC.tsv: results of an earlier "
          "run, not of the model this run trains (removed once it saves a checkpoint, put "
          "back if it fails before)") in lines
  left = {p.name for p in out.iterdir()}
  assert not left & set(earlier) and not [n for n in left if ".tmp-" in n]
  assert tf.train.latest_checkpoint(str(out))


def test_another_scripts_folder_is_not_evaluated_with_a_random_head(tmp_path, uncased_vocab,
                                                                     mrpc):
  """run_squad (or run_pretraining, run_ner) predicting or evaluating without training over a
  folder run_classifier fine-tuned: its checkpoints have no span head, which stayed random;
  the predictions were written and the folder's own eval_results.txt removed, exit 0."""
  out = tmp_path / "out"
  _classifier(uncased_vocab, out, mrpc, do_train=True, do_eval=True)
  before = digests(out)
  with pytest.raises(BertTfError) as error:
    squad.run_squad(CONFIG, str(uncased_vocab), str(out), tf.distribute.get_strategy(),
                    do_predict=True, predict_batch_size=2,
                    predict_file=str(FIXTURES / "squad" / "allennlp_squad_v1.1_sample.json"),
                    **SQUAD_LENGTHS)
  latest = tf.train.latest_checkpoint(str(out))
  assert str(error.value) == (
      f"--do_predict without --do_train: {latest} lacks cls/squad/output_weights, "
      "cls/squad/output_bias (they would be random): its folder holds another kind of model "
      "(made by another script or task?); give this run an --output_dir of its own")
  assert digests(out) == before
  # Its own script evaluates it again, as before.
  assert "eval_accuracy" in _classifier(uncased_vocab, out, mrpc, do_eval=True)["eval"]


def test_a_vocab_without_unk_is_found_before_training(tmp_path, uncased_vocab, mrpc):
  """Same size (the config's vocab_size still fits), only [UNK] renamed."""
  vocab = tmp_path / "vocab.txt"
  vocab.write_text(uncased_vocab.read_text(encoding="utf-8").replace("[UNK]\n", "[UNK0]\n"),
                   encoding="utf-8")
  out = tmp_path / "out"
  assert _refused(_classifier, vocab, out, mrpc, do_train=True, do_eval=True) == (
      f"vocab file {vocab}: no [UNK] token (a BERT vocab needs [UNK], [CLS], [SEP])")
  assert not out.exists()


def test_zero_or_negative_batch_sizes_are_found_before_training(tmp_path):
  out = tmp_path / "out"
  for kwargs, flag, value in ((dict(eval_batch_size=0), "--eval_batch_size", 0),
                              (dict(train_batch_size=0), "--train_batch_size", 0),
                              (dict(train_batch_size=-8), "--train_batch_size", -8),
                              (dict(max_eval_steps=0), "--max_eval_steps", 0)):
    message = _refused(pretraining.run_pretraining, CONFIG, str(tmp_path / "x.tfrecord"),
                       str(out), tf.distribute.get_strategy(), do_train=True, do_eval=True,
                       max_seq_length=32, **kwargs)
    assert message == f"{flag} must be at least 1, got {value}"
  assert not out.exists()


def test_pretraining_eval_files_that_match_nothing_are_found_before_training(tmp_path):
  out = tmp_path / "out"
  pattern = str(tmp_path / "eval-*.tfrecord")
  message = _refused(pretraining.run_pretraining, CONFIG, str(tmp_path / "train.tfrecord"),
                     str(out), tf.distribute.get_strategy(), do_train=True, do_eval=True,
                     eval_input_file=pattern, max_seq_length=32)
  assert message == f"no input files match {pattern!r} (--eval_input_file)"
  assert not out.exists()


# === Evaluating or predicting without trained weights ===

def test_eval_alone_without_a_checkpoint_or_init_checkpoint_is_refused(tmp_path, uncased_vocab,
                                                                       mrpc):
  out = tmp_path / "out"
  strategy = tf.distribute.get_strategy()
  need = ("without --do_train needs trained weights: no training checkpoint in --output_dir "
          f"{out} and no --init_checkpoint (the model would be random)")
  assert _refused(_classifier, uncased_vocab, out, mrpc, do_eval=True) == f"--do_eval {need}"
  assert _refused(_classifier, uncased_vocab, out, mrpc, do_predict=True) == (
      f"--do_predict {need}")
  assert _refused(pretraining.run_pretraining, CONFIG, str(tmp_path / "x.tfrecord"), str(out),
                  strategy, do_train=False, do_eval=True, max_seq_length=32) == (
                      f"--do_eval {need}")
  assert _refused(squad.run_squad, CONFIG, str(uncased_vocab), str(out), strategy,
                  do_predict=True, predict_file=str(FIXTURES / "squad" /
                                                    "allennlp_squad_v1.1_sample.json"),
                  **SQUAD_LENGTHS) == f"--do_predict {need}"
  assert not out.exists()


def test_eval_alone_from_a_pretrained_bert_without_the_head_is_refused(tmp_path, uncased_vocab,
                                                                       mrpc):
  """A pre-trained BERT's checkpoint has no classifier head: evaluating it evaluates a random
  head (the original did, and exited 0)."""
  encoder = BertModel(CONFIG)
  encoder({"input_ids": tf.zeros([1, 4], tf.int32), "input_mask": tf.ones([1, 4], tf.int32),
           "segment_ids": tf.zeros([1, 4], tf.int32)})
  init = str(tmp_path / "pretrained" / "bert_model.ckpt")
  checkpoints.save_google_checkpoint(encoder, init)
  out = tmp_path / "out"
  assert _refused(_classifier, uncased_vocab, out, mrpc, do_eval=True, init_checkpoint=init) == (
      f"--do_eval without --do_train: --init_checkpoint {init} lacks output_weights, "
      "output_bias (they would be random); train first (--do_train) or give a checkpoint that "
      "holds them")
  assert not out.exists()
