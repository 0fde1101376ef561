"""bert_tf.data.pretraining and data_prep/create_pretraining_data.py against Google's original.

The reference is bert-tensorflow 1.0.4's create_pretraining_data.py (through the shim), run
on real text: State of the Union addresses (tests/fixtures/pretraining/sotu_sample.txt),
Python's own documentation topics, and a file of reading/tokenizing quirks. Records are
compared byte for byte with the original's records re-serialized canonically (the
original's own bytes vary from run to run: protobuf map order is hash-seeded per process).
"""

import gzip
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import tokenization
from bert_tf.data import features as features_lib
from bert_tf.data import pipeline
from bert_tf.data import pretraining
from bert_tf.errors import BertTfError
from tests.conftest import FIXTURES
from tests.reference.google_bert import google

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOTU = str(FIXTURES / "pretraining" / "sotu_sample.txt")
CASED_VOCAB = str(FIXTURES / "cased_vocab.txt")


# --- inputs ----------------------------------------------------------------------------------

def _pydoc_text(topics=30):
  """Python's documentation topics as documents, one sentence per line."""
  from pydoc_data import topics as pydoc_topics
  out = []
  for name in sorted(pydoc_topics.topics)[:topics]:
    for paragraph in re.split(r"\n\s*\n", pydoc_topics.topics[name]):
      text = " ".join(paragraph.split())
      out.extend(s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", text) if s)
    out.append("")
  return "\n".join(out) + "\n"


# Bytes that exercise the original's reading (TF's readline drops every "\r"; str.strip();
# blank = empty once stripped) and tokenization (accents, CJK, controls, long words).
_QUIRKS = (
    "First document, first sentence.\r\nIt goes on\rwith a carriage return.\r\n"
    "   \t  \r\n"                                   # blank: a new document
    "Second document: Déjà vu, naïve café, ÅNGSTRÖM.\n"
    "中文字符 and 日本語 in a sentence.\n"
    "\u200b\n"                                      # not blank, no tokens: no sentence
    "Control\x00chars\x01and\x7fthe\u00adsoft hyphen.\n"
    "\u3000\n"                                      # blank (ideographic space)
    "\n\n"                                          # empty documents
    "A one-sentence document.\n"
    "\x1c\n"                                        # blank: str.strip() removes \x1c
    "Third: " + "x" * 230 + " is too long, [MASK] and [CLS] are text.\n"
    "Emoji 🙂 and math ∑ and quotes “like this” – dash.\n"
    "Numbers 3,000,000 florins; 1.5e-3; #hash @at.\n"
    "\n"
    "Last document without a final newline."
).encode("utf-8")


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory, uncased_vocab):
  d = tmp_path_factory.mktemp("corpus")
  (d / "pydoc.txt").write_text(_pydoc_text(), encoding="utf-8")
  (d / "quirks.txt").write_bytes(_QUIRKS)
  # Vocab sizes on both sides of what the fast paths handle (< 2**8, >= 2**15 tokens).
  with open(CASED_VOCAB, encoding="utf-8") as f:
    (d / "small_vocab.txt").write_text("".join(f.readlines()[:250]), encoding="utf-8")
  with open(uncased_vocab, encoding="utf-8") as f:
    big = f.read() + "".join(f"[extra{i}]\n" for i in range(10000))
  (d / "big_vocab.txt").write_text(big, encoding="utf-8")
  return {"sotu": SOTU, "pydoc": str(d / "pydoc.txt"), "quirks": str(d / "quirks.txt"),
          "small_vocab": str(d / "small_vocab.txt"), "big_vocab": str(d / "big_vocab.txt")}


# --- helpers ---------------------------------------------------------------------------------

def _read(path, compression=""):
  return [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def _canonical(record):
  return tf.train.Example.FromString(record).SerializeToString(deterministic=True)


def _google_records(tmp_path, inputs, vocab, lower, L, P, dupe, mlp, ssp, seed, n_out):
  """Google's create_pretraining_data: create_training_instances + write (as its main)."""
  cpd = google("create_pretraining_data")
  tokenizer = google("tokenization").FullTokenizer(vocab_file=vocab, do_lower_case=lower)
  instances = cpd.create_training_instances(inputs, tokenizer, L, dupe, ssp, mlp, P,
                                            random.Random(seed))
  outputs = [str(tmp_path / f"google-{i}.tfrecord") for i in range(n_out)]
  cpd.write_instance_to_example_files(instances, tokenizer, L, P, outputs)
  return [_read(o) for o in outputs]


def _ours(tmp_path, inputs, vocab, lower, options, n_out, **kwargs):
  tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=lower)
  outputs = [str(tmp_path / f"ours-{i}.tfrecord") for i in range(n_out)]
  summary = pretraining.create_pretraining_data(inputs, outputs, tokenizer, options, **kwargs)
  return summary, outputs


def _assert_same_records(expected_files, our_files, compression=""):
  assert len(expected_files) == len(our_files)
  for expected, path in zip(expected_files, our_files):
    ours = _read(path, compression)
    assert len(ours) == len(expected), path
    for i, (e, o) in enumerate(zip(expected, ours)):
      if _canonical(e) != o:
        ex, ox = tf.train.Example.FromString(e), tf.train.Example.FromString(o)
        diff = [n for n in ex.features.feature if ex.features.feature[n] != ox.features.feature[n]]
        pytest.fail(f"{path} record {i}: features differ: {diff}")


# --- the random stream -----------------------------------------------------------------------

def test_reference_random_makes_the_draws_of_random_random():
  for seed in [0, 1, 12345, "12345/3"]:
    expected, ours = random.Random(seed), pretraining.ReferenceRandom(seed, block_words=97)
    ops = random.Random(seed)
    for _ in range(1500):
      op = ops.randrange(4)
      if op == 0:
        assert ours.random() == expected.random()
      elif op == 1:
        n = ops.choice([1, 2, 3, 7, 8, 9, 255, 256, 257, 30522, 40000, 1 << 20, (1 << 31) + 5])
        assert ours.randbelow(n) == expected.randrange(n)
      elif op == 2:
        low = ops.randrange(5)
        high = low + ops.randrange(50)
        assert ours.randint(low, high) == expected.randint(low, high)
      else:
        a, b = list(range(ops.randrange(300))), None
        b = list(a)
        expected.shuffle(a)
        ours.shuffle(b)
        assert a == b


# --- reference mode: the original's records --------------------------------------------------

CASES = {
    # name: (inputs, vocab, lower, L, P, dupe, masked_lm_prob, short_seq_prob, seed, outputs)
    "defaults": (["sotu", "pydoc"], None, True, 128, 20, 2, 0.15, 0.1, 12345, 2),
    "short": (["pydoc", "sotu", "quirks"], None, True, 32, 5, 3, 0.3, 0.5, 7, 3),
    "tiny": (["quirks", "sotu"], None, True, 12, 2, 1, 0.9, 0.2, 3, 1),
    "cased": (["quirks", "pydoc"], CASED_VOCAB, False, 64, 10, 2, 0.15, 0.1, 99, 2),
    "small_vocab": (["sotu"], "small_vocab", False, 40, 8, 1, 0.15, 0.1, 8, 1),
    "big_vocab": (["sotu", "quirks"], "big_vocab", True, 128, 20, 1, 0.15, 0.1, 11, 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_records_as_google(case, corpus_files, uncased_vocab, tmp_path):
  names, vocab, lower, L, P, dupe, mlp, ssp, seed, n_out = CASES[case]
  inputs = [corpus_files[n] for n in names]
  vocab = corpus_files.get(vocab, vocab) or str(uncased_vocab)
  expected = _google_records(tmp_path, inputs, vocab, lower, L, P, dupe, mlp, ssp, seed, n_out)
  options = pretraining.InstanceOptions(
      max_seq_length=L, max_predictions_per_seq=P, masked_lm_prob=mlp, short_seq_prob=ssp,
      dupe_factor=dupe, random_seed=seed)
  summary, ours = _ours(tmp_path, inputs, vocab, lower, options, n_out)
  _assert_same_records(expected, ours)
  assert summary.instances == sum(map(len, expected)) > 50


def test_documents_and_lines_as_googles_reader(corpus_files, uncased_vocab):
  """The corpus (documents, sentences, ids) equals the original's all_documents."""
  inputs = [corpus_files["quirks"], corpus_files["sotu"]]
  tokenizer = google("tokenization").FullTokenizer(str(uncased_vocab), True)
  cpd = google("create_pretraining_data")

  class NoShuffle(random.Random):
    documents = None

    def shuffle(self, x):  # The first shuffle is of the documents: keep them as read.
      if self.documents is None:
        self.documents = [list(map(tokenizer.convert_tokens_to_ids, d)) for d in x]

  rng = NoShuffle(0)
  cpd.create_training_instances(inputs, tokenizer, 128, 0, 0.1, 0.15, 20, rng)
  summary = pretraining.Summary()
  corpus = pretraining.read_corpus(
      [(f, 0, None) for f in inputs],
      pretraining.LineTokenizer(tokenization.FullTokenizer(str(uncased_vocab), True)), summary)
  ids = corpus.token_array().tolist()
  starts = corpus.sentence_start
  ours = [[ids[starts[s]:starts[s + 1]] for s in range(first, end)]
          for first, end in corpus.documents]
  assert ours == rng.documents
  assert summary.one_sentence_documents >= 1 and summary.empty_documents >= 2


# --- whole-word masking: the later original's rule ------------------------------------------

def _whole_word_masking(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
  """The later original's create_masked_lm_predictions with do_whole_word_mask (REFERENCE.md):
  a word is a piece and the ## pieces after it; words shuffled; a word that would exceed
  num_to_predict is skipped; 80/10/10 per piece."""
  words = []
  for i, token in enumerate(tokens):
    if token in ("[CLS]", "[SEP]"):
      continue
    if words and token.startswith("##"):
      words[-1].append(i)
    else:
      words.append([i])
  rng.shuffle(words)
  num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
  output = list(tokens)
  masked = []
  for word in words:
    if len(masked) >= num_to_predict:
      break
    if len(masked) + len(word) > num_to_predict:
      continue
    for i in word:
      if rng.random() < 0.8:
        output[i] = "[MASK]"
      elif rng.random() < 0.5:
        output[i] = tokens[i]
      else:
        output[i] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      masked.append((i, tokens[i]))
  masked.sort()
  return output, [i for i, _ in masked], [t for _, t in masked]


def test_whole_word_masking(corpus_files, uncased_vocab, tmp_path, monkeypatch):
  cpd = google("create_pretraining_data")
  monkeypatch.setattr(cpd, "create_masked_lm_predictions", _whole_word_masking)
  inputs = [corpus_files["sotu"], corpus_files["quirks"]]
  expected = _google_records(tmp_path, inputs, str(uncased_vocab), True, 48, 8, 2, 0.2, 0.1,
                             5, 2)
  options = pretraining.InstanceOptions(max_seq_length=48, max_predictions_per_seq=8,
                                        masked_lm_prob=0.2, dupe_factor=2, random_seed=5,
                                        do_whole_word_mask=True)
  _, ours = _ours(tmp_path, inputs, str(uncased_vocab), True, options, 2)
  _assert_same_records(expected, ours)
  # And the rule itself: masked pieces are whole words.
  inv = {i: t for t, i in tokenization.load_vocab(str(uncased_vocab)).items()}
  spec = features_lib.pretraining_feature_spec(48, 8)
  words_seen = 0
  for path in ours:
    for record in _read(path):
      f = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
      real = f["masked_lm_weights"] > 0
      tokens = f["input_ids"].copy()
      tokens[f["masked_lm_positions"][real]] = f["masked_lm_ids"][real]
      masked = set(f["masked_lm_positions"][real].tolist())
      n = int(f["input_mask"].sum())
      for p in masked:
        if p + 1 < n - 1 and inv[int(tokens[p + 1])].startswith("##"):
          assert p + 1 in masked
        if inv[int(tokens[p])].startswith("##") and inv[int(tokens[p - 1])] not in (
            "[CLS]", "[SEP]"):
          assert p - 1 in masked
          words_seen += 1
  assert words_seen > 20


# --- sharded mode ------------------------------------------------------------------------------

@pytest.mark.parametrize("n_out,zipped", [(1, False), (3, False), (3, True)])
def test_sharded_mode_is_the_algorithm_per_shard_and_deterministic(corpus_files, uncased_vocab,
                                                                  tmp_path, n_out, zipped):
  """Each shard is the original algorithm on the shard's text with Random(f"{seed}/{i}");
  shards are written in order, record i of a shard to output file i % n_out; the output does
  not depend on the worker count. The workers' shard files are gone at the end."""
  inputs = [corpus_files["sotu"], corpus_files["pydoc"]]
  options = pretraining.InstanceOptions(max_seq_length=64, max_predictions_per_seq=10,
                                        dupe_factor=2, random_seed=21)
  cpd = google("create_pretraining_data")
  tokenizer = google("tokenization").FullTokenizer(str(uncased_vocab), True)
  round_robin = [[] for _ in range(n_out)]
  for shard, path in enumerate(inputs):  # Files smaller than a shard: one shard each.
    instances = cpd.create_training_instances([path], tokenizer, 64, 2, 0.1, 0.15, 10,
                                              random.Random(f"21/{shard}"))
    out = str(tmp_path / f"shard-{shard}.tfrecord")
    cpd.write_instance_to_example_files(instances, tokenizer, 64, 10, [out])
    records = _read(out)
    if shard == 0 and n_out > 1:
      # One round-robin over both shards would not start the second shard at file 0.
      assert len(records) % n_out != 0
    for k in range(n_out):
      round_robin[k] += records[k::n_out]
  runs = []
  for workers in (1, 2):
    run_dir = tmp_path / f"workers-{workers}"
    run_dir.mkdir()
    summary, ours = _ours(run_dir, inputs, str(uncased_vocab), True, options, n_out,
                          num_workers=workers, gzip=zipped)
    assert summary.shards == 2 and summary.instances == sum(map(len, round_robin))
    _assert_same_records(round_robin, ours, "GZIP" if zipped else "")
    assert sorted(os.listdir(run_dir)) == sorted(os.path.basename(p) for p in ours)
    runs.append([open(p, "rb").read() for p in ours])
  assert runs[0] == runs[1]


def test_large_files_are_cut_at_document_boundaries(corpus_files, uncased_vocab, tmp_path):
  shards = pretraining.plan_shards([corpus_files["pydoc"]], 20000)
  assert len(shards) > 3
  text = open(corpus_files["pydoc"], "rb").read()
  for (_, start, end), (_, next_start, _) in zip(shards, shards[1:]):
    assert end == next_start and text[end - 2:end] == b"\n\n"  # just after a blank line
  # Sharded reading sees the same documents as reading the whole file.
  tokenizer = pretraining.LineTokenizer(tokenization.FullTokenizer(str(uncased_vocab), True))
  whole = pretraining.read_corpus([(corpus_files["pydoc"], 0, None)], tokenizer,
                                  pretraining.Summary())
  pieces = [pretraining.read_corpus([s], tokenizer, pretraining.Summary()) for s in shards]
  assert sum(len(p.documents) for p in pieces) == len(whole.documents)
  assert b"".join(bytes(p.tokens) for p in pieces) == bytes(whole.tokens)


# --- output ------------------------------------------------------------------------------------

def test_gzip_and_googles_reader(corpus_files, uncased_vocab, tmp_path):
  options = pretraining.InstanceOptions(max_seq_length=32, max_predictions_per_seq=5,
                                        dupe_factor=1)
  _, plain = _ours(tmp_path, [corpus_files["sotu"]], str(uncased_vocab), True, options, 1)
  zipped = str(tmp_path / "ours.tfrecord.gz")
  pretraining.create_pretraining_data([corpus_files["sotu"]], [zipped],
                                      tokenization.FullTokenizer(str(uncased_vocab)), options,
                                      gzip=True)
  assert open(zipped, "rb").read(2) == b"\x1f\x8b"
  assert gzip.decompress(open(zipped, "rb").read()) == open(plain[0], "rb").read()
  # The original's run_pretraining input_fn reads our records.
  run_pretraining = google("run_pretraining")
  dataset = run_pretraining.input_fn_builder(plain, 32, 5, is_training=False)(
      {"batch_size": 4})
  batch = next(iter(dataset))
  spec = features_lib.pretraining_feature_spec(32, 5)
  first = [tf.io.parse_single_example(r, spec) for r in _read(plain[0])[:4]]
  for name in features_lib.PRETRAINING_FEATURE_NAMES:
    assert batch[name].dtype == (tf.float32 if name == "masked_lm_weights" else tf.int32)
    np.testing.assert_array_equal(batch[name].numpy(), np.stack([f[name] for f in first]))
  # And bert_tf's reader, from the gzipped file.
  ours = next(iter(pipeline.pretraining_dataset([zipped], 4, 32, 5, is_training=False)))
  for name in features_lib.PRETRAINING_FEATURE_NAMES:
    np.testing.assert_array_equal(ours[name].numpy(), batch[name].numpy())


# --- bad input ---------------------------------------------------------------------------------

def _vocab_without(tmp_path, uncased_vocab, token):
  path = tmp_path / "vocab.txt"
  path.write_text("".join(t + "\n" for t in tokenization.load_vocab(str(uncased_vocab))
                          if t != token))
  return str(path)


def test_bad_inputs_are_one_line_errors_and_leave_no_output(corpus_files, uncased_vocab,
                                                            tmp_path):
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
  out = tmp_path / "out" / "x.tfrecord"
  (tmp_path / "empty.txt").write_text("\n \n\n")
  (tmp_path / "bad.txt").write_bytes(b"Fine line.\n\nAnother fine line.\nBad \xff byte.\n")
  cases = [
      ([str(tmp_path / "missing*.txt")], {}, r"--input_file: no file matches '.*missing\*.txt'"),
      ([str(tmp_path / "empty.txt")], {}, r"--input_file: no text in 1 input files"),
      ([corpus_files["sotu"], str(tmp_path / "bad.txt")], {},
       r"bad.txt:4: invalid UTF-8 at byte 5 of the line \(fix the file or pass "
       r"--skip_invalid_utf8\)"),
      ([corpus_files["sotu"]], {"options": pretraining.InstanceOptions(max_seq_length=4)},
       r"--max_seq_length=4: must be at least 5"),
      ([corpus_files["sotu"]], {"options": pretraining.InstanceOptions(dupe_factor=0)},
       r"--dupe_factor=0: must be at least 1"),
      ([corpus_files["sotu"]], {"options": pretraining.InstanceOptions(masked_lm_prob=0)},
       r"--masked_lm_prob=0: must be in \(0, 1\]"),
      ([corpus_files["sotu"]], {"num_workers": -1}, r"--num_workers=-1"),
  ]
  for inputs, kwargs, message in cases:
    options = kwargs.pop("options", pretraining.InstanceOptions(dupe_factor=1))
    with pytest.raises(BertTfError, match=message) as info:
      pretraining.create_pretraining_data(inputs, [str(out)], tokenizer, options, **kwargs)
    assert "\n" not in str(info.value)
    assert not out.parent.exists() or not os.listdir(out.parent)  # nothing, not even a temp
  for token in ("[CLS]", "[MASK]", "[UNK]"):
    vocab = _vocab_without(tmp_path, uncased_vocab, token)
    with pytest.raises(BertTfError, match=rf"vocab file '.*vocab.txt' lacks \[{token[1:-1]}\]"):
      pretraining.create_pretraining_data([corpus_files["sotu"]], [str(out)],
                                          tokenization.FullTokenizer(vocab),
                                          vocab_file=vocab)
  # A token on two lines: which id the records should hold is the author's to say (1.0.4
  # shifted every later id, the later original gives the last line's).
  lines = uncased_vocab.read_text(encoding="utf-8").split("\n")
  repeated = tmp_path / "repeated" / "vocab.txt"
  repeated.parent.mkdir()
  repeated.write_text("\n".join(lines[:100] + ["[PAD]"] + lines[101:]), encoding="utf-8")
  for workers in (0, 2):
    with pytest.raises(BertTfError, match=r"repeated/vocab.txt:101: token '\[PAD\]' repeats "
                       r"line 1: a vocab for new pretraining data lists each token once"):
      pretraining.create_pretraining_data([corpus_files["sotu"]], [str(out)],
                                          tokenization.FullTokenizer(str(repeated)),
                                          vocab_file=str(repeated), num_workers=workers)
  # A worker's error in sharded mode: the same message, nothing written.
  with pytest.raises(BertTfError, match=r"bad.txt:4: invalid UTF-8 at byte 5"):
    pretraining.create_pretraining_data([corpus_files["sotu"], str(tmp_path / "bad.txt")],
                                        [str(out)], tokenizer,
                                        pretraining.InstanceOptions(dupe_factor=1),
                                        num_workers=2)
  assert not os.listdir(out.parent)
  # A failed run keeps what was there before.
  out.parent.mkdir(exist_ok=True)
  out.write_bytes(b"old")
  with pytest.raises(BertTfError):
    pretraining.create_pretraining_data([str(tmp_path / "bad.txt")], [str(out)], tokenizer)
  assert out.read_bytes() == b"old" and os.listdir(out.parent) == ["x.tfrecord"]


def test_counted_skips_and_warnings(corpus_files, uncased_vocab, tmp_path, caplog):
  (tmp_path / "bad.txt").write_bytes(b"Fine line.\nBad \xff byte.\nAnother fine line.\n")
  (tmp_path / "empty.txt").write_text("")
  (tmp_path / "one.txt").write_text("The only document, and its only sentence.\n")
  tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
  # Invalid UTF-8 skipped when asked; an empty file among others; a capped mask count.
  options = pretraining.InstanceOptions(max_seq_length=64, max_predictions_per_seq=3,
                                        dupe_factor=1)
  summary = pretraining.create_pretraining_data(
      [str(tmp_path / "bad.txt"), str(tmp_path / "empty.txt"), corpus_files["sotu"]],
      [str(tmp_path / "a.tfrecord")], tokenizer, options, skip_invalid_utf8=True)
  assert summary.invalid_lines == 1 and summary.empty_files == 1
  assert summary.capped > 0.5 * summary.instances
  text = "\n".join(summary.lines_of_text())
  assert "1 lines of invalid UTF-8 skipped" in text and "1 input files without text" in text
  assert "masks capped at max_predictions_per_seq" in text
  assert any("--max_predictions_per_seq=3 is below max_seq_length * masked_lm_prob = 10"
             in r.getMessage() for r in caplog.records)
  # A corpus of one one-sentence document: random next sentences from itself, counted.
  summary = pretraining.create_pretraining_data([str(tmp_path / "one.txt")],
                                                [str(tmp_path / "b.tfrecord")], tokenizer,
                                                pretraining.InstanceOptions(dupe_factor=3))
  assert (summary.documents, summary.one_sentence_documents, summary.one_document_corpora,
          summary.instances, summary.random_next) == (1, 1, 1, 3, 3)
  n_tokens = 2 * len(tokenizer.tokenize("The only document, and its only sentence.")) + 3
  assert summary.tokens == 3 * n_tokens
  assert summary.masked == summary.instances * round(n_tokens * 0.15)
  assert 0.1 < summary.masked_fraction < 0.2


# --- the script ----------------------------------------------------------------------------------

def _script(*args):
  return subprocess.run(
      [sys.executable, os.path.join(ROOT, "data_prep", "create_pretraining_data.py"), *args],
      capture_output=True, text=True, cwd=ROOT, timeout=600,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_script_writes_the_originals_records_and_a_summary(uncased_vocab, tmp_path):
  outputs = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  result = _script(f"--input_file={SOTU}", f"--output_file={','.join(outputs)}",
                   f"--vocab_file={uncased_vocab}", "--dupe_factor=1", "--max_seq_length=64",
                   "--max_predictions_per_seq=10", "--random_seed=4")
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.search(r"wrote \d+ instances to 2 files: \d+ tokens, \d+ masked \(1\d\.\d\d%\)",
                   result.stderr)
  assert re.search(r"time [\d.]+ s \(\d+ instances/s\), peak memory \d+ MB", result.stderr)
  assert "--do_lower_case" not in result.stderr  # the uncased vocab, lower-cased
  expected = _google_records(tmp_path, [SOTU], str(uncased_vocab), True, 64, 10, 1, 0.15, 0.1,
                             4, 2)
  _assert_same_records(expected, outputs)


def test_script_warns_of_a_vocab_of_the_other_casing(uncased_vocab, tmp_path):
  """--do_lower_case=False with bert-base-uncased's vocab (no capital letters): every
  capitalised word of the corpus becomes other pieces or [UNK] in every record; the training
  scripts warn of it, and so does the data generation (helper-50: it said nothing)."""
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("The President spoke in Washington.\nCongress listened to him.\n\n"
                    "A second document begins here.\nIt ends there.\n")
  result = _script(f"--input_file={corpus}", f"--output_file={tmp_path / 'a.tfrecord'}",
                   f"--vocab_file={uncased_vocab}", "--do_lower_case=False",
                   "--dupe_factor=1", "--max_seq_length=32", "--max_predictions_per_seq=5")
  assert result.returncode == 0, result.stderr[-3000:]
  warnings = [line for line in result.stderr.splitlines() if "--do_lower_case=False" in line]
  assert len(warnings) == 1 and "no capital letters" in warnings[0], result.stderr[-3000:]
  assert str(uncased_vocab) in warnings[0]


def test_script_preserve_unused_tokens_writes_the_originals_records(uncased_vocab, tmp_path):
  """--preserve_unused_tokens (the original's tokenization flag): a corpus that marks lines with
  "[unused1] ... [unused2]," gives the original's records under its flag: [unused1] kept as its
  single id (2 in bert-base-uncased), "[unused2]," (punctuation attached) split as usual."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  corpus = tmp_path / "marked.txt"
  words = (FIXTURES / "pretraining" / "sotu_sample.txt").read_text().split("\n")[:200]
  corpus.write_text("\n".join(f"[unused1] {line} [unused2]," if i % 3 == 0 else line
                               for i, line in enumerate(words)))
  outputs = [str(tmp_path / "a.tfrecord")]
  result = _script(f"--input_file={corpus}", f"--output_file={outputs[0]}",
                   f"--vocab_file={uncased_vocab}", "--dupe_factor=1", "--max_seq_length=64",
                   "--max_predictions_per_seq=10", "--random_seed=4",
                   "--preserve_unused_tokens=True")
  assert result.returncode == 0, result.stderr[-3000:]
  google("tokenization")  # defines the original's flag
  flags.FLAGS.preserve_unused_tokens = True
  try:
    expected = _google_records(tmp_path, [str(corpus)], str(uncased_vocab), True, 64, 10, 1,
                               0.15, 0.1, 4, 1)
  finally:
    flags.FLAGS.preserve_unused_tokens = False
  _assert_same_records(expected, outputs)
  ids = [i for record in _read(outputs[0]) for i in
         tf.train.Example.FromString(record).features.feature["input_ids"].int64_list.value]
  assert ids.count(2) > 10 and ids.count(3) == 0


@pytest.mark.parametrize("args,message", [
    (["--input_file={tmp}/none.txt"], r"--input_file: no file matches '.*none.txt'"),
    (["--vocab_file={tmp}/none.txt"], r"vocab file not found: '.*none.txt'"),
    (["--max_predictions_per_seq=0"], r"--max_predictions_per_seq=0: must be at least 1"),
])
def test_script_errors_are_one_line(args, message, uncased_vocab, tmp_path):
  base = {"--input_file": SOTU, "--output_file": str(tmp_path / "o.tfrecord"),
          "--vocab_file": str(uncased_vocab)}
  for arg in args:
    name, value = arg.split("=", 1)
    base[name] = value.format(tmp=tmp_path)
  result = _script(*(f"{k}={v}" for k, v in base.items()))
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert re.fullmatch(r"create_pretraining_data.py: error: " + message, lines[-1]), lines
  assert not os.listdir(tmp_path)
