"""bert_tf: Google's BERT in TensorFlow 2 / Keras 3.

The layout follows the data's way: ``tokenization`` -> ``data`` -> ``modeling`` ->
``training`` -> ``export``. Submodules are imported lazily so that ``import bert_tf``
stays cheap for tools that only need the tokenizer.
"""

__version__ = "0.1.0"

from bert_tf.errors import BertTfError  # noqa: F401
from bert_tf import quiet as _quiet

# TensorFlow's start-up lines (C++ logging to descriptor 2, red under a notebook's cell) stay
# off whichever bert_tf module a notebook imports first (bert_tf.quiet.setup_library).
_quiet.setup_library()


def __getattr__(name):
  # ``bert_tf.load``, ``bert_tf.export_hugging_face`` and ``bert_tf.export_google`` without
  # importing TensorFlow at ``import bert_tf``.
  if name == "load":
    from bert_tf.inference import load  # pylint: disable=import-outside-toplevel
    return load
  if name == "export_hugging_face":
    from bert_tf.export import hugging_face  # pylint: disable=import-outside-toplevel
    return hugging_face.export_hugging_face
  if name == "export_google":
    from bert_tf.export import google  # pylint: disable=import-outside-toplevel
    return google.export_google
  raise AttributeError(f"module 'bert_tf' has no attribute {name!r}")
