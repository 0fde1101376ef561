"""Matplotlib figures to PNG: the optional extra (``pip install 'bert_tf[plots]'``) checked
once, figures drawn off-screen (Agg, no display) and saved atomically at their exact size."""

import io

from bert_tf import fileio
from bert_tf.errors import BertTfError


def require_matplotlib():
  """``(Figure, FigureCanvasAgg)``; a one-line ``BertTfError`` without matplotlib (scripts call
  this before any work, so that a missing extra is reported first)."""
  try:
    from matplotlib.backends.backend_agg import \
        FigureCanvasAgg  # pylint: disable=import-outside-toplevel
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise BertTfError("PNG pictures need matplotlib: pip install 'bert_tf[plots]' "
                      "(or pip install matplotlib)") from None
  return Figure, FigureCanvasAgg


def new_figure(width_inches, height_inches, dpi=100, layout=None):
  Figure, FigureCanvasAgg = require_matplotlib()  # pylint: disable=invalid-name
  figure = Figure(figsize=(width_inches, height_inches), dpi=dpi, layout=layout)
  FigureCanvasAgg(figure)
  return figure


def png_bytes(figure):
  """The figure as PNG bytes. No bbox_inches="tight": the picture is exactly figsize * dpi
  pixels, and the layout engine has already made room for every label, title and the colour
  bar inside it."""
  buffer = io.BytesIO()
  figure.savefig(buffer, format="png", dpi=figure.dpi)
  return buffer.getvalue()


def save_png(figure, path):
  with fileio.atomic_write(path, "wb") as f:
    f.write(png_bytes(figure))
  return path

