"""Texts run one by one (as the tutorials do) trace each compiled function once: no retracing
(and no TensorFlow retracing warning), whatever the lengths, batch sizes, layers and flags."""

import numpy as np

import bert_tf

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
