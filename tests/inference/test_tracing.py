"""Texts run one by one (as the tutorials do) trace each compiled function once: no retracing
(and no TensorFlow retracing warning), whatever the lengths, batch sizes, layers and flags."""

import os
import subprocess
import sys

import numpy as np
import pytest

import bert_tf
from tests._autograph_builtins import method_bindings_taken_for_builtins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["the cat sat.", "the cat sat on the mat.", "he bought milk at the store.",
         "a man walks in paris and he is late."]


def test_sentence_by_sentence_traces_each_function_once(tiny_google):
  folder, _ = tiny_google
  bert = bert_tf.load(str(folder))  # a fresh model: its own trace counts
  for n, text in enumerate(TEXTS):
    bert(text, output_hidden_states=n % 2 == 0, output_attentions=n % 2 == 1)
    bert.embed([text] * (n + 1), pooling="last2_mean" if n % 2 else "mean")
    bert.fill_mask(text.replace(" ", " [MASK] ", n % 2 + 1))
    bert.next_sentence(text, TEXTS[0])
  counts = [f.experimental_get_tracing_count() for f in (
      bert._encoder_alone, bert._encoder_with_attentions, bert._masked_lm_fn,
      bert._next_sentence_fn)]
  assert counts == [1, 1, 1, 1]
  # One by one gives what one batch gives.
  together = bert.embed(TEXTS, pooling="mean")
  alone = np.concatenate([bert.embed([t], pooling="mean") for t in TEXTS])
  np.testing.assert_allclose(alone, together, atol=1e-5)


_LOADS = """
import sys
import tensorflow as tf
import bert_tf
for n in range(7):  # a seventh model: TensorFlow warns from the fifth trace of one code
  bert = bert_tf.load(sys.argv[1])
  bert("the cat sat.", output_attentions=True)
  bert.embed(["the cat sat."])
  bert.fill_mask("the [MASK] sat.")
  bert.next_sentence("the cat sat.", "the cat sat.")
for n in range(7):  # the user's own function created in a loop: still warned
  user_function = tf.function(lambda x: x + 1)
  user_function(tf.constant(n))
"""


def test_models_loaded_one_after_another_do_not_warn_of_retracing(tiny_google):
  """Each loaded model compiles its own functions (its weights) and traces each once;
  TensorFlow counts traces by the code and, from the fifth model in a process, warned that
  tf.functions were created in a loop. That warning stays for the user's own functions."""
  folder, _ = tiny_google
  result = subprocess.run([sys.executable, "-c", _LOADS, str(folder)], capture_output=True,
                          text=True, timeout=600, check=False, cwd=ROOT)  # this tree's bert_tf
  assert result.returncode == 0, result.stderr[-3000:]
  warned = [line for line in result.stderr.splitlines()
            if "triggered tf.function retracing" in line]
  assert warned and all("<lambda>" in line for line in warned), warned


def test_a_kernel_that_takes_a_method_binding_for_a_builtin_changes_nothing(tiny_google):
  """See tests/_autograph_builtins.py: the compiled functions are closures, so a binding
  taken for a builtin (a Jupyter kernel's stale id) cannot call them with the wrong self."""
  folder, _ = tiny_google
  text = ("the cat sat.", "the cat sat on the mat.")
  expected = bert_tf.load(str(folder))
  with method_bindings_taken_for_builtins():
    bert = bert_tf.load(str(folder))  # a fresh model: traced under the patch
    got = bert([text], output_attentions=True, output_hidden_states=True)
    masked = bert.fill_mask("the [MASK] sat.")
    is_next = bert.next_sentence(*text)
  want = expected([text], output_attentions=True, output_hidden_states=True)
  np.testing.assert_array_equal(np.stack(got.attentions), np.stack(want.attentions))
  np.testing.assert_array_equal(np.stack(got.hidden_states), np.stack(want.hidden_states))
  assert masked == expected.fill_mask("the [MASK] sat.")
  assert is_next == expected.next_sentence(*text)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Keras's own, when copied
def test_a_copy_runs_its_own_weights(tiny_google):
  """copy.deepcopy and pickle give a model of its own: the compiled functions (closures over
  the encoder) are made again for the copy, not shared with the original's weights."""
  import copy  # pylint: disable=import-outside-toplevel
  import pickle  # pylint: disable=import-outside-toplevel
  folder, _ = tiny_google
  bert = bert_tf.load(str(folder))
  before = bert.embed(TEXTS)
  for twin in (copy.deepcopy(bert), pickle.loads(pickle.dumps(bert))):
    np.testing.assert_array_equal(twin.embed(TEXTS), before)
    for variable in twin.encoder.weights:
      variable.assign(variable * 0.5)
    assert np.abs(twin.embed(TEXTS) - before).max() > 1e-3
    np.testing.assert_array_equal(bert.embed(TEXTS), before)
