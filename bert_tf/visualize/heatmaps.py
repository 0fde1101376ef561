"""Attention heatmaps as a PNG: one heatmap per (layer, head), tokens on both axes.

Shape legend: L = layers, N = heads, S = tokens.
"""

import numpy as np

from bert_tf.errors import BertTfError
from bert_tf.visualize.attention_html import as_attention
from bert_tf.visualize.png import new_figure, require_matplotlib, save_png  # noqa: F401


def _select(values, count, what):
  if values is None:
    return list(range(count))
  values = [values] if isinstance(values, int) else list(values)
  for v in values:
    if not -count <= v < count:
      raise BertTfError(f"{what} {v} is out of range (the model has {count})")
  return [v % count for v in values]


_GRID_INCHES = 40.0


def attention_heatmaps_figure(tokens, attentions, layers=None, heads=None, cell_inches=None,
                              dpi=100):
  """A matplotlib ``Figure`` of attention heatmaps: one row per layer, one column per head.

  Every heatmap is from (rows, down) x to (columns, across); the tokens label the y axis of
  the first column and the x axis of the bottom row (every heatmap shares them); one colour
  bar (0-1, "attention weight") serves all; each heatmap is titled "layer l head h". The
  figure's layout engine keeps labels, titles and colour bar inside the picture.

  Args:
    tokens: S word pieces; attentions: [L,N,S,S] (from, to) of one text.
    layers, heads: which to draw (int or list; default all).
    cell_inches: the side of one heatmap; default ``max(6, 0.25 * S)`` inches for a single
      heatmap (600 px or more at 100 dpi) and ``max(2.5, 0.2 * S)`` in a grid, so that every
      token label fits, but no more than ``max(1.5, 40 / max(rows, columns))``.
    dpi: pixels per inch of the saved picture.
  """
  tokens = [str(t) for t in tokens]
  attentions = as_attention(attentions, tokens)
  rows = _select(layers, attentions.shape[0], "layer")
  cols = _select(heads, attentions.shape[1], "head")
  count = len(tokens)
  single = len(rows) * len(cols) == 1
  if cell_inches is None:
    cell_inches = max(6.0, 0.25 * count) if single else max(2.5, 0.2 * count)
    # A whole model (e.g. 12 x 12 heads) stays under about 40 inches a side (4000 px at 100
    # dpi); the token labels shrink with the cells.
    cell_inches = min(cell_inches, max(1.5, _GRID_INCHES / max(len(rows), len(cols))))
  # Token labels: at most 10 pt, and no taller than one row of the heatmap.
  font = max(3.0, min(10.0, 0.8 * 72 * cell_inches / max(count, 1)))
  label_inches = 0.6 * font / 72 * max(len(t) for t in tokens) + 0.3  # Rough text width.
  width = len(cols) * cell_inches + label_inches + 1.2  # + the colour bar.
  height = len(rows) * (cell_inches + 0.35) + label_inches + 0.2  # + a title per row.
  figure = new_figure(width, height, dpi=dpi, layout="constrained")
  axes = figure.subplots(len(rows), len(cols), squeeze=False)
  ticks = np.arange(count)
  image = None
  for r, layer in enumerate(rows):
    for c, head in enumerate(cols):
      ax = axes[r][c]
      image = ax.imshow(attentions[layer, head], vmin=0.0, vmax=1.0, cmap="Blues",
                        interpolation="nearest")
      ax.set_title(f"layer {layer} head {head}", fontsize=10 if single else 9)
      # Token labels on the first column (from) and the bottom row (to) only: inner heatmaps
      # get no ticks at all (tick labels for 144 heads would take a minute to lay out).
      if c == 0:
        ax.set_yticks(ticks, tokens, fontsize=font)
      else:
        ax.set_yticks([])
      if r == len(rows) - 1:
        ax.set_xticks(ticks, tokens, rotation=90, fontsize=font)
      else:
        ax.set_xticks([])
      ax.tick_params(length=2, pad=1)
  figure.supxlabel("to (attended token)", fontsize=9)
  figure.supylabel("from (attending token)", fontsize=9)
  colorbar = figure.colorbar(image, ax=axes, shrink=min(1.0, 4.0 / max(len(rows) * cell_inches,
                                                                       1e-6) + 0.3))
  colorbar.set_label("attention weight")
  return figure


def attention_heatmaps_png(tokens, attentions, path, layers=None, heads=None, cell_inches=None,
                           dpi=100):
  """``attention_heatmaps_figure`` saved as a PNG (atomically). Returns ``path``."""
  figure = attention_heatmaps_figure(tokens, attentions, layers=layers, heads=heads,
                                     cell_inches=cell_inches, dpi=dpi)
  return save_png(figure, path)

