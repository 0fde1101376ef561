"""Pictures of a BERT: attention head view (HTML), attention heatmaps and PCA scatter (PNG).

``head_view_html`` writes one self-contained HTML file (inline data, script and style; nothing
fetched from the network) showing every layer and head: a layers x heads grid of heatmaps and,
for the chosen layer, lines from each token to the tokens it attends to, their opacity the
attention weight. ``attention_heatmaps_png`` and ``pca_scatter_png`` need matplotlib, an
optional extra (``pip install 'bert_tf[plots]'``); ``pca_2d`` is plain numpy.

Shape legend: L = layers, N = heads, S = tokens, M = points, D = embedding size.
"""

import html
import io
import json

import numpy as np

from bert_tf import fileio
from bert_tf.errors import BertTfError

# ---------------------------------------------------------------------------------------------
# HTML head view.
# ---------------------------------------------------------------------------------------------

_HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
                "#7b4173", "#3182bd")

_STYLE = """
body { font-family: sans-serif; margin: 1em; color: #222; }
h1 { font-size: 1.2em; }
#controls { margin-bottom: 0.6em; }
.head-toggle { display: inline-block; width: 1.6em; height: 1.2em; margin: 0 2px;
  border: 2px solid transparent; cursor: pointer; text-align: center; color: #fff;
  font-size: 0.75em; line-height: 1.2em; }
.head-toggle.off { opacity: 0.2; }
#view { display: flex; gap: 2em; align-items: flex-start; }
svg text { font-size: 13px; cursor: default; }
#grid { display: grid; gap: 3px; }
#grid canvas { border: 1px solid #ccc; cursor: pointer; image-rendering: pixelated; }
#grid canvas.selected { border-color: #d62728; }
.axis { font-size: 0.75em; color: #666; }
"""

_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("attention-data").textContent);
  var tokens = data.tokens, att = data.attention, L = data.layers, N = data.heads;
  var S = tokens.length, colors = data.colors;
  var layerSelect = document.getElementById("layer");
  var shown = []; for (var h = 0; h < N; h++) shown.push(true);
  var focus = null;  // {side: "from"|"to", index: i} while hovering a token.
  var rowH = 20, textW = 110, gap = 160;
  var svg = document.getElementById("lines");
  svg.setAttribute("width", 2 * textW + gap);
  svg.setAttribute("height", S * rowH + 10);
  var NS = "http://www.w3.org/2000/svg";

  function draw() {
    var layer = +layerSelect.value;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    for (var side = 0; side < 2; side++) {
      for (var i = 0; i < S; i++) {
        var t = document.createElementNS(NS, "text");
        t.setAttribute("x", side ? textW + gap + 4 : textW - 4);
        t.setAttribute("y", (i + 1) * rowH);
        t.setAttribute("text-anchor", side ? "start" : "end");
        t.textContent = tokens[i];
        (function (s, k) {
          t.addEventListener("mouseenter", function () { focus = {side: s, index: k}; draw(); });
          t.addEventListener("mouseleave", function () { focus = null; draw(); });
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
          if (w < 0.01) continue;
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
    var cells = document.querySelectorAll("#grid canvas");
    for (var c = 0; c < cells.length; c++) {
      var cl = +cells[c].dataset.layer, ch = +cells[c].dataset.head;
      cells[c].className = (cl === layer && shown[ch]) ? "selected" : "";
    }
  }

  function paint(canvas, a) {
    var ctx = canvas.getContext("2d"), img = ctx.createImageData(S, S);
    for (var i = 0; i < S; i++) for (var j = 0; j < S; j++) {
      var v = Math.round(255 * (1 - a[i][j])), k = 4 * (i * S + j);
      img.data[k] = v; img.data[k + 1] = v; img.data[k + 2] = 255; img.data[k + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
  }

  var cells = document.querySelectorAll("#grid canvas");
  for (var c = 0; c < cells.length; c++) {
    var cv = cells[c];
    cv.width = S; cv.height = S;
    paint(cv, att[+cv.dataset.layer][+cv.dataset.head]);
    cv.addEventListener("click", function (e) {
      var l = +e.target.dataset.layer, h = +e.target.dataset.head;
      layerSelect.value = l;
      for (var k = 0; k < N; k++) shown[k] = (k === h);
      syncToggles(); draw();
    });
  }
  var toggles = document.querySelectorAll(".head-toggle");
  function syncToggles() {
    for (var k = 0; k < toggles.length; k++)
      toggles[k].className = "head-toggle" + (shown[+toggles[k].dataset.head] ? "" : " off");
  }
  for (var k = 0; k < toggles.length; k++) {
    toggles[k].addEventListener("click", function (e) {
      var h = +e.target.dataset.head; shown[h] = !shown[h]; syncToggles(); draw();
    });
    toggles[k].addEventListener("dblclick", function (e) {
      var h = +e.target.dataset.head;
      for (var m = 0; m < N; m++) shown[m] = (m === h); syncToggles(); draw();
    });
  }
  layerSelect.addEventListener("change", draw);
  draw();
})();
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


def head_view_html(tokens, attentions, path=None, title="BERT attention"):
  """A self-contained HTML head view; written to ``path`` (atomically) if given.

  Args:
    tokens: S word pieces (e.g. one text's ``BertOutput.tokens``, no padding).
    attentions: [L,N,S,S] attention probabilities (from, to) of that text.
    path: optional output file.
    title: the page title.
  Returns:
    The HTML (str). The data are embedded as JSON in ``<script id="attention-data">``
    (``tokens``, ``attention`` [L][N][S][S] rounded to 5 decimals, ``layers``, ``heads``).
  """
  tokens = [str(t) for t in tokens]
  attentions = _check_attentions(tokens, attentions)
  layers, heads = attentions.shape[:2]
  data = {"tokens": tokens, "layers": layers, "heads": heads, "colors": _HEAD_COLORS,
          "attention": np.round(attentions.astype(np.float64), 5).tolist()}
  # "</" would end the <script> element early; "<\/" reads the same to JSON.parse.
  payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
  options = "".join(f'<option value="{l}" data-layer="{l}">layer {l}</option>'
                    for l in range(layers))
  toggles = "".join(
      f'<span class="head-toggle" data-head="{h}" style="background:'
      f'{_HEAD_COLORS[h % len(_HEAD_COLORS)]}" title="head {h} (double-click: only this '
      f'head)">{h}</span>' for h in range(heads))
  cell = max(24, min(64, 640 // max(heads, 1)))
  grid = "".join(
      f'<canvas data-layer="{l}" data-head="{h}" title="layer {l}, head {h}" '
      f'style="width:{cell}px;height:{cell}px"></canvas>'
      for l in range(layers) for h in range(heads))
  token_list = " ".join(f"<code>{html.escape(t)}</code>" for t in tokens)
  page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="axis">{layers} layers &times; {heads} heads, {len(tokens)} tokens: {token_list}</p>
<div id="controls">Layer: <select id="layer">{options}</select>
&nbsp; Heads: {toggles}</div>
<div id="view">
<div><svg id="lines" xmlns="http://www.w3.org/2000/svg"></svg>
<p class="axis">Left: the attending token (from); right: the attended token (to).
Hover a token to see only its weights.</p></div>
<div><div id="grid" style="grid-template-columns: repeat({heads}, {cell}px)">{grid}</div>
<p class="axis">Rows: layers 0&ndash;{layers - 1}; columns: heads 0&ndash;{heads - 1}.
Each square: from (down) &times; to (across). Click one to show it alone.</p></div>
</div>
<script type="application/json" id="attention-data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
  if path:
    with fileio.atomic_write(path, "w") as f:
      f.write(page)
  return page


# ---------------------------------------------------------------------------------------------
# PNG pictures (matplotlib).
# ---------------------------------------------------------------------------------------------


def _new_figure(width_inches, height_inches):
  try:
    from matplotlib.backends.backend_agg import \
        FigureCanvasAgg  # pylint: disable=import-outside-toplevel
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise BertTfError("PNG pictures need matplotlib: pip install 'bert_tf[plots]' "
                      "(or pip install matplotlib)") from None
  figure = Figure(figsize=(width_inches, height_inches))
  FigureCanvasAgg(figure)
  return figure


def _save_png(figure, path, dpi):
  # No bbox_inches="tight": the picture is exactly figsize * dpi pixels.
  buffer = io.BytesIO()
  figure.savefig(buffer, format="png", dpi=dpi)
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


def attention_heatmaps_png(tokens, attentions, path, layers=None, heads=None, cell_inches=2.0,
                           dpi=100):
  """A grid of attention heatmaps: one row per layer, one column per head.

  Args:
    tokens: S word pieces; attentions: [L,N,S,S] (from, to) of one text.
    layers, heads: which to draw (int or list; default all).
    cell_inches: the size of one heatmap; the PNG is
      ``(len(heads) * cell_inches * dpi) x (len(layers) * cell_inches * dpi)`` pixels
      (width x height).
  With a single heatmap the axes are labelled with the tokens.
  Returns ``path``.
  """
  attentions = _check_attentions(tokens, attentions)
  rows = _select(layers, attentions.shape[0], "layer")
  cols = _select(heads, attentions.shape[1], "head")
  figure = _new_figure(len(cols) * cell_inches, len(rows) * cell_inches)
  single = len(rows) * len(cols) == 1
  axes = figure.subplots(len(rows), len(cols), squeeze=False)
  for r, layer in enumerate(rows):
    for c, head in enumerate(cols):
      ax = axes[r][c]
      ax.imshow(attentions[layer, head], vmin=0.0, vmax=1.0, cmap="Blues",
                interpolation="nearest")
      ax.set_title(f"layer {layer} head {head}", fontsize=8 if not single else 10)
      if single:
        ticks = np.arange(len(tokens))
        ax.set_xticks(ticks, tokens, rotation=90, fontsize=7)
        ax.set_yticks(ticks, tokens, fontsize=7)
      else:
        ax.set_xticks([])
        ax.set_yticks([])
  figure.tight_layout(pad=0.4)
  return _save_png(figure, path, dpi)


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


def pca_scatter_png(embeddings, labels, path, title="PCA of embeddings", size_inches=(8.0, 6.0),
                    dpi=100, groups=None):
  """A 2-D PCA scatter plot of labelled embeddings (e.g. one word in several senses).

  Args:
    embeddings: [M,D]; labels: M strings written beside the points.
    groups: optional M group names, one colour each (e.g. the sense of the word).
    size_inches: (width, height); the PNG is ``size_inches * dpi`` pixels.
  Returns ``path``.
  """
  labels = [str(l) for l in labels]
  coords, ratios = pca_2d(embeddings)
  if len(labels) != len(coords):
    raise BertTfError(f"{len(labels)} labels for {len(coords)} embeddings")
  figure = _new_figure(*size_inches)
  ax = figure.subplots()
  groups = list(groups) if groups is not None else [""] * len(labels)
  for g in dict.fromkeys(groups):
    at = [i for i, x in enumerate(groups) if x == g]
    ax.scatter(coords[at, 0], coords[at, 1], label=g or None, s=30)
  for (x, y), label in zip(coords, labels):
    ax.annotate(label if len(label) <= 40 else label[:37] + "...", (x, y), fontsize=8,
                xytext=(4, 3), textcoords="offset points")
  ax.set_xlabel(f"PC1 ({100 * ratios[0]:.1f}% of variance)")
  ax.set_ylabel(f"PC2 ({100 * ratios[1]:.1f}% of variance)")
  ax.set_title(title)
  if any(groups):
    ax.legend(fontsize=8)
  figure.tight_layout()
  return _save_png(figure, path, dpi)
