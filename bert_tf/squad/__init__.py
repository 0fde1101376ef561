"""SQuAD v1.1 / v2.0: data, features, prediction post-processing and the official evaluation.

The way the data goes (each step the original run_squad.py's, see the modules):

  examples.read_squad_examples(json)         -> SquadExample per question
  features.convert_examples_to_features(...)  -> InputFeatures per doc span (+ FeatureWriter,
                                                 input_dataset for TFRecords / tf.data)
  (model: start_logits, end_logits per feature)
  postprocess.write_predictions(...)          -> predictions.json, nbest_predictions.json,
                                                 null_odds.json (v2)
  evaluate.evaluate_files(...)                -> EM / F1 (v2: HasAns, NoAns, best thresholds)
"""

from bert_tf.squad.evaluate import evaluate_files, evaluate_v1, evaluate_v2, write_scores
from bert_tf.squad.examples import (SkippedAnswer, SquadExample, SquadReadResult,
                                    example_from_text, read_squad_examples,
                                    squad_examples_from_json)
from bert_tf.squad.features import (FIRST_UNIQUE_ID, PADDING_UNIQUE_ID, FeatureWriter,
                                    InputFeatures, convert_examples_to_features,
                                    input_dataset, name_to_features)
from bert_tf.squad.postprocess import (RawResult, SquadPredictions, answer_from_logits,
                                       compute_predictions, write_predictions)
