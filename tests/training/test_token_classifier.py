"""Token classification (run_ner.py): conlleval's scores against seqeval, the word-piece
labelling against Hugging Face's tokenizer, the model and its loss against transformers'
BertForTokenClassification on the real MiniLM weights, long sentences, bad input, and
run_ner.py end to end on a real CoNLL-2003 sample.

The references (tests/fixtures/ner/reference.json, logits.npz) were made by
tests/fixtures/make_ner_reference.py (transformers, seqeval). conll2003_sample/ (3 copies)
and conll2000_sample.txt are the CoNLL-2003 (NER, IOB1) and CoNLL-2000 (chunking) samples of
allennlp 0.9.0's test fixtures (allennlp/tests/fixtures/data/), real shared-task data.
"""

import io
import json
import os
import shutil
import sys

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

import bert_tf
from bert_tf import conlleval, tokenization
from bert_tf.__main__ import main as cli_main
from bert_tf.data import conll
from bert_tf.errors import BertTfError
from bert_tf.modeling import BertTokenClassifier, checkpoints
from bert_tf.training import distribution, token_classifier
from tests import warm
from tests.conftest import FIXTURES
from tests.reference import fine_tuning_schedule, google_models

NER = FIXTURES / "ner"
REPO = FIXTURES.parents[1]
REFERENCE = json.loads((NER / "reference.json").read_text(encoding="utf-8"))


def _sentences():
  return [conll.TaggedSentence(s["words"], s["tags"]) for s in REFERENCE["sentences"]]


# === conlleval ===

@pytest.mark.parametrize("case", REFERENCE["chunks"], ids=lambda c: c["name"])
def test_scores_equal_seqeval(case):
  result = conlleval.evaluate(case["gold"], case["predicted"])
  for key in ("precision", "recall", "f1", "accuracy"):
    assert result[key] == pytest.approx(case[key], abs=1e-12), key
  assert {k: v["f1"] for k, v in result["types"].items()} == pytest.approx(case["type_f1"])


def test_chunks_by_hand():
  # IOB1: a run of I- is one chunk, B- splits two adjacent ones of the same type.
  assert conlleval.chunks(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == [
      ("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)]
  # A change of type starts a chunk; E- and S- end one.
  assert conlleval.chunks(["B-PER", "I-LOC", "E-LOC", "I-LOC", "S-ORG"]) == [
      ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3), ("ORG", 4, 4)]
  # S- after a chunk of its type starts another; so does I- after S-.
  assert conlleval.chunks(["B-PER", "S-PER", "I-PER"]) == [
      ("PER", 0, 0), ("PER", 1, 1), ("PER", 2, 2)]
  # Two gold chunks, one found exactly, one with the wrong end: p = 1/2, r = 1/2; 4 of 5
  # tags right.
  result = conlleval.evaluate([["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]],
                              [["B-PER", "I-PER", "O", "B-LOC", "O"]])
  assert (result["precision"], result["recall"], result["f1"], result["accuracy"]) == (
      0.5, 0.5, 0.5, 0.8)
  with pytest.raises(ValueError, match="NN"):
    conlleval.evaluate([["NN"]], [["NN"]])


# === Features ===

def test_pieces_and_labels_equal_hugging_face(uncased_vocab):
  """Input ids as Hugging Face's fast tokenizer makes them from pre-split words, and a label
  at each word's first piece exactly where run_ner puts one (not -100)."""
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  features = conll.convert_sentences(_sentences(), REFERENCE["labels"],
                                     REFERENCE["max_seq_length"], tokenizer)
  assert len(features) == len(REFERENCE["sentences"])
  for feature, ids, labels in zip(features, REFERENCE["input_ids"], REFERENCE["label_ids"]):
    assert feature.input_ids == ids
    assert feature.label_mask == [int(x != -100) for x in labels]
    assert [f for f, m in zip(feature.label_ids, feature.label_mask) if m] == [
        x for x in labels if x != -100]
    assert feature.input_mask == [int(x != 0) for x in ids]


def test_long_sentences_split_between_words(uncased_vocab):
  """Every word is labelled once, in some feature, whatever the length; a word longer than a
  whole sequence keeps its first pieces; a word with no piece gets O."""
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  sentences = _sentences() + [conll.TaggedSentence(
      ["Supercalifragilisticexpialidocious", "\u200b", "Oslo"], ["B-PER", "B-LOC", "B-LOC"])]
  labels = REFERENCE["labels"]
  for length in (5, 8, 12, 24):
    features = conll.convert_sentences(sentences, labels, length, tokenizer)
    covered = [(f.sentence, w) for f in features for w in f.words]
    assert len(covered) == len(set(covered))
    for f in features:
      assert len(f.input_ids) == length and sum(f.label_mask) == len(f.words)
      assert f.input_ids[sum(f.input_mask) - 1] == tokenizer.vocab["[SEP]"]
    # The gold ids as predictions give back the gold tags (the zero-width space: O).
    tags = conll.word_predictions(sentences, features, [f.label_ids for f in features],
                                  labels)
    expected = [s.tags for s in sentences]
    expected[-1] = ["B-PER", "O", "B-LOC"]
    assert tags == expected, length
  assert len(conll.convert_sentences(sentences[:1], labels, 5, tokenizer)) > 1



def test_a_sentence_that_fits_is_one_feature_and_a_long_word_keeps_what_fits(uncased_vocab):
  """Counted by hand from the original tokenizer's pieces (EU, rejects, una ##ffa ##ble,
  tokyo ##ites, .: 8 pieces): at max_seq_length 10 they fill one feature, [CLS] 8 pieces
  [SEP], no padding; at 9 the sentence is split after "Tokyoites", the first feature full.
  A word of more pieces than a feature holds keeps the first max_seq_length - 2, as Hugging
  Face's truncation to max_length keeps them (a feature one piece short went unnoticed)."""
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  labels = ["O", "B-ORG", "B-MISC"]
  sentence = conll.TaggedSentence(["EU", "rejects", "unaffable", "Tokyoites", "."],
                                  ["B-ORG", "O", "O", "B-MISC", "O"])

  def ids(tokens, length):
    return tokenizer.convert_tokens_to_ids(tokens) + [0] * (length - len(tokens))

  pieces = ["eu", "rejects", "una", "##ffa", "##ble", "tokyo", "##ites", "."]
  [whole] = conll.convert_sentences([sentence], labels, 10, tokenizer)
  assert whole.input_ids == ids(["[CLS]", *pieces, "[SEP]"], 10)
  assert whole.input_mask == [1] * 10 and whole.words == [0, 1, 2, 3, 4]
  assert whole.label_mask == [0, 1, 1, 1, 0, 0, 1, 0, 1, 0]
  assert whole.label_ids == [0, 1, 0, 0, 0, 0, 2, 0, 0, 0]
  first, second = conll.convert_sentences([sentence], labels, 9, tokenizer)
  assert first.input_ids == ids(["[CLS]", *pieces[:7], "[SEP]"], 9)
  assert first.input_mask == [1] * 9 and first.words == [0, 1, 2, 3]
  assert second.input_ids == ids(["[CLS]", ".", "[SEP]"], 9) and second.words == [4]
  long_word = conll.TaggedSentence(["Supercalifragilisticexpialidocious"], ["B-MISC"])
  [cut] = conll.convert_sentences([long_word], labels, 5, tokenizer)
  assert cut.input_ids == ids(["[CLS]", "super", "##cal", "##if", "[SEP]"], 5)
  assert (cut.label_mask, cut.label_ids) == ([0, 1, 0, 0, 0], [0, 2, 0, 0, 0])


@pytest.mark.parametrize("count,batch_size,padded", [(4, 2, 4), (5, 2, 6), (1, 4, 4),
                                                     (8, 8, 8), (9, 8, 16)])
def test_pad_to_batch_fills_the_last_batch_only(count, batch_size, padded):
  """Up to the next multiple of the batch size: a whole batch of padding after features that
  already fill their batches was added (one more eval step of nothing) unnoticed."""
  features = [conll.TokenFeatures([1, 2], [1, 1], [0, 0], [0, 1], [0, 1], sentence=i)
              for i in range(count)]
  out = conll.pad_to_batch(features, batch_size)
  assert len(out) == padded and out[:count] == features
  assert all(not f.is_real_example and f.input_ids == [0, 0] for f in out[count:])

def test_read_conll_files():
  sentences = conll.read_conll(str(NER / "conll2003_sample" / "train.txt"))
  assert [s.words for s in sentences] == [
      ["U.N.", "official", "Ekeus", "heads", "for", "Baghdad", "."],
      ["AI2", "engineer", "Joel", "lives", "in", "Seattle", "."]]
  assert sentences[0].tags == ["I-ORG", "O", "I-PER", "O", "O", "I-LOC", "O"]
  assert sentences[1].source.endswith("train.txt:13")
  pos = conll.read_conll(str(NER / "conll2003_sample" / "train.txt"), label_column=1)
  assert pos[0].tags[:3] == ["NNP", "NN", "NNP"]
  chunking = conll.read_conll(str(NER / "conll2000_sample.txt"))
  assert len(chunking) == 2 and chunking[0].tags[:3] == ["B-NP", "B-PP", "B-NP"]
  assert conll.labels_of(chunking)[0] == "O"


def test_label_columns_counted_from_the_end_and_unlabelled_files_with_tags(tmp_path):
  """--label_column -2 is the column before the last (the CoNLL-2003 sample's chunk tags);
  a file of two columns has none before its tag (-2 is the word: refused, it was read as
  the tag). A test file read as unlabelled that has tags keeps them (the module's rule: one
  column, no tags; more, labelled)."""
  chunks = conll.read_conll(str(NER / "conll2003_sample" / "train.txt"), label_column=-2)
  assert chunks[0].tags[:3] == ["I-NP", "I-NP", "I-NP"]
  path = tmp_path / "test.txt"
  path.write_text("EU B-ORG\nrejects O\n", encoding="utf-8")
  with pytest.raises(BertTfError, match=r"test\.txt:1: 2 column\(s\), expected at least 3 "
                                        r"\(the word, and its tag in column -2\)"):
    conll.read_conll(str(path), label_column=-2)
  assert [s.tags for s in conll.read_conll(str(path), labelled=False)] == [["B-ORG", "O"]]


def test_a_docstart_line_ends_the_sentence_before_it(tmp_path):
  """-DOCSTART- is a document break even without the blank line around it (Hugging Face's
  conll2003 loader ends the sentence at a line starting -DOCSTART- as at a blank line): the
  documents' sentences were joined into one."""
  path = tmp_path / "train.txt"
  path.write_text("EU B-ORG\nrejects O\n-DOCSTART- -X- -X- O\nParis B-LOC\n", encoding="utf-8")
  sentences = conll.read_conll(str(path))
  assert [s.words for s in sentences] == [["EU", "rejects"], ["Paris"]]
  assert [s.tags for s in sentences] == [["B-ORG", "O"], ["B-LOC"]]
  assert sentences[1].source.endswith("train.txt:4")


def test_bad_files_name_file_and_line(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("EU B-ORG\nrejects\n", encoding="utf-8")
  with pytest.raises(BertTfError, match=r"train\.txt:2: 1 column\(s\)"):
    conll.read_conll(str(path))
  with pytest.raises(BertTfError, match=r"train\.txt:2: 1 column"):  # tagged from line 1 on
    conll.read_conll(str(path), labelled=False)
  unlabelled = tmp_path / "test.txt"
  unlabelled.write_text("EU\nrejects\n\nGerman\n", encoding="utf-8")
  assert [s.tags for s in conll.read_conll(str(unlabelled), labelled=False)] == [None, None]
  path.write_bytes(b"EU B-ORG\ncaf\xe9 O\n")
  with pytest.raises(BertTfError, match=r"train\.txt:2: not valid UTF-8 \(byte 4 of the line\)"):
    conll.read_conll(str(path))


def test_a_line_of_other_columns_is_refused_and_a_bad_tag_named_at_its_line(
    tmp_path, uncased_vocab):
  """A word with a space in a tab-separated file ("New York\tNNP\tI-LOC") shifted its columns:
  "New" was read with the last column's tag and "York" lost, exit 0 (conlleval.pl refuses
  lines of another width). An unlabelled test file whose later line has a tag is refused
  alike (its tags were ignored). A tag outside the labels is named at its own line (the
  sentence's first line was named)."""
  path = tmp_path / "dev.txt"
  path.write_text("EU\tNNP\tB-ORG\nNew York\tNNP\tI-LOC\n", encoding="utf-8")
  with pytest.raises(BertTfError) as error:
    conll.read_conll(str(path))
  assert str(error.value) == (f"{path}:2: 4 column(s), line 1 has 3: every line of a CoNLL "
                              "file has the same columns (a word with a space in it?)")
  path.write_text("Paris\n\nRome NNP\n", encoding="utf-8")
  with pytest.raises(BertTfError, match=r"dev\.txt:3: 2 column\(s\), line 1 has 1"):
    conll.read_conll(str(path), labelled=False)
  path.write_text("-DOCSTART- O\n\nSome O\nwords O\nParis B-LOC\nrocks B-MISC\n",
                  encoding="utf-8")
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  with pytest.raises(BertTfError, match=r"dev\.txt:6: tag 'B-MISC' of 'rocks' is not one of "
                                        r"the labels \(O, B-LOC\)"):
    conll.convert_sentences(conll.read_conll(str(path)), ["O", "B-LOC"], 16, tokenizer)


def test_label_column_0_is_refused(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("EU B-ORG\n", encoding="utf-8")
  for labelled in (True, False):
    with pytest.raises(BertTfError, match=r"^--label_column 0 is the word's column"):
      conll.read_conll(str(path), label_column=0, labelled=labelled)


def test_lines_and_columns_as_text_files_have_them(tmp_path):
  """A byte-order mark (Notepad's) is not part of the first line; lines end at \\n, \\r\\n
  and \\r only (U+2028 and U+0085 inside a word do not end its line); columns are separated
  by spaces and tabs (a no-break space is part of the word)."""
  path = tmp_path / "train.txt"
  path.write_bytes("\ufeff-DOCSTART- O\r\n\r\nEU B-ORG\r\na\u2028b O\rc\u0085d\tO\n"
                   "10\u00a0000 O\n \u00a0\n1 O\n".encode("utf-8"))
  sentences = conll.read_conll(str(path))
  assert [s.words for s in sentences] == [["EU", "a\u2028b", "c\u0085d", "10\u00a0000"], ["1"]]
  assert [s.tags for s in sentences] == [["B-ORG", "O", "O", "O"], ["O"]]
  assert sentences[1].source.endswith("train.txt:8")


# === The model ===

def _hugging_face_folder(minilm_path, tmp_path):
  """A Hugging Face BertForTokenClassification folder: MiniLM plus the reference's
  classifier.weight / classifier.bias (as save_pretrained names them)."""
  folder = tmp_path / "hf_ner"
  folder.mkdir()
  shutil.copy(minilm_path / "config.json", folder / "config.json")
  tensors = safetensors.numpy.load_file(str(minilm_path / "model.safetensors"))
  head = np.load(NER / "logits.npz")
  tensors["classifier.weight"] = head["weight"]
  tensors["classifier.bias"] = head["bias"]
  safetensors.numpy.save_file(tensors, str(folder / "model.safetensors"))
  return folder


def test_logits_and_loss_equal_transformers(minilm_path, uncased_vocab, tmp_path):
  """BertTokenClassifier loads a Hugging Face token classifier (head included) and gives its
  logits; the task's loss is its mean cross-entropy over the labelled pieces."""
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  model = BertTokenClassifier(config, len(REFERENCE["labels"]), classifier_dropout=0.1)
  report = checkpoints.load_weights(model, str(_hugging_face_folder(minilm_path, tmp_path)))
  assert "output_weights" not in str(report).split("missing")[-1]
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  features = conll.convert_sentences(_sentences(), REFERENCE["labels"],
                                     REFERENCE["max_seq_length"], tokenizer)
  batch = {name: tf.constant([getattr(f, name) for f in features], tf.int32)
           for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask")}
  logits = model(batch, training=False).numpy()
  reference = np.load(NER / "logits.npz")
  assert logits.shape == reference["logits"].shape
  np.testing.assert_allclose(logits, reference["logits"], atol=2e-4)
  task = token_classifier.TokenClassifierTask(config, len(REFERENCE["labels"]))
  loss = (task.loss_numerators(logits, batch)["tokens"] /
          task.loss_denominators(batch)["tokens"]).numpy()
  assert loss == pytest.approx(float(reference["loss"]), abs=1e-5)


# === run_ner.py ===

def _data_dir(tmp_path):
  data = tmp_path / "conll"
  data.mkdir()
  for name in ("train.txt", "dev.txt", "test.txt"):
    shutil.copy(NER / "conll2003_sample" / "train.txt", data / name)
  return data


def _run_ner(minilm_path, data, out, *flags, config=None):
  command = [sys.executable, str(REPO / "run_ner.py"), f"--data_dir={data}",
             f"--bert_config_file={config or minilm_path / 'config.json'}",
             f"--vocab_file={minilm_path / 'vocab.txt'}", f"--output_dir={out}",
             "--max_seq_length=16", "--seed=1", *flags]
  return warm.run(command, capture_output=True, text=True, timeout=300, check=False)


def _results(path):
  return {k: float(v) for k, v in (line.split(" = ") for line in
                                   path.read_text().splitlines())}


def test_run_ner_learns_the_sample(minilm_path, tmp_path):
  """A tiny BERT (the real uncased vocab) trained on the CoNLL-2003 sample tags it right
  (entity F1 1.0), with evaluation during training; predictions are conlleval's input and
  score to eval_results.txt; an eval-only run of the folder gives the same. (The README's
  run of the real MiniLM on the sample does the same in 20 steps; the tiny model keeps the
  suite short.)"""
  data, out = _data_dir(tmp_path), tmp_path / "out"
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(google_models.tiny_config_dict(vocab_size=30522)))
  done = _run_ner(minilm_path, data, out, "--do_train", "--do_eval", "--do_predict",
                  "--train_batch_size=2", "--num_train_epochs=20", "--learning_rate=5e-3",
                  "--save_checkpoints_steps=10", "--eval_during_training",
                  "--steps_per_loop=1", config=config_file)
  assert done.returncode == 0, done.stderr[-3000:]
  # 20 updates (2 features / batch 2 x 20 epochs), the default --warmup_proportion 0.1:
  # int(20 * 0.1) = 2 warmup steps, as the original computes them; the learning rate the
  # optimizer read after each update (--steps_per_loop=1: a progress line each) is the
  # original's formula's.
  assert "steps 20 (warmup 2)" in done.stdout
  assert fine_tuning_schedule.progress_learning_rates(done.stdout.splitlines()) == {
      step: pytest.approx(fine_tuning_schedule.learning_rate(step, 5e-3, 20, 2), rel=1e-3)
      for step in range(1, 21)}
  assert "Traceback" not in done.stderr and "Gradients do not exist" not in done.stderr
  history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
  assert [h["global_step"] for h in history] == [10, 20]
  results = _results(out / "eval_results.txt")
  assert results["eval_f1"] == 1.0 and results["eval_accuracy"] == 1.0
  assert results["global_step"] == 20 and results["eval_loss"] < 0.1
  assert set(results) == set(token_classifier.eval_result_keys(
      conll.labels_of(conll.read_conll(str(data / "train.txt"))))) | {"global_step"}
  # eval_predictions.txt: word gold predicted, a blank line after each sentence.
  lines = (out / "eval_predictions.txt").read_text().split("\n\n")
  rows = [[line.split() for line in block.splitlines()] for block in lines if block.strip()]
  assert [[r[0] for r in s] for s in rows] == [
      s.words for s in conll.read_conll(str(data / "dev.txt"))]
  rescored = conlleval.evaluate([[r[1] for r in s] for s in rows],
                                [[r[2] for r in s] for s in rows])
  assert rescored["f1"] == results["eval_f1"]
  assert _results(out / "test_results.txt")["test_f1"] == 1.0
  assert (out / "test_predictions.txt").read_text() == (out / "eval_predictions.txt").read_text()
  assert json.loads((out / "token_classifier.json").read_text())["labels"] == [
      "O", "I-LOC", "I-ORG", "I-PER"]
  assert (out / "best" / "token_classifier.json").exists()
  # The Google export holds the head under the classifier's names.
  names = dict(tf.train.list_variables(str(out / "google" / "bert_model.ckpt")))
  assert names["output_weights"] == [4, 32] and names["output_bias"] == [4]

  # Eval alone, in this process: the folder's tag names and last checkpoint.
  config = checkpoints.load_config(str(config_file))
  again = token_classifier.run_token_classifier(
      config, str(data), str(minilm_path / "vocab.txt"), str(out), distribution.get_strategy(),
      max_seq_length=16, seed=1, do_eval=True)["eval"]
  assert again == pytest.approx(results, abs=1e-6)
  # Trained on from here with one more sentence in train.txt: refused (it would go on through
  # other sentences than its checkpoints'), the folder as it was.
  changed = tmp_path / "changed"
  shutil.copytree(data, changed)
  train = (data / "train.txt").read_text()
  (changed / "train.txt").write_text(train.rstrip("\n") + "\n\n" +
                                     train.strip("\n").split("\n\n")[-1] + "\n")
  before = sorted(os.listdir(out))
  with pytest.raises(BertTfError, match=f"holds checkpoints trained on other examples than "
                     f"{changed / 'train.txt'}'s: resumed"):
    token_classifier.run_token_classifier(
        config, str(changed), str(minilm_path / "vocab.txt"), str(out),
        distribution.get_strategy(), max_seq_length=16, seed=1, do_train=True,
        train_batch_size=2, num_train_epochs=40, learning_rate=5e-3)
  assert sorted(os.listdir(out)) == before
  # Predict alone on a test.txt without tags: word-predicted lines, and the earlier run's
  # test_results.txt (scores of the tagged test.txt) goes, with a line.
  untagged = tmp_path / "untagged"
  untagged.mkdir()
  test_words = [s.words for s in conll.read_conll(str(data / "test.txt"))]
  (untagged / "test.txt").write_text("\n\n".join("\n".join(w) for w in test_words) + "\n")
  lines = []
  token_classifier.run_token_classifier(
      config, str(untagged), str(minilm_path / "vocab.txt"), str(out),
      distribution.get_strategy(), max_seq_length=16, do_predict=True, progress=lines.append)
  assert not (out / "test_results.txt").exists()
  assert "removed test_results.txt of an earlier run (test.txt has no tags now)" in lines
  assert [line.split()[0] for line in (out / "test_predictions.txt").read_text().split("\n")
          if line] == [w for words in test_words for w in words]

  # The folder (and its Google export) tags text: bert_tf.load(...).tag and `bert_tf tag`.
  gold = conll.read_conll(str(data / "train.txt"))
  bert = bert_tf.load(str(out / "google"))
  assert bert.tag([s.words for s in gold]) == [
      {"words": s.words, "tags": s.tags, "entities": conlleval_entities(s)} for s in gold]
  one = bert.tag("AI2 engineer Joel lives in Seattle.")
  assert one["words"][-2:] == ["Seattle", "."] and one["tags"] == gold[1].tags
  assert bert.tag("AI2 engineer Joel lives in Seattle.", split="whitespace")["words"][-1] == (
      "Seattle.")
  # ... and exports as a transformers BertForTokenClassification folder with its tag names.
  bert_tf.export_hugging_face(str(out), str(tmp_path / "hf"))
  exported = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert exported["architectures"] == ["BertForTokenClassification"]
  assert exported["id2label"] == {"0": "O", "1": "I-LOC", "2": "I-ORG", "3": "I-PER"}
  printed = io.StringIO()
  assert cli_main(["tag", f"--model={out}", "--split=whitespace", " ".join(gold[0].words)],
                  out=printed) == 0
  assert printed.getvalue().split() == [f"{w}/{t}" for w, t in zip(gold[0].words, gold[0].tags)]


def conlleval_entities(sentence):
  return [{"type": kind, "text": " ".join(sentence.words[a:b + 1]), "first_word": a,
           "last_word": b} for kind, a, b in conlleval.chunks(sentence.tags)]


def test_run_ner_one_line_errors(minilm_path, tmp_path):
  data, out = _data_dir(tmp_path), tmp_path / "out"
  (data / "dev.txt").write_text("Paris B-CITY\n", encoding="utf-8")
  done = _run_ner(minilm_path, data, out, "--do_train", "--do_eval")
  assert done.returncode == 1
  assert done.stderr.strip().splitlines()[-1].endswith(
      "dev.txt:1: tag 'B-CITY' of 'Paris' is not one of the labels (O, I-LOC, I-ORG, I-PER)")
  assert "Traceback" not in done.stderr and not out.exists()
  (data / "test.txt").unlink()
  done = _run_ner(minilm_path, data, out, "--do_predict")
  assert done.returncode == 1 and "test.txt: no such file (--do_predict reads it)" in done.stderr


def test_library_refusals(minilm_path, tmp_path):
  """Before any model is built: no tag list for an eval-only run of a new folder, and a
  --best_metric the tag set does not have."""
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  data = _data_dir(tmp_path)
  strategy = distribution.get_strategy()
  common = dict(init_checkpoint=str(minilm_path), max_seq_length=16)
  with pytest.raises(BertTfError, match="no tag list"):
    token_classifier.run_token_classifier(config, str(data), str(minilm_path / "vocab.txt"),
                                          str(tmp_path / "a"), strategy, do_eval=True, **common)
  with pytest.raises(BertTfError, match="eval_MISC_f1"):
    token_classifier.run_token_classifier(
        config, str(data), str(minilm_path / "vocab.txt"), str(tmp_path / "b"), strategy,
        do_train=True, eval_during_training=True, best_metric="eval_MISC_f1", **common)
  with pytest.raises(BertTfError, match=r"^--labels O,B-PER,O: 'O' given twice"):
    token_classifier.run_token_classifier(
        config, str(data), str(minilm_path / "vocab.txt"), str(tmp_path / "c"), strategy,
        do_train=True, labels=["O", "B-PER", "O"], **common)
  assert not os.path.exists(tmp_path / "c")
  assert token_classifier.default_best_metric(["NN", "VB"]) == "eval_accuracy"
  assert token_classifier.eval_result_keys(["NN", "VB"]) == ["eval_accuracy", "eval_loss"]
  assert not os.path.exists(tmp_path / "a" / "eval_results.txt")


def _write_conll(path, sentences):
  path.write_text("".join("".join(f"{w} {t}\n" for w, t in zip(s.words, s.tags)) + "\n"
                          for s in sentences), encoding="utf-8")


@pytest.mark.parametrize("replicas", [1, 2])
def test_eval_equals_the_model_called_directly(minilm_path, uncased_vocab, tmp_path, replicas):
  """--do_eval of a Hugging Face token classifier (MiniLM + the reference head) on one device
  and on 2 replicas: the scores of the model called directly on the features, whose
  sentences are split over several features and whose last batch is padded."""
  data = tmp_path / "conll"
  data.mkdir()
  sentences = _sentences()
  _write_conll(data / "dev.txt", sentences)
  labels, length = REFERENCE["labels"], 8
  config = checkpoints.load_config(str(minilm_path / "config.json"))
  folder = _hugging_face_folder(minilm_path, tmp_path)
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
  features = conll.convert_sentences(sentences, labels, length, tokenizer)
  assert len(features) % 4 and len(features) > len(sentences)  # padding, split sentences
  model = BertTokenClassifier(config, len(labels))
  checkpoints.load_weights(model, str(folder))
  batch = {name: tf.constant([getattr(f, name) for f in features], tf.int32)
           for name in ("input_ids", "input_mask", "segment_ids")}
  predicted = np.argmax(model(batch, training=False).numpy(), axis=-1)
  tags = conll.word_predictions(sentences, features, predicted, labels)
  assert len({t for s in tags for t in s}) > 2  # a random head, yet not one tag for all
  expected = token_classifier.scores([s.tags for s in sentences], tags, labels)

  if replicas == 1:
    strategy = distribution.get_strategy()
  else:
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) < 2:
      pytest.skip("needs 2 logical CPUs (tests/conftest.py configures them)")
    strategy = distribution.mirrored_strategy([d.name for d in cpus[:2]])
  results = token_classifier.run_token_classifier(
      config, str(data), str(uncased_vocab), str(tmp_path / "out"), strategy,
      init_checkpoint=str(folder), max_seq_length=length, do_eval=True, eval_batch_size=4,
      labels=labels)["eval"]
  assert results.pop("eval_loss") > 0 and results.pop("global_step") == 0
  assert results == pytest.approx(expected, abs=1e-12)
  written = (tmp_path / "out" / "eval_predictions.txt").read_text().split("\n\n")
  assert [[line.split()[2] for line in block.splitlines()] for block in written
          if block.strip()] == tags
