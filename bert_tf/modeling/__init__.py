"""BERT layers, encoder, heads, task models and checkpoint I/O (Google and Hugging Face)."""

from bert_tf.modeling.bert import BertModel, unpack_inputs  # noqa: F401
from bert_tf.modeling.config import BertConfig  # noqa: F401
from bert_tf.modeling.heads import LinearHead, MaskedLMHead, gather_positions  # noqa: F401
from bert_tf.modeling.layers import (BertEmbeddings, BertSelfAttention,  # noqa: F401
                                     TransformerBlock)
from bert_tf.modeling.models import (BertClassifier, BertPretrainer,  # noqa: F401
                                     BertSpanLabeler, BertTokenClassifier,
                                     masked_lm_loss, next_sentence_loss,
                                     pretraining_loss)
