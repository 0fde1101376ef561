"""SQuAD v1.1 / v2.0 JSON -> ``SquadExample``s, as the original ``read_squad_examples``.

A paragraph's context is split into ``doc_tokens`` on whitespace (space, \\t, \\r, \\n and
U+202F only, as the original: other Unicode spaces such as U+00A0 stay inside a word; the
WordPiece tokenizer splits there later). ``char_to_word_offset[c]`` is the index of the word
holding character ``c`` (for whitespace, the word before it; -1 before the first word).

Training answers are character offsets (``answer_start``) into the context. They are moved
onto whole words; an answer whose text cannot be found again in those words (a wrong offset,
odd Unicode) is skipped with a warning, as the original does, and counted in
``SquadReadResult.skipped``. An ``answer_start`` outside the context (the original crashes
with an IndexError) is skipped the same way.

Differences from the original, all for bad input only: structural problems (no ``data``, a
paragraph without ``context``, a non-string question, invalid JSON, a training question with
other than one answer) raise a one-line ``BertTfError`` naming the file and the JSON path
(``data[0].paragraphs[3].qas[1]``) instead of a KeyError/ValueError; and the version flag is
an argument (``version_2_with_negative``), not an absl flag.
"""

import dataclasses
import json
from typing import NamedTuple, Optional

from absl import logging

from bert_tf import fileio
from bert_tf.errors import BertTfError


@dataclasses.dataclass
class SquadExample:
  """One question about one paragraph.

  Attributes:
    qas_id: the question's ``id`` (str), the key of predictions.json.
    question_text: the question (str).
    doc_tokens: the context split on whitespace (list of str, "words").
    orig_answer_text: training only: the answer text as annotated ("" if impossible).
    start_position: training only: index into ``doc_tokens`` of the answer's first word
      (-1 if impossible).
    end_position: training only: index into ``doc_tokens`` of its last word (-1 if impossible).
    is_impossible: training with version_2_with_negative only: the question has no answer.
  """
  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: Optional[str] = None
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False


class SkippedAnswer(NamedTuple):
  """A training question left out because its answer could not be placed in the context."""
  qas_id: str
  reason: str


class SquadReadResult(NamedTuple):
  """What ``read_squad_examples`` returns: ``examples, skipped = read_squad_examples(...)``."""
  examples: list  # [SquadExample]
  skipped: list  # [SkippedAnswer], training only


def _is_whitespace(c):
  # The original's own test (not str.isspace): U+00A0 and the other Zs stay inside words.
  return c in " \t\r\n" or ord(c) == 0x202F


def split_on_whitespace(paragraph_text):
  """Splits a context into words.

  Returns:
    (doc_tokens, char_to_word_offset): the words (list of str) and, for every character of
    ``paragraph_text``, the index of the word it belongs to (list of int, same length as the
    text; whitespace maps to the word before it, -1 before the first word).
  """
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if _is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def example_from_text(question_text, context, qas_id="0"):
  """A prediction-time ``SquadExample`` for one (question, context) pair of strings."""
  doc_tokens, _ = split_on_whitespace(context)
  return SquadExample(qas_id=qas_id, question_text=question_text, doc_tokens=doc_tokens)


def load_squad_json(input_file):
  """Reads a SQuAD JSON file (``tf.io.gfile``, so gs:// works) and returns the parsed object.

  Raises:
    BertTfError: the file is missing or is not valid JSON.
  """
  fileio.require_file(input_file, "SQuAD file")
  text = fileio.read_utf8(input_file, strip_bom=False)  # A BOM: json's one-line error.
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise BertTfError(f"{input_file}: not valid JSON: {e.msg} at line {e.lineno}, "
                      f"column {e.colno}") from None


def json_field(obj, key, kind, where, source):
  """``obj[key]``, checked to be a ``kind``; a one-line BertTfError naming the JSON path if not."""
  if not isinstance(obj, dict):
    raise BertTfError(f"{source}: {where} is a {type(obj).__name__}, expected an object")
  if key not in obj:
    raise BertTfError(f"{source}: {where} has no '{key}'")
  value = obj[key]
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
    raise BertTfError(f"{source}: {where}.{key} is a {type(value).__name__}, expected {names}")
  return value


def squad_examples_from_json(squad_json, is_training, version_2_with_negative=False,
                             source="<json>"):
  """Parsed SQuAD JSON (a dict with ``data``) -> ``SquadReadResult``.

  Args:
    squad_json: the parsed file: {"data": [{"paragraphs": [{"context", "qas": [...]}]}]}.
    is_training: read answers (and, for v2, ``is_impossible``) into the examples.
    version_2_with_negative: SQuAD 2.0: a training question may be ``is_impossible``
      (missing ``is_impossible`` reads as false, so a v1.1 file also works).
    source: the file name, for error messages.
  """
  data = json_field(squad_json, "data", list, "the top level", source)
  examples = []
  skipped = []
  seen = {}  # str(id) -> where: predictions.json has one answer per id
  for i, entry in enumerate(data):
    paragraphs = json_field(entry, "paragraphs", list, f"data[{i}]", source)
    for j, paragraph in enumerate(paragraphs):
      where_p = f"data[{i}].paragraphs[{j}]"
      paragraph_text = json_field(paragraph, "context", str, where_p, source)
      qas = json_field(paragraph, "qas", list, where_p, source)
      doc_tokens, char_to_word_offset = split_on_whitespace(paragraph_text)
      for k, qa in enumerate(qas):
        where = f"{where_p}.qas[{k}]"
        qas_id = json_field(qa, "id", (str, int), where, source)
        if not is_training:
          if str(qas_id) in seen:
            raise BertTfError(f"{source}: {where} has id {qas_id!r}, as {seen[str(qas_id)]} "
                              "has: question ids must be unique (predictions.json keeps one "
                              "answer per id)")
          seen[str(qas_id)] = where
        question_text = json_field(qa, "question", str, where, source)
        example = SquadExample(qas_id=qas_id, question_text=question_text,
                               doc_tokens=doc_tokens)
        if is_training:
          reason = _add_training_answer(example, qa, paragraph_text, char_to_word_offset,
                                        version_2_with_negative, where, source)
          if reason is not None:
            logging.warning("Could not find answer for question %r: %s", qas_id, reason)
            skipped.append(SkippedAnswer(qas_id, reason))
            continue
        examples.append(example)
  if skipped:
    logging.warning("%s: skipped %d of %d training questions whose answer is not in the "
                    "context at its answer_start", source, len(skipped),
                    len(skipped) + len(examples))
  return SquadReadResult(examples, skipped)


def _add_training_answer(example, qa, paragraph_text, char_to_word_offset,
                         version_2_with_negative, where, source):
  """Fills the answer fields of ``example``; returns why it must be skipped, or None."""
  if version_2_with_negative:
    # true or false: a string "false" was read as true (an answerable question trained as
    # unanswerable), as in the original.
    example.is_impossible = ("is_impossible" in qa and
                             json_field(qa, "is_impossible", bool, where, source))
  if example.is_impossible:
    example.start_position = -1
    example.end_position = -1
    example.orig_answer_text = ""
    return None
  answers = json_field(qa, "answers", list, where, source)
  if len(answers) != 1:
    # A SQuAD 2.0 file: its unanswerable questions have none (is_impossible true).
    hint = ("; a SQuAD 2.0 file? pass --version_2_with_negative"
            if not answers and qa.get("is_impossible") is True else "")
    raise BertTfError(f"{source}: {where} (id {example.qas_id!r}) has {len(answers)} answers; "
                      f"for training each question must have exactly 1 answer{hint}")
  answer = answers[0]
  orig_answer_text = json_field(answer, "text", str, f"{where}.answers[0]", source)
  answer_offset = json_field(answer, "answer_start", int, f"{where}.answers[0]", source)
  answer_end = answer_offset + len(orig_answer_text) - 1
  if not 0 <= answer_offset < len(paragraph_text) or answer_end >= len(paragraph_text):
    return (f"answer_start {answer_offset} + {len(orig_answer_text)} characters is outside "
            f"the context ({len(paragraph_text)} characters)")
  start_position = char_to_word_offset[answer_offset]
  end_position = char_to_word_offset[answer_end]
  # Keep only answers whose text can be recovered from the words: a wrong offset or odd
  # Unicode makes this fail, and the question is then left out of training.
  actual_text = " ".join(example.doc_tokens[start_position:end_position + 1])
  cleaned_answer_text = " ".join(orig_answer_text.split())
  if actual_text.find(cleaned_answer_text) == -1:
    return f"'{actual_text}' vs. '{cleaned_answer_text}'"
  example.orig_answer_text = orig_answer_text
  example.start_position = start_position
  example.end_position = end_position
  return None


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
  """Reads a SQuAD v1.1 / v2.0 JSON file into ``SquadExample``s.

  Args:
    input_file: path (local or gs://) of e.g. train-v1.1.json, dev-v2.0.json.
    is_training: read the answers (each question must have exactly one, or be impossible).
    version_2_with_negative: SQuAD 2.0 (questions may be ``is_impossible``).

  Returns:
    ``SquadReadResult(examples, skipped)``: the examples in file order, and the training
    questions left out because their answer text is not at ``answer_start`` (each also logged
    as a warning, as the original's "Could not find answer").

  Raises:
    BertTfError: missing file, invalid JSON, or a file that is not SQuAD-shaped (the message
    names the file and the JSON path).
  """
  return squad_examples_from_json(load_squad_json(input_file), is_training,
                                  version_2_with_negative, source=input_file)
