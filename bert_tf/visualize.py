"""Pictures of a BERT: attention head view and model view (HTML), attention heatmaps (PNG), PCA
scatter (PNG, or interactive HTML).

``head_view`` gives an ``AttentionView``: one self-contained HTML fragment (inline data, script
and scoped style; nothing fetched from the network) with a head view (for the chosen layer,
lines from each token to the tokens it attends to, opacity the weight, a colour per head) and a
model view (a grid of every layer x head, each cell those lines for one head, as bertviz's
``model_view``). It shows itself in Jupyter (``_repr_html_``), under an id of its own, so several
views on one page never touch each other's elements; ``head_view_html`` / ``page_html`` write
whole pages. ``pca_scatter`` is the same kind of object for a PCA scatter whose points show
their text on hover. ``attention_heatmaps_figure`` / ``pca_scatter_figure`` (and their ``_png``
savers) need matplotlib, an optional extra (``pip install 'bert_tf[plots]'``); ``pca_2d`` is
plain numpy.

Shape legend: L = layers, N = heads, S = tokens, M = points, D = embedding size.
"""

import html
import io
import json
import uuid

import numpy as np

from bert_tf import fileio
from bert_tf.errors import BertTfError

# ---------------------------------------------------------------------------------------------
# HTML head view and model view.
# ---------------------------------------------------------------------------------------------

_HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
                "#7b4173", "#3182bd")
# Weights below this draw no line (head view and model view): they would be invisible anyway.
LINE_THRESHOLD = 0.01

# Every selector is under .btv-root, so a view's style leaves a notebook's page alone.
_STYLE = """
.btv-root { font-family: sans-serif; color: #222; margin: 0.5em 0 1.5em 0; }
.btv-root .btv-title { font-size: 1.15em; font-weight: bold; margin: 0.3em 0; }
.btv-root .btv-controls { margin: 0.4em 0; }
.btv-root .btv-toggle { display: inline-block; width: 1.6em; height: 1.2em; margin: 0 2px;
  cursor: pointer; text-align: center; color: #fff; font-size: 0.75em; line-height: 1.2em; }
.btv-root .btv-toggle.off { opacity: 0.2; }
.btv-root svg text { font-size: 13px; cursor: default; }
.btv-root .btv-model { display: grid; gap: 4px; align-items: center; }
.btv-root .btv-model canvas { border: 1px solid #ddd; cursor: pointer; }
.btv-root .btv-model canvas.selected { border-color: #d62728; }
.btv-root .btv-axis { font-size: 0.8em; color: #666; }
.btv-root h4 { margin: 1em 0 0.3em 0; font-size: 1em; }
"""

# One function per view, run with the view's root element: every lookup goes through it, so
# several views on one page (or notebook) never see each other's elements.
_SCRIPT = """
(function (root) {
  if (!root || root.dataset.drawn) return;
  var data = JSON.parse(root.querySelector(".btv-data").textContent);
  var tokens = data.tokens, att = data.attention, L = data.layers, N = data.heads;
  var S = tokens.length, colors = data.colors, threshold = data.threshold;
  var layerSelect = root.querySelector(".btv-layer");
  var shown = []; for (var h = 0; h < N; h++) shown.push(true);
  var focus = null;  // {side: "from"|"to", index: i} while hovering a token.
  var rowH = 20, textW = 110, gap = 160;
  var svg = root.querySelector(".btv-lines");
  svg.setAttribute("width", 2 * textW + gap);
  svg.setAttribute("height", S * rowH + 10);
  var NS = "http://www.w3.org/2000/svg";

  function drawHeads() {
    var layer = +layerSelect.value;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (var side = 0; side < 2; side++) {
      for (var i = 0; i < S; i++) {
        var t = document.createElementNS(NS, "text");
        t.setAttribute("x", side ? textW + gap + 4 : textW - 4);
        t.setAttribute("y", (i + 1) * rowH);
        t.setAttribute("text-anchor", side ? "start" : "end");
        t.setAttribute("class", side ? "btv-to" : "btv-from");
        t.textContent = tokens[i];
        (function (s, k) {
          t.addEventListener("mouseenter", function () {
            focus = {side: s, index: k}; drawHeads();
          });
          t.addEventListener("mouseleave", function () { focus = null; drawHeads(); });
        })(side ? "to" : "from", i);
        svg.appendChild(t);
      }
    }
    var visible = 0; for (var h = 0; h < N; h++) if (shown[h]) visible++;
    for (var h = 0; h < N; h++) {
      if (!shown[h]) continue;
      var a = att[layer][h];
      for (var i = 0; i < S; i++) {
        if (focus && focus.side === "from" && focus.index !== i) continue;
        for (var j = 0; j < S; j++) {
          if (focus && focus.side === "to" && focus.index !== j) continue;
          var w = a[i][j];
          if (w < threshold) continue;
          var line = document.createElementNS(NS, "line");
          line.setAttribute("x1", textW); line.setAttribute("y1", (i + 1) * rowH - 4);
          line.setAttribute("x2", textW + gap); line.setAttribute("y2", (j + 1) * rowH - 4);
          line.setAttribute("stroke", colors[h % colors.length]);
          line.setAttribute("stroke-width", 2);
          line.setAttribute("stroke-opacity", focus ? w : w / Math.sqrt(visible));
          svg.appendChild(line);
        }
      }
    }
    for (var c = 0; c < cells.length; c++) {
      var cl = +cells[c].dataset.layer, ch = +cells[c].dataset.head;
      cells[c].className = (cl === layer && shown[ch]) ? "selected" : "";
    }
  }

  // Model view: one small picture per (layer, head), a line from each token (left) to each
  // token it attends to (right), its opacity the weight (as bertviz's model_view).
  function drawCell(canvas, a, color) {
    var ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
    var pad = 4, step = (H - 2 * pad) / Math.max(S - 1, 1), lines = 0;
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = color; ctx.lineWidth = 1.5;
    for (var i = 0; i < S; i++) for (var j = 0; j < S; j++) {
      var w = a[i][j];
      if (w < threshold) continue;
      ctx.globalAlpha = w;
      ctx.beginPath(); ctx.moveTo(pad, pad + i * step); ctx.lineTo(W - pad, pad + j * step);
      ctx.stroke(); lines++;
    }
    ctx.globalAlpha = 1;
    return lines;
  }

  var cells = root.querySelectorAll(".btv-model canvas");
  for (var c = 0; c < cells.length; c++) {
    var cv = cells[c], l = +cv.dataset.layer, h = +cv.dataset.head;
    cv.dataset.lines = drawCell(cv, att[l][h], colors[h % colors.length]);
    cv.addEventListener("click", function (e) {
      var l = +e.target.dataset.layer, h = +e.target.dataset.head;
      layerSelect.value = l;
      for (var k = 0; k < N; k++) shown[k] = (k === h);
      syncToggles(); drawHeads();
    });
  }
  var toggles = root.querySelectorAll(".btv-toggle");
  function syncToggles() {
    for (var k = 0; k < toggles.length; k++)
      toggles[k].className = "btv-toggle" + (shown[+toggles[k].dataset.head] ? "" : " off");
  }
  for (var k = 0; k < toggles.length; k++) {
    toggles[k].addEventListener("click", function (e) {
      var h = +e.target.dataset.head; shown[h] = !shown[h]; syncToggles(); drawHeads();
    });
    toggles[k].addEventListener("dblclick", function (e) {
      var h = +e.target.dataset.head;
      for (var m = 0; m < N; m++) shown[m] = (m === h); syncToggles(); drawHeads();
    });
  }
  layerSelect.addEventListener("change", drawHeads);
  drawHeads();
  root.dataset.drawn = "true";
})(document.currentScript ? document.currentScript.parentNode
                          : document.getElementById("__VIEW_ID__"));
"""


def _check_attentions(tokens, attentions):
  attentions = np.asarray(attentions, np.float32)
  if attentions.ndim != 4 or attentions.shape[2] != attentions.shape[3]:
    raise BertTfError(f"attentions must be [layers, heads, tokens, tokens], got shape "
                      f"{list(attentions.shape)}")
  if attentions.shape[2] != len(tokens):
    raise BertTfError(f"attentions cover {attentions.shape[2]} tokens but {len(tokens)} tokens "
                      "were given")
  return attentions


def _json_in_script(data):
  # "</" would end the <script> element early; "<\/" reads the same to JSON.parse.
  return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def _page(title, fragments):
  """A whole HTML document holding ``fragments`` (views' ``_repr_html_``)."""
  return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
          f"<title>{html.escape(title)}</title></head>\n<body>\n" + "\n".join(fragments) +
          "\n</body></html>\n")


def _new_view_id():
  # Random, so that two views in one notebook (even of the same text) never share an id.
  return "btv-" + uuid.uuid4().hex[:12]


class AttentionView:
  """An attention picture for a notebook or a file: ``display(view)`` in Jupyter shows it
  (``_repr_html_``: one self-contained ``<div>`` with its own style, data and script, under an
  id of its own, so several views on one page work side by side); ``view.html`` is a whole
  page; ``view.save(path)`` writes that page atomically."""

  def __init__(self, fragment, title):
    self.fragment = fragment
    self.title = title

  def _repr_html_(self):
    return self.fragment

  @property
  def html(self):
    return _page(self.title, [self.fragment])

  def save(self, path):
    with fileio.atomic_write(path, "w") as f:
      f.write(self.html)
    return path


def page_html(views, title="BERT attention", path=None):
  """Several ``AttentionView``s (or scatter views) in one HTML page; written to ``path`` if
  given. Returns the HTML."""
  page = _page(title, [v._repr_html_() for v in views])  # pylint: disable=protected-access
  if path:
    with fileio.atomic_write(path, "w") as f:
      f.write(page)
  return page


def head_view(tokens, attentions, title="BERT attention"):
  """The head view and model view of one text's attention, as an ``AttentionView``.

  Head view: for the chosen layer (a menu) and heads (coloured toggles; double-click one to
  show it alone), a line from each token (left, "from") to each token it attends to (right,
  "to"), opacity the weight; hovering a token shows only its lines. Model view (as bertviz's
  ``model_view``): a grid of every layer (rows) x head (columns), each cell the same lines for
  that head; clicking a cell shows it in the head view. Lines for weights below
  ``LINE_THRESHOLD`` are not drawn. Nothing is fetched from the network.

  Args:
    tokens: S word pieces (e.g. one text's ``BertOutput.tokens``, no padding).
    attentions: [L,N,S,S] attention probabilities (from, to) of that text.
    title: shown above the view (and the page's title).
  The data are embedded as JSON in ``<script type="application/json" class="btv-data">``
  (``tokens``, ``attention`` [L][N][S][S] rounded to 5 decimals, ``layers``, ``heads``).
  """
  tokens = [str(t) for t in tokens]
  attentions = _check_attentions(tokens, attentions)
  layers, heads = attentions.shape[:2]
  view_id = _new_view_id()
  data = {"tokens": tokens, "layers": layers, "heads": heads, "colors": _HEAD_COLORS,
          "threshold": LINE_THRESHOLD,
          "attention": np.round(attentions.astype(np.float64), 5).tolist()}
  options = "".join(f'<option value="{l}">layer {l}</option>' for l in range(layers))
  toggles = "".join(
      f'<span class="btv-toggle" data-head="{h}" style="background:'
      f'{_HEAD_COLORS[h % len(_HEAD_COLORS)]}" title="head {h} (double-click: only this '
      f'head)">{h}</span>' for h in range(heads))
  cell_w = max(40, min(90, 960 // max(heads, 1)))
  cell_h = max(50, min(200, 6 * len(tokens)))
  rows = []
  for l in range(layers):
    rows.append(f'<span class="btv-axis">layer {l}</span>')
    rows.extend(f'<canvas data-layer="{l}" data-head="{h}" width="{cell_w}" height="{cell_h}" '
                f'title="layer {l}, head {h}"></canvas>' for h in range(heads))
  header = '<span></span>' + "".join(f'<span class="btv-axis">head {h}</span>'
                                     for h in range(heads))
  token_list = " ".join(f"<code>{html.escape(t)}</code>" for t in tokens)
  fragment = f"""<div class="btv-root" id="{view_id}">
<style>{_STYLE}</style>
<div class="btv-title">{html.escape(title)}</div>
<p class="btv-axis">{layers} layers &times; {heads} heads, {len(tokens)} tokens: {token_list}</p>
<h4>Head view</h4>
<div class="btv-controls">Layer: <select class="btv-layer">{options}</select>
&nbsp; Heads: {toggles}</div>
<svg class="btv-lines" xmlns="http://www.w3.org/2000/svg"></svg>
<p class="btv-axis">Left: the attending token (from); right: the attended token (to).
Hover a token to see only its weights.</p>
<h4>Model view</h4>
<p class="btv-axis">Every layer (rows) and head (columns): lines from each token (left) to the
tokens it attends to (right). Click one to show it in the head view.</p>
<div class="btv-model" style="grid-template-columns: 4.5em repeat({heads}, {cell_w + 2}px)">
{header}{"".join(rows)}</div>
<script type="application/json" class="btv-data">{_json_in_script(data)}</script>
<script>{_SCRIPT.replace("__VIEW_ID__", view_id)}</script>
</div>"""
  return AttentionView(fragment, title)


def head_view_html(tokens, attentions, path=None, title="BERT attention"):
  """``head_view(...).html``: a whole self-contained HTML page; written to ``path``
  (atomically) if given. Returns the HTML (str)."""
  view = head_view(tokens, attentions, title=title)
  if path:
    view.save(path)
  return view.html


# ---------------------------------------------------------------------------------------------
# PNG pictures (matplotlib).
# ---------------------------------------------------------------------------------------------


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


def _new_figure(width_inches, height_inches, dpi=100, layout=None):
  Figure, FigureCanvasAgg = require_matplotlib()  # pylint: disable=invalid-name
  figure = Figure(figsize=(width_inches, height_inches), dpi=dpi, layout=layout)
  FigureCanvasAgg(figure)
  return figure


def _save_png(figure, path):
  # No bbox_inches="tight": the picture is exactly figsize * dpi pixels, and the layout engine
  # has already made room for every label, title and the colour bar inside it.
  buffer = io.BytesIO()
  figure.savefig(buffer, format="png", dpi=figure.dpi)
  with fileio.atomic_write(path, "wb") as f:
    f.write(buffer.getvalue())
  return path


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
  attentions = _check_attentions(tokens, attentions)
  tokens = [str(t) for t in tokens]
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
  figure = _new_figure(width, height, dpi=dpi, layout="constrained")
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
  return _save_png(figure, path)


def pca_2d(embeddings):
  """Principal components 1 and 2 of ``[M,D]`` points -> ``([M,2] coordinates, [2] explained
  variance ratios)``.

  Centred, then projected on the two leading right singular vectors; each axis's sign is
  chosen so that its largest-magnitude coordinate is positive (a deterministic picture).
  """
  x = np.asarray(embeddings, np.float64)
  if x.ndim != 2 or x.shape[0] < 2:
    raise BertTfError(f"PCA needs at least 2 embeddings in an [M,D] array, got shape "
                      f"{list(x.shape)}")
  centred = x - x.mean(axis=0)
  _, singular, vt = np.linalg.svd(centred, full_matrices=False)
  components = vt[:2]  # [k,D], k <= 2
  coords = centred @ components.T  # [M,k]
  if coords.shape[1] < 2:
    coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
  for k in range(2):
    if coords[np.argmax(np.abs(coords[:, k])), k] < 0:
      coords[:, k] *= -1
  variance = singular ** 2
  total = variance.sum()
  ratios = np.zeros(2)
  if total > 0:
    ratios[:min(2, len(variance))] = variance[:2] / total
  return coords, ratios


LABEL_MODES = ("none", "short", "all")
# labels="short": this many points at most get a label, cut to this many characters.
SHORT_LABELS, SHORT_CHARS, LONG_CHARS = 12, 24, 60


def _shorten(label, limit):
  return label if len(label) <= limit else label[:limit - 3] + "..."


def spread_out(coords, count):
  """Indexes of ``count`` of the ``[M,2]`` points chosen far from each other (greedy
  farthest-point order, from the point farthest from the mean), so their labels rarely overlap.
  All of them, in order, when ``count >= M``."""
  coords = np.asarray(coords, np.float64)
  if count >= len(coords):
    return list(range(len(coords)))
  scale = coords.std(axis=0)
  points = coords / np.where(scale > 0, scale, 1.0)  # Both axes count alike on the picture.
  chosen = [int(np.argmax(((points - points.mean(axis=0)) ** 2).sum(axis=1)))]
  distance = ((points - points[chosen[0]]) ** 2).sum(axis=1)
  while len(chosen) < count:
    nxt = int(np.argmax(distance))
    chosen.append(nxt)
    distance = np.minimum(distance, ((points - points[nxt]) ** 2).sum(axis=1))
  return sorted(chosen)


def _labelled(coords, labels, mode):
  """``[(index, text)]`` of the points that get a label under ``labels=mode``."""
  if mode not in LABEL_MODES:
    raise BertTfError(f"labels must be one of {', '.join(LABEL_MODES)}, got {mode!r}")
  if mode == "none":
    return []
  if mode == "all":
    return [(i, _shorten(l, LONG_CHARS)) for i, l in enumerate(labels)]
  return [(i, _shorten(labels[i], SHORT_CHARS)) for i in spread_out(coords, SHORT_LABELS)]


def pca_scatter_figure(embeddings, labels, title="PCA of embeddings", size_inches=(8.0, 6.0),
                       dpi=100, groups=None, label_mode="short"):
  """A matplotlib ``Figure``: 2-D PCA scatter of labelled embeddings (e.g. one word in several
  senses, or 100 sentences).

  Args:
    embeddings: [M,D]; labels: M strings (e.g. the sentences).
    groups: optional M group names, one colour each (with a legend).
    size_inches: (width, height); the PNG is ``size_inches * dpi`` pixels.
    label_mode: which points get their label written beside them: ``"short"`` (default) at
      most 12 points spread over the picture, labels cut to 24 characters (readable at 100
      points; every point when there are 12 or fewer); ``"all"`` every point (cut to 60);
      ``"none"`` no labels (use ``pca_scatter_html`` to read them by hovering).
  """
  labels = [str(l) for l in labels]
  coords, ratios = pca_2d(embeddings)
  if len(labels) != len(coords):
    raise BertTfError(f"{len(labels)} labels for {len(coords)} embeddings")
  chosen = _labelled(coords, labels, label_mode)
  figure = _new_figure(*size_inches, dpi=dpi, layout="constrained")
  ax = figure.subplots()
  groups = [str(g) for g in groups] if groups is not None else [""] * len(labels)
  for g in dict.fromkeys(groups):
    at = [i for i, x in enumerate(groups) if x == g]
    ax.scatter(coords[at, 0], coords[at, 1], label=g or None, s=30)
  for i, text in chosen:
    ax.annotate(text, (coords[i, 0], coords[i, 1]), fontsize=8, xytext=(4, 3),
                textcoords="offset points", annotation_clip=False)
  ax.margins(0.12)  # Room for the labels of the outermost points.
  ax.set_xlabel(f"PC1 ({100 * ratios[0]:.1f}% of variance)")
  ax.set_ylabel(f"PC2 ({100 * ratios[1]:.1f}% of variance)")
  ax.set_title(title)
  if any(groups):
    ax.legend(fontsize=8)
  return figure


def pca_scatter_png(embeddings, labels, path, title="PCA of embeddings", size_inches=(8.0, 6.0),
                    dpi=100, groups=None, label_mode="short"):
  """``pca_scatter_figure`` saved as a PNG (atomically). Returns ``path``."""
  figure = pca_scatter_figure(embeddings, labels, title=title, size_inches=size_inches, dpi=dpi,
                              groups=groups, label_mode=label_mode)
  return _save_png(figure, path)


# ---------------------------------------------------------------------------------------------
# Interactive HTML scatter (inline SVG and script; no network).
# ---------------------------------------------------------------------------------------------

_SCATTER_STYLE = """
.btv-scatter { font-family: sans-serif; color: #222; margin: 0.5em 0 1.5em 0; position: relative; }
.btv-scatter .btv-title { font-size: 1.15em; font-weight: bold; margin: 0.3em 0; }
.btv-scatter circle { stroke: #fff; stroke-width: 1; cursor: pointer; }
.btv-scatter circle.hover { stroke: #000; stroke-width: 2; }
.btv-scatter .btv-tip { position: absolute; display: none; max-width: 420px; padding: 4px 8px;
  background: #fffbe6; border: 1px solid #aaa; font-size: 13px; pointer-events: none; }
.btv-scatter .btv-axis { font-size: 12px; fill: #555; }
.btv-scatter .btv-legend { font-size: 12px; }
"""

_SCATTER_SCRIPT = """
(function (root) {
  if (!root || root.dataset.drawn) return;
  var tip = root.querySelector(".btv-tip"), svg = root.querySelector("svg");
  var points = root.querySelectorAll("circle");
  for (var k = 0; k < points.length; k++) {
    points[k].addEventListener("mouseenter", function (e) {
      var c = e.target, box = root.getBoundingClientRect(), at = c.getBoundingClientRect();
      c.setAttribute("class", "hover");
      tip.textContent = c.dataset.label + (c.dataset.group ? "  [" + c.dataset.group + "]" : "");
      tip.style.display = "block";
      var x = at.right - box.left + 6;  // Right of the point, or left of it near the edge.
      if (x + tip.offsetWidth > box.width)
        x = Math.max(0, at.left - box.left - 6 - tip.offsetWidth);
      tip.style.left = x + "px";
      tip.style.top = (at.top - box.top - 4) + "px";
    });
    points[k].addEventListener("mouseleave", function (e) {
      e.target.setAttribute("class", ""); tip.style.display = "none";
    });
  }
  root.dataset.drawn = "true";
})(document.currentScript ? document.currentScript.parentNode
                          : document.getElementById("__VIEW_ID__"));
"""


def pca_scatter(embeddings, labels, title="PCA of embeddings", groups=None, size=(800, 600)):
  """An interactive 2-D PCA scatter as an ``AttentionView``-like object (``_repr_html_``,
  ``html``, ``save``): inline SVG, one circle per point, coloured by group; hovering a point
  shows its whole label (e.g. the sentence) and group; every circle also carries a ``<title>``
  tooltip. Nothing is fetched from the network.

  Args:
    embeddings: [M,D]; labels: M strings; groups: optional M group names.
    size: (width, height) of the plot in CSS pixels.
  """
  labels = [str(l) for l in labels]
  coords, ratios = pca_2d(embeddings)
  if len(labels) != len(coords):
    raise BertTfError(f"{len(labels)} labels for {len(coords)} embeddings")
  groups = [str(g) for g in groups] if groups is not None else [""] * len(labels)
  width, height = size
  left, right, top, bottom = 60, 20 + (150 if any(groups) else 0), 20, 50
  lo, hi = coords.min(axis=0), coords.max(axis=0)
  lo, hi = lo - 0.04 * (hi - lo), hi + 0.04 * (hi - lo)  # Points off the axis lines.
  span = np.where(hi > lo, hi - lo, 1.0)
  x = left + (coords[:, 0] - lo[0]) / span[0] * (width - left - right)
  y = height - bottom - (coords[:, 1] - lo[1]) / span[1] * (height - top - bottom)
  colors = {g: _HEAD_COLORS[k % len(_HEAD_COLORS)] for k, g in enumerate(dict.fromkeys(groups))}
  circles = "".join(
      f'<circle cx="{x[i]:.1f}" cy="{y[i]:.1f}" r="5" fill="{colors[groups[i]]}" '
      f'data-index="{i}" data-label="{html.escape(labels[i])}" '
      f'data-group="{html.escape(groups[i])}"><title>{html.escape(labels[i])}</title></circle>'
      for i in range(len(labels)))
  legend = "".join(
      f'<g class="btv-legend"><circle cx="{width - right + 16}" cy="{top + 10 + 18 * k}" r="5" '
      f'fill="{c}"></circle><text x="{width - right + 26}" y="{top + 14 + 18 * k}">'
      f"{html.escape(_shorten(g, 20))}</text></g>"
      for k, (g, c) in enumerate(colors.items()) if g)
  view_id = _new_view_id()
  axes = (f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
          f'stroke="#888"></line><line x1="{left}" y1="{top}" x2="{left}" '
          f'y2="{height - bottom}" stroke="#888"></line>'
          f'<text class="btv-axis" x="{(left + width - right) / 2}" y="{height - 15}" '
          f'text-anchor="middle">PC1 ({100 * ratios[0]:.1f}% of variance)</text>'
          f'<text class="btv-axis" transform="translate(18,{(top + height - bottom) / 2}) '
          f'rotate(-90)" text-anchor="middle">PC2 ({100 * ratios[1]:.1f}% of variance)</text>')
  fragment = f"""<div class="btv-scatter" id="{view_id}">
<style>{_SCATTER_STYLE}</style>
<div class="btv-title">{html.escape(title)}</div>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">
{axes}{circles}{legend}</svg>
<div class="btv-tip"></div>
<script>{_SCATTER_SCRIPT.replace("__VIEW_ID__", view_id)}</script>
</div>"""
  return AttentionView(fragment, title)


def pca_scatter_html(embeddings, labels, path=None, title="PCA of embeddings", groups=None):
  """``pca_scatter(...).html``: a whole self-contained page; written to ``path`` (atomically)
  if given. Returns the HTML."""
  view = pca_scatter(embeddings, labels, title=title, groups=groups)
  if path:
    view.save(path)
  return view.html
