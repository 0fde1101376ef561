"""SavedModel export: a fine-tuned classifier taking raw text, a TF Hub-style encoder and
preprocessor. See ``bert_tf.export.saved_models``."""

from bert_tf.export.saved_models import (ClassifierModule, EncoderModule,  # noqa: F401
                                         PreprocessorModule, check_export_dir, export_all,
                                         export_classifier, export_encoder, export_preprocessor,
                                         is_previous_export, write_atomically)
