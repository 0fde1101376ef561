"""Attention heatmaps as a PNG: one heatmap per (layer, head), tokens on both axes.

Shape legend: L = layers, N = heads, S = tokens.
"""

import os
import re

import numpy as np

from bert_tf.visualize.attention_html import as_attention, select_indexes
from bert_tf import fileio
from bert_tf.visualize.png import new_figure, png_bytes


# A figure stays under about this many inches a side (4000 px at 100 dpi) ...
_GRID_INCHES = 40.0
# ... and its token labels no smaller than this (points: 8 px at 100 dpi, about a book's
# footnote); a grid that cannot have both is split over several figures (see heatmap_pages).
MIN_LABEL_POINTS = 6.0
_MAX_LABEL_POINTS = 10.0
_ROW_FILL = 0.8  # A label's height over its heatmap row's.


def _label_points(cell_inches, count):
  """Token labels' size: at most 10 pt, no taller than one row of the heatmap."""
  return min(_MAX_LABEL_POINTS, _ROW_FILL * 72 * cell_inches / max(count, 1))


def _cell_inches(count, rows, cols):
  """The default side of one heatmap for ``count`` tokens in a ``rows`` x ``cols`` grid."""
  if rows * cols == 1:
    return max(6.0, 0.25 * count)  # One head alone: 600 px or more at 100 dpi.
  readable = MIN_LABEL_POINTS * count / (_ROW_FILL * 72)  # Labels at MIN_LABEL_POINTS.
  fits = _GRID_INCHES / max(rows, cols)  # The whole grid in one figure.
  return min(max(2.5, 0.2 * count), max(1.5, fits, readable))


def heatmap_pages(count, layers, heads, cell_inches=None):
  """How ``attention_heatmaps_png`` splits a grid: ``[(layers, heads)]``, one per figure.

  One figure when the whole ``layers`` x ``heads`` grid fits in 40 inches a side with token
  labels of at least ``MIN_LABEL_POINTS``; else blocks of at most ``40 / cell`` layers by as
  many heads (e.g. 56 tokens, 12 x 12 heads: four figures of 6 x 6), in reading order.
  """
  cell = cell_inches or _cell_inches(count, len(layers), len(heads))
  per_figure = max(1, int(_GRID_INCHES // cell))
  return [(layers[r:r + per_figure], heads[c:c + per_figure])
          for r in range(0, len(layers), per_figure)
          for c in range(0, len(heads), per_figure)]


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
      token label fits, but no more than ``max(1.5, 40 / max(rows, columns))`` unless that
      would make the labels smaller than ``MIN_LABEL_POINTS`` (``attention_heatmaps_png``
      then splits the grid over several figures).
    dpi: pixels per inch of the saved picture.
  """
  tokens = [str(t) for t in tokens]
  attentions = as_attention(attentions, tokens)
  rows = select_indexes(layers, attentions.shape[0], "layer")
  cols = select_indexes(heads, attentions.shape[1], "head")
  count = len(tokens)
  single = len(rows) * len(cols) == 1
  if cell_inches is None:
    cell_inches = _cell_inches(count, len(rows), len(cols))
  font = _label_points(cell_inches, count)
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
                           dpi=100, also=None):
  """``attention_heatmaps_figure`` saved as PNG. Returns the paths written: ``[path]``, or, for
  a grid that ``heatmap_pages`` splits to keep its labels readable, one file per block named
  ``<stem>-layers<a>-<b>-heads<c>-<d>.png`` beside ``path``. All of them or none
  (``fileio.write_together``: a failure or a kill leaves the earlier pictures as they were);
  then the earlier files of this name that these replace (``path``, or blocks of that form)
  are removed. ``also``: ``{path: text or bytes}`` written together with them (the CLI's
  HTML view of the same text)."""
  tokens = [str(t) for t in tokens]
  attentions = as_attention(attentions, tokens)
  rows = select_indexes(layers, attentions.shape[0], "layer")
  cols = select_indexes(heads, attentions.shape[1], "head")
  pages = heatmap_pages(len(tokens), rows, cols, cell_inches)
  stem, ext = os.path.splitext(path)
  files = {}
  for page_rows, page_cols in pages:
    target = path if len(pages) == 1 else (
        f"{stem}-layers{page_rows[0]}-{page_rows[-1]}-heads{page_cols[0]}-{page_cols[-1]}"
        f"{ext or '.png'}")
    figure = attention_heatmaps_figure(tokens, attentions, layers=page_rows, heads=page_cols,
                                       cell_inches=cell_inches, dpi=dpi)
    files[target] = png_bytes(figure)
  written = [p for p in fileio.write_together({**files, **(also or {})}) if p in files]
  # The earlier pictures of this name that these replace (another text's split blocks, or its
  # one file): left beside the new ones, they were taken for this text's.
  block = re.compile(re.escape(os.path.basename(stem)) + r"-layers\d+-\d+-heads\d+-\d+" +
                     re.escape(ext or ".png"))
  folder = os.path.dirname(path) or "."
  earlier = [os.path.join(folder, name) for name in os.listdir(folder) if block.fullmatch(name)]
  earlier += [path] if len(pages) > 1 and os.path.exists(path) else []
  kept = {os.path.abspath(done) for done in written}
  for stale in earlier:
    if os.path.abspath(stale) not in kept:
      os.remove(stale)
  return written
