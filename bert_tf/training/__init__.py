"""Training: the optimizer lives in ``bert_tf.optimization``; here the distribution resolver
(``distribution``), the shared script flags (``flags``) and the training loop.

Submodules are imported explicitly (``from bert_tf.training import distribution``).
"""

# --dtype -> Keras dtype policy (variables stay float32 under the mixed policies).
DTYPE_POLICIES = {
    "float32": "float32",
    "bfloat16": "mixed_bfloat16",
    "float16": "mixed_float16",
}
