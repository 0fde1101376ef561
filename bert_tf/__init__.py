"""bert_tf: Google's BERT in TensorFlow 2 / Keras 3.

The layout follows the data's way: ``tokenization`` -> ``data`` -> ``modeling`` ->
``training`` -> ``export``. Submodules are imported lazily so that ``import bert_tf``
stays cheap for tools that only need the tokenizer.
"""

__version__ = "0.1.0"

from bert_tf.errors import BertTfError  # noqa: F401
