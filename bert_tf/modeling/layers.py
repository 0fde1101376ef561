"""Keras 3 layers that mirror Google's ``modeling.py``.

Shape legend:
  B = batch size            S = sequence length (F = "from", T = "to" side of attention)
  H = hidden size           N = attention heads        D = head size (H / N)
  I = intermediate size     V = vocab size             P = masked positions per sequence

Numerics follow the original exactly (REFERENCE.md): LayerNorm eps 1e-12, attention scores
scaled by 1/sqrt(D) then ``(1 - mask) * -10000.0`` added on the "to" side, dropout on the
attention probabilities, post-LN residual blocks, truncated-normal(``initializer_range``)
kernels and embeddings, zero biases. Under mixed precision (``mixed_bfloat16`` /
``mixed_float16``) matmuls run in the compute dtype while LayerNorm, the softmax and all
losses and logits that feed them run in float32. Between the layers the residual stream
(each LayerNorm's output) is kept in the compute dtype: each residual add and LayerNorm reads
its 16-bit inputs and computes in float32, then rounds its output once; ``BertModel`` returns
its outputs in float32.

Every layer builds its weights in ``__init__`` from the config, so a model has all its
variables as soon as it is constructed (what checkpoint loading and Keras saving need), and
every layer has ``get_config`` for Keras save/load.
"""

import contextlib
import math
import weakref

import keras
import tensorflow as tf

from bert_tf.modeling import fused_attention
from bert_tf.modeling.activations import get_activation, recomputed_under_xla
from bert_tf.modeling.placement import cublaslt_enabled, gpu_visible, in_xla_computation
from bert_tf.modeling.config import BertConfig

_PACKAGE = "bert_tf"


@contextlib.contextmanager
def scoped(*names):
  """Nested Keras name scopes, so variable paths read like Google's checkpoint names."""
  with contextlib.ExitStack() as stack:
    for name in names:
      stack.enter_context(keras.name_scope(name))
    yield


def truncated_normal(config, stddev=None):
  """The original's initializer: a truncated normal of ``stddev``, default the config's
  ``initializer_range``."""
  return keras.initializers.TruncatedNormal(
      stddev=config.initializer_range if stddev is None else stddev)


def as_config(config):
  """Accepts a ``BertConfig`` or its dict (what ``get_config`` stores)."""
  if isinstance(config, BertConfig):
    return config
  return BertConfig.from_dict(config)


def layer_norm(config, name="LayerNorm"):
  """LayerNorm as in the original: eps 1e-12, last axis, always computed in float32."""
  return keras.layers.LayerNormalization(axis=-1, epsilon=config.layer_norm_eps, name=name,
                                         dtype="float32")


# Whether the encoder's LayerNorms take their statistics in one pass where that applies
# (TransformerBlock._add_and_norm); a switch for tests.
LAYER_NORM_ONE_PASS = True


def layer_norm_one_pass(norm, x):
  """``norm(x)`` (``layer_norm``'s float32 LayerNormalization over the last axis) with the
  mean and the mean of squares taken in one pass over ``x``: variance = E[x²] - E[x]²
  (floored at 0), not E[(x - E[x])²], which XLA's GPU compiler runs as a pass of its own over
  the float32 sum, one per LayerNorm (BENCHMARKS.md, "The LayerNorm's statistics in one
  pass"). The same function; float32 rounding differs (the subtraction loses digits only
  where the mean is thousands of standard deviations), which a 16-bit output does not keep.
  """
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  mean_of_squares = tf.reduce_mean(tf.square(x), axis=-1, keepdims=True)
  variance = tf.maximum(mean_of_squares - tf.square(mean), 0.0)
  scale = tf.math.rsqrt(variance + norm.epsilon) * tf.cast(norm.gamma, x.dtype)
  return (x - mean) * scale + tf.cast(norm.beta, x.dtype)


# Per graph being traced: {(width, dtype): a vector of ones behind an optimization barrier}.
_SHARED_UNITS = weakref.WeakKeyDictionary()


def shared_unit_operand(weight):
  """``weight`` (a 16-bit cast of a variable: mixed precision); under XLA with a GPU visible,
  ``weight`` times a vector of ones shared by every weight of its last dimension in the
  computation.

  Times 1.0: the same numbers, bit for bit, forward and backward. The ones sit behind an
  optimization barrier, so XLA cannot fold them away, and they give the casts of same-shape
  weights (the query, key, value and output kernels of all layers, ...) an operand in common
  that is not a scalar: XLA's GPU compiler then fuses those sibling casts into a few
  multi-output kernels instead of one launch per weight (BENCHMARKS.md, "The weights'
  casts"). Elsewhere (no XLA, no GPU) this is ``weight``.
  """
  if (weight.dtype not in (tf.bfloat16, tf.float16)
      or not (gpu_visible() and in_xla_computation())):
    return weight  # a float32 weight has no cast to fuse: the product would be a kernel more
  # pylint: disable=import-outside-toplevel
  from tensorflow.compiler.tf2xla.python import xla
  from tensorflow.python.framework import ops
  units = _SHARED_UNITS.setdefault(ops.get_default_graph(), {})
  key = (weight.shape[-1], weight.dtype)
  if key not in units:
    with tf.name_scope("shared_unit"):
      (units[key],) = xla.optimization_barrier(tf.ones([weight.shape[-1]], weight.dtype))
  return weight * units[key]


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Dense(keras.layers.Dense):
  """``keras.layers.Dense`` (same weights ``kernel`` [in, units] and ``bias``, same numbers)
  computed as one 2-D matmul on ``[-1, in]`` (for a 2-D input too: one code path, the same
  bits whichever rank the caller hands it).

  Keras's Dense hands a ``[B,S,H]`` input to ``tf.matmul`` as a broadcast batch matmul: B
  small products, which TensorFlow's CPU kernels run far slower than one ``[B*S,H]`` product
  (the gradient of the broadcast kernel is a further reduction over B).
  """

  # Whether the activation's gradient recomputes it under XLA rather than keeping its
  # intermediates (activations.recomputed_under_xla; set on the encoder's intermediate layer).
  recompute_activation = False

  def call(self, inputs, training=None):
    if self.lora_enabled or self.quantization_mode:
      return super().call(inputs, training=training)
    units = self.kernel.shape[-1]
    flat = tf.reshape(inputs, [-1, inputs.shape[-1]])                 # [B*S, in]
    # The variables as the layer's autocast reads them, then shared_unit_operand.
    y = tf.matmul(flat, shared_unit_operand(tf.convert_to_tensor(self.kernel)))  # [B*S, units]
    bias = (shared_unit_operand(tf.convert_to_tensor(self.bias)) if self.bias is not None
            else None)
    if self.activation is not None and self.recompute_activation:
      if bias is not None and cublaslt_enabled():
        # Kept for the backward pass: x W + b, the input of the activation, which a cuBLASLt
        # GEMM can write beside the activation from its epilogue (BIAS_GELU_AUX): no kernel
        # of its own for the bias and the GELU (BENCHMARKS.md, "The Python trace of the
        # update, and the GELU in a GEMM epilogue").
        y = recomputed_under_xla(self.activation, tf.nn.bias_add(y, bias))
      else:
        y = recomputed_under_xla(self.activation, y, bias)  # the bias add recomputed too
    else:
      if bias is not None:
        y = tf.nn.bias_add(y, bias)
      if self.activation is not None:
        y = self.activation(y)
    return tf.reshape(y, tf.concat([tf.shape(inputs)[:-1], [units]], axis=0))


DROPOUT_RNGS = ("philox", "hash")

# MurmurHash3's 32-bit finalizer (fmix32) and the 32-bit golden ratio, for the "hash" masks.
_FMIX_1, _FMIX_2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9


def _fmix32(x):
  """MurmurHash3's fmix32 on a uint32 tensor (wrapping arithmetic)."""
  shift = lambda x, n: tf.bitwise.right_shift(x, tf.constant(n, tf.uint32))  # noqa: E731
  x = tf.bitwise.bitwise_xor(x, shift(x, 16))
  x = x * tf.constant(_FMIX_1, tf.uint32)
  x = tf.bitwise.bitwise_xor(x, shift(x, 13))
  x = x * tf.constant(_FMIX_2, tf.uint32)
  return tf.bitwise.bitwise_xor(x, shift(x, 16))


def hash_bits(shape, seed):
  """32 random bits per element of ``shape``: fmix32(fmix32(i * golden + seed[0]) ^ seed[1])
  of each flat index i (a counter-based generator keyed by an int32 ``seed`` of 2)."""
  seed = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
  index = tf.bitcast(tf.range(tf.reduce_prod(shape), dtype=tf.int32), tf.uint32)
  bits = _fmix32(index * tf.constant(_GOLDEN, tf.uint32) + seed[0])
  bits = _fmix32(tf.bitwise.bitwise_xor(bits, seed[1]))
  return tf.reshape(bits, shape)


def hash_dropout(x, rate, seed, noise_shape=None):
  """Dropout as ``tf.nn.experimental.stateless_dropout`` (keep with probability 1 - rate,
  scale kept values by 1 / (1 - rate)) with the mask from ``hash_bits``: an element is dropped
  when its 32 bits are below round(rate * 2**32)."""
  shape = tf.shape(x) if noise_shape is None else noise_shape
  return x * tf.cast(1.0 / (1.0 - rate), x.dtype) * tf.cast(hash_keep(shape, rate, seed),
                                                            x.dtype)


def hash_keep(shape, rate, seed):
  """``hash_dropout``'s mask (bool, True = kept): the bits of ``hash_bits`` >= round(rate *
  2**32)."""
  threshold = min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1)
  return hash_bits(shape, seed) >= tf.constant(threshold, tf.uint32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Dropout(keras.layers.Dropout):
  """``keras.layers.Dropout`` (same rule, same ``seed_generator`` state) with a chosen
  generator for its masks, ``rng``:

  - ``"philox"`` (default): TensorFlow's Philox. Keras leaves the algorithm to TensorFlow,
    which under XLA picks ThreeFry on CPU: on a ``[32,4,128,128]`` tensor 578 ms against 22 ms
    for Philox (2 CPU cores), a quarter of a training step of the small config.
  - ``"hash"``: ``hash_dropout``, a keyed integer hash of each element's index. XLA fuses it
    into a few integer operations per element, 6-7x faster than Philox under XLA on CPU (and
    slower than TensorFlow's own Philox kernel without XLA). The training loop picks it for
    ``jit_compile`` (``set_dropout_rng``).

  Either way each element is kept with probability 1 - rate, independently of the others,
  and the masks differ from the original's (TF1's generator) as they always do.
  """

  def __init__(self, rate, noise_shape=None, seed=None, rng="philox", **kwargs):
    super().__init__(rate, noise_shape=noise_shape, seed=seed, **kwargs)
    if rng not in DROPOUT_RNGS:
      raise ValueError(f"rng must be one of {DROPOUT_RNGS}, got {rng!r}")
    self.rng = rng

  def call(self, inputs, training=False):
    if not training or self.rate <= 0:
      return inputs
    if self.rate >= 1.0:
      return tf.zeros_like(inputs)
    seed = self.next_seed()
    noise_shape = None
    if self.noise_shape is not None:
      noise_shape = [tf.shape(inputs)[i] if d is None else d
                     for i, d in enumerate(self.noise_shape)]
    if self.rng == "hash":
      return hash_dropout(inputs, self.rate, seed, noise_shape)
    return tf.nn.experimental.stateless_dropout(inputs, rate=self.rate, seed=seed,
                                                noise_shape=noise_shape, rng_alg="philox")

  def next_seed(self):
    """The int32 seed [2] of the next mask (advances ``seed_generator`` as ``call`` does),
    this replica's (``replica_seed``)."""
    seed = self.seed_generator.next()
    # Keras's cast of the int64 generator state to the int32 seed stateless ops take.
    return replica_seed(tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32))

  def get_config(self):
    return {**super().get_config(), "rng": self.rng}


def replica_seed(seed):
  """``seed`` (int32 [2]) for the replica this runs on, under a ``tf.distribute`` strategy of
  several replicas: replica k's first element xor fmix32(k * golden ratio), so that every
  replica draws its own masks. (The seed generator's state is one mirrored variable, the same
  on every replica: Keras's dropout gives replica k's i-th example the mask of every other
  replica's i-th example, where one device draws each example's mask independently.) Replica 0,
  and every run on one replica, keeps ``seed`` as it is (fmix32(0) = 0)."""
  context = tf.distribute.get_replica_context()
  if context is None or context.num_replicas_in_sync == 1:
    return seed
  replica = tf.bitcast(tf.cast(context.replica_id_in_sync_group, tf.int32), tf.uint32)
  mix = tf.bitcast(_fmix32(replica * tf.constant(_GOLDEN, tf.uint32)), tf.int32)
  return tf.stack([tf.bitwise.bitwise_xor(seed[0], mix), seed[1]])


def set_dropout_rng(model, rng):
  """Sets ``rng`` ("philox" or "hash") on every bert_tf ``Dropout`` in ``model``; call it
  before the model's training function is traced."""
  if rng not in DROPOUT_RNGS:
    raise ValueError(f"rng must be one of {DROPOUT_RNGS}, got {rng!r}")
  for layer in model._flatten_layers(include_self=True, recursive=True):  # pylint: disable=protected-access
    if isinstance(layer, Dropout):
      layer.rng = rng


def _dense(units, config, name, activation=None, dtype=None):
  return Dense(units, activation=activation, name=name,
               kernel_initializer=truncated_normal(config), dtype=dtype)


class _ConfigLayer(keras.layers.Layer):
  """A layer constructed from a ``BertConfig``; serializes the config as a dict.

  Inputs are not auto-cast to the compute dtype: the attention mask stays float32 under
  mixed precision, and each layer casts what it reads itself.
  """

  def __init__(self, config, **kwargs):
    kwargs.setdefault("autocast", False)
    super().__init__(**kwargs)
    self.config = as_config(config)

  def get_config(self):
    base = super().get_config()
    base["config"] = self.config.to_dict()
    return base


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertEmbeddings(_ConfigLayer):
  """word + token_type + position embeddings (sliced to S), then LayerNorm, then dropout.

  Call: ``(input_word_ids [B,S] int, input_type_ids [B,S] int)`` -> ``[B,S,H]`` in the
  compute dtype (LayerNorm computed in float32).
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    c = self.config
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(c.vocab_size, c.hidden_size),
        initializer=truncated_normal(c))
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(c.type_vocab_size, c.hidden_size),
        initializer=truncated_normal(c))
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(c.max_position_embeddings, c.hidden_size),
        initializer=truncated_normal(c))
    with scoped(self.name):
      self.layer_norm = layer_norm(c)
      self.layer_norm.build((None, None, c.hidden_size))
    self.dropout = Dropout(c.hidden_dropout_prob, dtype=self.dtype_policy)
    self.built = True

  def call(self, input_word_ids, input_type_ids, training=None):
    seq_length = input_word_ids.shape[1]
    if seq_length is None:
      seq_length = tf.shape(input_word_ids)[1]
    elif seq_length > self.config.max_position_embeddings:
      raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                       f"{self.config.max_position_embeddings}")
    dtype = self.compute_dtype
    words = tf.gather(tf.cast(self.word_embeddings, dtype), input_word_ids)  # [B,S,H]
    # The original uses a one-hot matmul for the small token-type table; a gather is the same.
    types = tf.gather(tf.cast(self.token_type_embeddings, dtype), input_type_ids)  # [B,S,H]
    # tf.slice, as the original: indexing the variable (``[:seq_length]``) would also trace a
    # sliced-assignment closure holding the variable, which TensorFlow keeps with the traced
    # graph after the model is gone (a finished training run's table stayed alive).
    positions = tf.cast(tf.slice(self.position_embeddings, [0, 0], [seq_length, -1]),
                        dtype)  # [S,H]
    output = words + types + positions[tf.newaxis]  # [B,S,H]
    # LayerNorm and dropout on the [B*S,H] matrix, as in TransformerBlock.
    flat = tf.reshape(output, [-1, self.config.hidden_size])  # [B*S,H]
    flat = tf.cast(self.layer_norm(flat), dtype)  # computed in float32, rounded once
    return tf.reshape(self.dropout(flat, training=training), tf.shape(output))


def softmax_to(logits, dtype):
  """Softmax over the last axis computed in float32 (max and sum), returned in ``dtype``.

  For a 16-bit ``dtype`` the gradient is computed from the rounded probabilities it returned
  (``p * (dp - sum(dp * p))`` in float32): the backward pass keeps the ``[B,N,S,S]``
  probabilities in 16 bits instead of a float32 copy. Float32 is ``tf.nn.softmax``.
  """
  logits = tf.cast(logits, tf.float32)
  if tf.as_dtype(dtype) == tf.float32:
    return tf.nn.softmax(logits, axis=-1)

  @tf.custom_gradient
  def fn(x):
    probs = tf.cast(tf.nn.softmax(x, axis=-1), dtype)

    def grad(d_probs):
      p = tf.cast(probs, tf.float32)
      d = tf.cast(d_probs, tf.float32)
      return p * (d - tf.reduce_sum(d * p, axis=-1, keepdims=True))

    return probs, grad

  return fn(logits)


def attention_probs(q, k, adder, scale, dtype):
  """The plain attention's probabilities, ``[B,N,F,T]`` in ``dtype``: the q·kᵀ product, scaled
  and masked in float32 (``adder``: 0 attended, -10000 on padding, the "to" side), then
  ``softmax_to``. Shared by ``BertSelfAttention``'s plain path and ``attention_recomputed``."""
  scores = tf.einsum("BNFD,BNTD->BNFT", q, k)  # [B,N,F,T]
  scores = tf.cast(scores, tf.float32) * scale
  scores += adder
  return softmax_to(scores, dtype)


def attention_recomputed(q, k, v, adder, scale, rate, seed):
  """The attention's core with attention dropout, ``dropout(softmax(q·kᵀ·scale + adder))·v``,
  whose backward pass recomputes it instead of keeping any ``[B,N,F,T]`` tensor.

  The plain path keeps, per layer, the scores (or the probabilities), the dropout mask and the
  dropped probabilities for the backward pass: on XLA's compile for an H100, 0.6 GB per
  layer of BERT-Large at phase 2's shape, half of the update's temporary memory. Here the
  backward pass runs the same forward ops again (the q·kᵀ product, the float32 softmax, the
  hash mask regenerated from ``seed``) and takes autodiff's gradient of them, so the numbers
  are the plain path's: the forward bit for bit, the gradients to float32 rounding (XLA fuses
  them differently). The recomputation sits behind an optimization barrier that also holds
  the incoming gradient, so XLA can neither merge it with the forward pass nor schedule it
  before the backward pass reaches the layer (either would keep the tensors alive again).
  Outside an XLA computation this is the plain composition.

  Args:
    q, k, v: [B,N,F,D], [B,N,T,D], [B,N,T,D] in the compute dtype.
    adder: [B,1,1,T] float32, 0 attended / -10000 padding (no gradient).
    scale: 1/sqrt(D), a Python float.
    rate: the attention dropout rate, 0 < rate < 1.
    seed: int32 [2], the dropout layer's ``next_seed()`` (no gradient).
  Returns:
    The context, [B,F,N,D] in the compute dtype.
  """
  def core(q, k, v, adder, seed):  # BertSelfAttention's plain path with hash dropout
    probs = attention_probs(q, k, adder, scale, v.dtype)
    return tf.einsum("BNFT,BNTD->BFND", hash_dropout(probs, rate, seed), v)

  if not in_xla_computation():
    return core(q, k, v, adder, seed)
  from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=import-outside-toplevel
  # The backward pass is traced outside this name scope; it re-enters it under
  # "gradient_tape/", as TensorFlow names gradients (bench/hlo_census.py counts by layer).
  scope = tf.get_current_name_scope()

  @tf.custom_gradient
  def fn(q, k, v, adder, seed):
    def grad(d_context):
      with tf.name_scope(f"gradient_tape/{scope}/" if scope else "gradient_tape/"):
        q2, k2, v2, adder2, seed2, d_context = xla.optimization_barrier(
            q, k, v, adder, seed, d_context)
        with tf.GradientTape() as tape:
          tape.watch([q2, k2, v2])
          context = core(q2, k2, v2, adder2, seed2)
        return (*tape.gradient(context, [q2, k2, v2], output_gradients=d_context), None, None)

    return core(q, k, v, adder, seed), grad

  return fn(q, k, v, adder, seed)


def fan_out_for_gemm_sums(x, n):
  """``n`` identities of ``x`` (one per use) whose gradients are summed as
  ``g[n-1] + (... + (g[1] + g[0]))``: the left fold ``((g[0] + g[1]) + g[2]) + ...`` with each
  add's operands swapped, the newest term first. TensorFlow's own gradient of ``x`` used ``n``
  times is a left fold too (an AddN), of the same terms in an order of its choosing: the sums
  differ only by the rounding of their adds in the compute dtype.

  Why: XLA's GPU compile folds an add of a GEMM's output into that GEMM (cuBLAS accumulating
  onto the other operand, beta = 1) when the add's first GEMM operand can take it. Where x
  feeds the residual and three products (q, k, v in the fused kernel's layout), the AddN's left
  fold hands the second add a GEMM that already took the first, and XLA writes that sum in a
  kernel of its own: one more pass over ``[B*S,H]`` per layer and update (BENCHMARKS.md, "The
  input gradient's sum in the GEMMs"). Newest first, each of the three GEMMs takes one add."""

  @tf.custom_gradient
  def fan_out(x):
    def grad(*upstream):
      total = None
      for g in upstream:
        if g is not None:
          total = g if total is None else g + total
      return tf.zeros_like(x) if total is None else total
    return [tf.identity(x) for _ in range(n)], grad

  return fan_out(x)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class BertSelfAttention(_ConfigLayer):
  """Multi-head self-attention: ``query``, ``key``, ``value`` dense layers ([H,H] kernels).

  Computed as one ``[B*S,H] x [H,3H]`` product over the three kernels side by side and one
  transpose to head-major ``[3,B,N,S,D]``; the attention products then have their batch
  dimensions (B,N) leading, which is what XLA's GEMMs need without further layout copies
  (``bench/hlo_census.py``). Each output column is the same dot product over H as the three
  separate layers', so the numbers are the original's.

  Call: ``(x [B,S,H], attention_adder [B,1,1,S] float32)`` ->
  ``(context [B,S,H], attention_probs [B,N,S,S] float32)``; with ``output_attentions=False``
  the attention may run as cuDNN's fused kernel (``config.attention_implementation``,
  ``fused_attention``), which forms no probabilities, or (``xla_recompute``, training with
  attention dropout) as ``attention_recomputed``: ``attention_probs`` is then None.
  """

  # The implementations whose fused kernel reads q, k, v as three [B,S,N,D] products of x.
  _SEPARATE_PROJECTIONS = ("cudnn_btnh", "auto")

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    c = self.config
    self.query = _dense(c.hidden_size, c, "query", dtype=self.dtype_policy)
    self.key = _dense(c.hidden_size, c, "key", dtype=self.dtype_policy)
    self.value = _dense(c.hidden_size, c, "value", dtype=self.dtype_policy)
    with scoped(self.name):
      for layer in (self.query, self.key, self.value):
        layer.build((None, None, c.hidden_size))
    # In the compute dtype: the probabilities stay 16-bit under mixed precision.
    self.dropout = Dropout(c.attention_probs_dropout_prob, dtype=self.dtype_policy)
    self.built = True

  def _fused(self, x, training, output_attentions):
    c = self.config
    return fused_attention.use_fused(
        c.attention_implementation, dtype=self.compute_dtype, head_size=c.head_size,
        shapes_static=x.shape[0] is not None and x.shape[1] is not None,
        dropout_rate=self.dropout.rate if training else 0.0, want_probs=output_attentions)

  def projects_separately(self, x, training=None, output_attentions=True):
    """Whether this call computes q, k and v as three products of ``x`` (the fused kernel in
    the hidden stream's layout, ``cudnn_btnh`` and what ``auto`` takes), which may then read
    three inputs of their own (``projection_inputs``)."""
    return (self._fused(x, training, output_attentions)
            and self.config.attention_implementation in self._SEPARATE_PROJECTIONS)

  def call(self, x, attention_adder, training=None, output_attentions=True,
           projection_inputs=None):
    c = self.config
    dtype = self.compute_dtype
    fused = self._fused(x, training, output_attentions)
    batch = tf.shape(x)[0]
    seq = x.shape[1] if x.shape[1] is not None else tf.shape(x)[1]
    if fused and c.attention_implementation in self._SEPARATE_PROJECTIONS:
      # q, k, v as three [B*S,H] products (the Dense layers'), each a [B,S,N,D] view the
      # kernel reads in place; its output is the same view of [B*S,H] (no layout copy on
      # either side). What auto takes: on an H100 it passed the fused-kernel check, and a
      # BERT-Large update spent 9.3 ms in transposes (11.3 on the [B,N,S,D] layout) and peaked
      # 0.7 GB lower, at the same GPU time (BENCHMARKS.md, 2026-11-28). projection_inputs:
      # x once per product (TransformerBlock's fan_out_for_gemm_sums), else x itself.
      q, k, v = (tf.reshape(layer(inputs), [x.shape[0], x.shape[1], c.num_attention_heads,
                                            c.head_size])
                 for layer, inputs in zip((self.query, self.key, self.value),
                                          projection_inputs or (x, x, x)))
      context = fused_attention.cudnn_attention_btnh(
          q, k, v, fused_attention.key_lengths_from_adder(attention_adder))  # [B,F,N,D]
      return tf.reshape(context, [batch, seq, c.hidden_size]), None
    # One [B*S,H] x [H,3H] product over a view of the three [H,H] kernels (the variables stay
    # Google's query/key/value), then one transpose to head-major [3,B,N,S,D]: the layout
    # whose batch dimensions (B,N) lead, as the attention GEMMs need.
    kernel = tf.concat([shared_unit_operand(tf.cast(layer.kernel, dtype))
                        for layer in (self.query, self.key, self.value)], axis=1)  # [H,3H]
    bias = tf.concat([shared_unit_operand(tf.cast(layer.bias, dtype))
                      for layer in (self.query, self.key, self.value)], axis=0)  # [3H]
    flat = tf.reshape(tf.cast(x, dtype), [-1, c.hidden_size])  # [B*S,H]
    qkv = tf.nn.bias_add(tf.matmul(flat, kernel), bias)  # [B*S,3H]
    qkv = tf.reshape(qkv, [batch, seq, 3, c.num_attention_heads, c.head_size])  # [B,S,3,N,D]
    qkv = tf.transpose(qkv, [2, 0, 3, 1, 4])  # [3,B,N,S,D]
    q, k, v = qkv[0], qkv[1], qkv[2]  # [B,N,S,D] each
    if fused:
      context = fused_attention.cudnn_attention(
          q, k, v, fused_attention.key_lengths_from_adder(attention_adder),
          dropout_rate=self.dropout.rate if training else 0.0)  # [B,N,F,D]
      context = tf.transpose(context, [0, 2, 1, 3])  # [B,F,N,D]
      return tf.reshape(context, [batch, seq, c.hidden_size]), None
    scale = 1.0 / math.sqrt(float(c.head_size))
    if (training and 0.0 < self.dropout.rate < 1.0 and self.dropout.rng == "hash"
        and c.attention_implementation == "xla_recompute" and not output_attentions):
      # The same ops, recomputed in the backward pass: no [B,N,F,T] tensor kept for it.
      context = attention_recomputed(q, k, v, attention_adder, scale, self.dropout.rate,
                                     self.dropout.next_seed())  # [B,F,N,D]
      return tf.reshape(context, [batch, seq, c.hidden_size]), None
    probs = attention_probs(q, k, attention_adder, scale, v.dtype)  # [B,N,F,T]
    dropped = self.dropout(probs, training=training)
    context = tf.einsum("BNFT,BNTD->BFND", dropped, v)  # [B,F,N,D]
    return tf.reshape(context, [batch, seq, c.hidden_size]), tf.cast(probs, tf.float32)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class TransformerBlock(_ConfigLayer):
  """One post-LN encoder layer, ``bert/encoder/layer_{i}`` in Google's checkpoints.

  attention: self-attention -> dense(H) -> dropout -> LayerNorm(x + input)
  ffn:       dense(I, act) -> dense(H) -> dropout -> LayerNorm(x + attention_output)

  Call: ``(x [B,S,H], attention_adder [B,1,1,S])`` -> ``(output [B,S,H], probs [B,N,S,S])``
  (``probs`` None where ``output_attentions=False`` let the fused kernel or the recomputed
  attention run);
  ``output`` in the compute dtype: each residual add + LayerNorm reads 16-bit tensors under
  mixed precision, computes in float32 and rounds its output once (float32: no rounding).
  """

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    c = self.config
    policy = self.dtype_policy
    h = (None, None, c.hidden_size)
    # Built under the scopes of Google's names: layer_i/attention/self/query/kernel, ...
    with scoped(self.name, "attention"):
      self.attention = BertSelfAttention(c, name="self", dtype=policy)
      with scoped("output"):
        self.attention_output_dense = _dense(c.hidden_size, c, "dense", dtype=policy)
        self.attention_output_dense.build(h)
        self.attention_output_layer_norm = layer_norm(c)
        self.attention_output_layer_norm.build(h)
    with scoped(self.name, "intermediate"):
      self.intermediate_dense = _dense(c.intermediate_size, c, "dense",
                                       activation=get_activation(c.hidden_act), dtype=policy)
      self.intermediate_dense.recompute_activation = True
      self.intermediate_dense.build(h)
    with scoped(self.name, "output"):
      self.output_dense = _dense(c.hidden_size, c, "dense", dtype=policy)
      self.output_dense.build((None, None, c.intermediate_size))
      self.output_layer_norm = layer_norm(c)
      self.output_layer_norm.build(h)
    self.attention_dropout = Dropout(c.hidden_dropout_prob, dtype=policy)
    self.output_dropout = Dropout(c.hidden_dropout_prob, dtype=policy)
    self.built = True

  def call(self, x, attention_adder, training=None, output_attentions=True):
    # Everything but the attention itself runs on the 2-D [B*S,H] matrix, as the original's
    # reshape_to_matrix keeps it: the dropouts, residual adds, LayerNorms and casts then have
    # no [B,S,H] layout for XLA's GPU layout assignment to permute (it ran them on [S,H,B]
    # copies, with transposes around each, ../shared/perf/GPU-2026-11-25.md). Same numbers:
    # the reshapes move no element, and the dropout masks are drawn over the same flat index.
    hidden = self.config.hidden_size
    projection_inputs = None
    if self.attention.projects_separately(x, training, output_attentions):
      # x feeds the residual and three products: its gradient is their four gradients'
      # sum, which XLA's GPU compile then folds into the three products' GEMMs
      # (fan_out_for_gemm_sums).
      residual, *projection_inputs = fan_out_for_gemm_sums(x, 4)
    else:
      residual = x
    flat = tf.reshape(residual, [-1, hidden])  # [B*S,H]
    context, probs = self.attention(x, attention_adder, training=training,
                                    output_attentions=output_attentions,
                                    projection_inputs=projection_inputs)
    attention_output = self.attention_output_dense(tf.reshape(context, [-1, hidden]))
    attention_output = self.attention_dropout(attention_output, training=training)
    attention_output = self._add_and_norm(self.attention_output_layer_norm,
                                          attention_output, flat)  # [B*S,H]
    intermediate = self.intermediate_dense(attention_output)  # [B*S,I]
    layer_output = self.output_dense(intermediate)
    layer_output = self.output_dropout(layer_output, training=training)
    layer_output = self._add_and_norm(self.output_layer_norm, layer_output, attention_output)
    return tf.reshape(layer_output, tf.shape(x)), probs

  def _add_and_norm(self, norm, x, residual):
    """``norm(x + residual)``: the sum and LayerNorm in float32, the output in the compute
    dtype (rounded once under mixed precision). Under mixed precision inside an XLA
    computation with a GPU visible, the LayerNorm's statistics are taken in one pass
    (``layer_norm_one_pass``)."""
    total = tf.cast(x, tf.float32) + tf.cast(residual, tf.float32)
    if (LAYER_NORM_ONE_PASS and self.compute_dtype in ("bfloat16", "float16")
        and gpu_visible() and in_xla_computation()):
      return tf.cast(layer_norm_one_pass(norm, total), self.compute_dtype)
    return tf.cast(norm(total), self.compute_dtype)


def attention_adder_from_mask(input_mask):
  """``[B,S]`` 1/0 mask -> ``[B,1,1,S]`` float32 adder: 0 where attended, -10000.0 on padding."""
  mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
  return (1.0 - mask) * -10000.0
