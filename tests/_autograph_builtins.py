"""What a Jupyter kernel can do to a ``tf.function`` method, made certain for a test.

AutoGraph tells builtins by the ids of ``builtins``' values recorded when TensorFlow is first
imported (``inspect_utils._BUILTIN_FUNCTION_IDS``). When that import happens inside a cell,
one of them is ipykernel's per-cell ``builtins.input`` (a bound method, freed when the cell
ends); a method binding TensorFlow makes later (``MethodType(function, TfMethodTarget)``, the
same size) can land at that address, and AutoGraph then calls it as a builtin: the function
runs with the ``TfMethodTarget`` as ``self``. By chance in a kernel (once in CI); here every
such binding is taken for a builtin.
"""

import contextlib
import inspect

from tensorflow.python.autograph.pyct import inspect_utils
from tensorflow.python.eager.polymorphic_function import tf_method_target


@contextlib.contextmanager
def method_bindings_taken_for_builtins():
  original = inspect_utils.isbuiltin

  def isbuiltin(f):
    return original(f) or (inspect.ismethod(f) and
                           isinstance(f.__self__, tf_method_target.TfMethodTarget))

  inspect_utils.isbuiltin = isbuiltin
  try:
    yield
  finally:
    inspect_utils.isbuiltin = original
