"""Word senses and sentences as points: 2-D PCA (numpy), drawn as a PNG scatter (matplotlib)
or an interactive HTML scatter (inline SVG and script; no network).

Shape legend: M = points, D = embedding size.
"""

import html
import re

import numpy as np

from bert_tf.errors import BertTfError
from bert_tf.visualize.page import HEAD_COLORS, AttentionView, new_view_id
from bert_tf.visualize.png import new_figure, save_png


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


def shorten_around(label, word, limit):
  """``label`` cut to ``limit`` characters with "..." where cut, keeping its first ``word``
  (a whole word, any case) whole and as central as the label allows; the plain cut (the start
  kept) when that already shows the word, or ``word`` is None or not in the label. A word
  longer than ``limit`` is kept whole all the same."""
  if len(label) <= limit or not word:
    return _shorten(label, limit)
  found = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", label, re.I) or re.search(
      re.escape(word), label, re.I)
  if found is None or found.end() <= limit - 3:
    return _shorten(label, limit)
  start, end = found.span()
  room = max(0, limit - (end - start))
  a, b = start - room // 2, end + room - room // 2  # The window [a, b) around the word ...
  if b > len(label):
    a, b = a - (b - len(label)), len(label)
  a = max(a, 0)
  # ... less room for the "..." on each side that is cut (never into the word).
  if a > 0:
    a = min(a + 3, start)
  if b < len(label):
    b = max(b - 3, end)
  middle = label[a:b]
  middle = middle.lstrip() if a > 0 else middle
  middle = middle.rstrip() if b < len(label) else middle
  return ("..." if a > 0 else "") + middle + ("..." if b < len(label) else "")


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


def _labelled(coords, labels, mode, focus=None):
  """``[(index, text)]`` of the points that get a label under ``labels=mode``."""
  if mode not in LABEL_MODES:
    raise BertTfError(f"labels must be one of {', '.join(LABEL_MODES)}, got {mode!r}")
  if mode == "none":
    return []
  if mode == "all":
    return [(i, shorten_around(l, focus, LONG_CHARS)) for i, l in enumerate(labels)]
  return [(i, shorten_around(labels[i], focus, SHORT_CHARS))
          for i in spread_out(coords, SHORT_LABELS)]


def pca_scatter_figure(embeddings, labels, title="PCA of embeddings", size_inches=(8.0, 6.0),
                       dpi=100, groups=None, label_mode="short", focus=None):
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
    focus: the word the points are about (e.g. ``embed --word=bank``): a cut label keeps it
      whole, cut around it ("...sat by the bank of the..."), as ``shorten_around``.
  """
  labels = [str(l) for l in labels]
  coords, ratios = pca_2d(embeddings)
  if len(labels) != len(coords):
    raise BertTfError(f"{len(labels)} labels for {len(coords)} embeddings")
  chosen = _labelled(coords, labels, label_mode, focus)
  figure = new_figure(*size_inches, dpi=dpi, layout="constrained")
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
                    dpi=100, groups=None, label_mode="short", focus=None):
  """``pca_scatter_figure`` saved as a PNG (atomically). Returns ``path``."""
  figure = pca_scatter_figure(embeddings, labels, title=title, size_inches=size_inches, dpi=dpi,
                              groups=groups, label_mode=label_mode, focus=focus)
  return save_png(figure, path)


# ---------------------------------------------------------------------------------------------
# Interactive HTML scatter (inline SVG and script; no network).
# ---------------------------------------------------------------------------------------------

_SCATTER_STYLE = """
.btv-scatter { font-family: sans-serif; color: #222; margin: 0.5em 0 1.5em 0; position: relative;
  max-width: 100%; }
.btv-scatter .btv-title { font-size: 1.15em; font-weight: bold; margin: 0.3em 0; }
.btv-scatter svg { max-width: 100%; height: auto; cursor: grab; user-select: none; }
.btv-scatter circle { stroke: #fff; stroke-width: 1; cursor: pointer; }
.btv-scatter circle.hover { stroke: #000; stroke-width: 2; }
.btv-scatter .btv-tip { position: absolute; display: none; max-width: 420px; padding: 4px 8px;
  background: #fffbe6; border: 1px solid #aaa; font-size: 13px; pointer-events: none; }
.btv-scatter .btv-axis { font-size: 12px; fill: #555; }
.btv-scatter .btv-tick { font-size: 11px; fill: #555; }
.btv-scatter .btv-grid { stroke: #eee; }
.btv-scatter .btv-legend { font-size: 12px; }
.btv-scatter .btv-zoom button { font-size: 12px; margin-right: 4px; }
.btv-scatter .btv-help { font-size: 12px; color: #666; }
"""

# Points sit at data coordinates (data-x, data-y: PC1, PC2); the script maps the visible
# domain onto the plot rectangle, draws "nice" tick values (1, 2 or 5 x 10^k apart) and
# redraws on zoom (wheel about the pointer, or the buttons) and pan (drag).
_SCATTER_SCRIPT = """
(function (root) {
  if (!root || root.dataset.drawn) return;
  var tip = root.querySelector(".btv-tip"), svg = root.querySelector("svg");
  var points = root.querySelectorAll("circle[data-index]");
  var plot = JSON.parse(svg.dataset.plot);  // [left, top, right, bottom] in SVG units
  var home = JSON.parse(svg.dataset.domain), domain = home.slice();  // [x0, x1, y0, y1]
  var ticks = root.querySelector(".btv-ticks"), NS = "http://www.w3.org/2000/svg";
  var ZOOM = 1.25;

  function sx(x) {
    return plot[0] + (x - domain[0]) / (domain[1] - domain[0]) * (plot[2] - plot[0]);
  }
  function sy(y) {
    return plot[3] - (y - domain[2]) / (domain[3] - domain[2]) * (plot[3] - plot[1]);
  }
  function niceTicks(lo, hi) {
    var raw = (hi - lo) / 6, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; })
                            .filter(function (s) { return s >= raw; })[0];
    var decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9)), out = [];
    for (var k = Math.ceil(lo / step); k * step <= hi; k++) out.push((k * step).toFixed(decimals));
    return out;
  }
  function add(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    ticks.appendChild(e);
  }
  function draw() {
    for (var k = 0; k < points.length; k++) {
      points[k].setAttribute("cx", sx(+points[k].dataset.x));
      points[k].setAttribute("cy", sy(+points[k].dataset.y));
    }
    while (ticks.firstChild) ticks.removeChild(ticks.firstChild);
    niceTicks(domain[0], domain[1]).forEach(function (v) {
      var x = sx(+v);
      add("line", {"class": "btv-grid", x1: x, x2: x, y1: plot[1], y2: plot[3]});
      add("text", {"class": "btv-tick btv-tick-x", x: x, y: plot[3] + 16,
                   "text-anchor": "middle", "data-value": v}, v);
    });
    niceTicks(domain[2], domain[3]).forEach(function (v) {
      var y = sy(+v);
      add("line", {"class": "btv-grid", x1: plot[0], x2: plot[2], y1: y, y2: y});
      add("text", {"class": "btv-tick btv-tick-y", x: plot[0] - 6, y: y + 4,
                   "text-anchor": "end", "data-value": v}, v);
    });
  }
  // SVG units per CSS pixel (the picture may be scaled down to fit its container).
  function unit() { return svg.viewBox.baseVal.width / svg.getBoundingClientRect().width; }
  function zoom(factor, x, y) {  // The data point at SVG (x, y) stays where it is.
    var dx = domain[0] + (x - plot[0]) / (plot[2] - plot[0]) * (domain[1] - domain[0]);
    var dy = domain[2] + (plot[3] - y) / (plot[3] - plot[1]) * (domain[3] - domain[2]);
    domain = [dx - (dx - domain[0]) / factor, dx + (domain[1] - dx) / factor,
              dy - (dy - domain[2]) / factor, dy + (domain[3] - dy) / factor];
    draw();
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    var box = svg.getBoundingClientRect(), u = unit();
    zoom(e.deltaY < 0 ? ZOOM : 1 / ZOOM, (e.clientX - box.left) * u, (e.clientY - box.top) * u);
  }, {passive: false});
  var drag = null;
  svg.addEventListener("mousedown", function (e) {
    drag = {x: e.clientX, y: e.clientY, domain: domain.slice(), unit: unit()};
    e.preventDefault();
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var d = drag.domain, u = drag.unit;
    var ddx = (e.clientX - drag.x) * u / (plot[2] - plot[0]) * (d[1] - d[0]);
    var ddy = (e.clientY - drag.y) * u / (plot[3] - plot[1]) * (d[3] - d[2]);
    domain = [d[0] - ddx, d[1] - ddx, d[2] + ddy, d[3] + ddy];
    draw();
  });
  window.addEventListener("mouseup", function () { drag = null; });
  function centre(factor) { zoom(factor, (plot[0] + plot[2]) / 2, (plot[1] + plot[3]) / 2); }
  root.querySelector(".btv-zoom-in").addEventListener("click", function () { centre(ZOOM); });
  root.querySelector(".btv-zoom-out").addEventListener("click", function () { centre(1 / ZOOM); });
  root.querySelector(".btv-reset").addEventListener("click", function () {
    domain = home.slice(); draw();
  });
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
  draw();
  root.dataset.drawn = "true";
})(document.currentScript ? document.currentScript.parentNode
                          : document.getElementById("__VIEW_ID__"));
"""


def pca_scatter(embeddings, labels, title="PCA of embeddings", groups=None, size=(800, 600)):
  """An interactive 2-D PCA scatter as an ``AttentionView``-like object (``_repr_html_``,
  ``html``, ``save``): inline SVG, one circle per point, coloured by group; hovering a point
  shows its whole label (e.g. the sentence) and group; every circle also carries a ``<title>``
  tooltip. The axes carry tick values; the mouse wheel zooms about the pointer (or the
  buttons, about the centre), dragging pans, "reset" goes back. It scales down to fit a
  narrower container. Nothing is fetched from the network.

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
  hi = np.where(hi > lo, hi, lo + 1.0)
  span = hi - lo
  x = left + (coords[:, 0] - lo[0]) / span[0] * (width - left - right)
  y = height - bottom - (coords[:, 1] - lo[1]) / span[1] * (height - top - bottom)
  colors = {g: HEAD_COLORS[k % len(HEAD_COLORS)] for k, g in enumerate(dict.fromkeys(groups))}
  circles = "".join(
      f'<circle cx="{x[i]:.1f}" cy="{y[i]:.1f}" r="5" fill="{colors[groups[i]]}" '
      f'data-index="{i}" data-label="{html.escape(labels[i])}" '
      f'data-group="{html.escape(groups[i])}" data-x="{float(coords[i, 0])!r}" '
      f'data-y="{float(coords[i, 1])!r}"><title>{html.escape(labels[i])}</title></circle>'
      for i in range(len(labels)))
  legend = "".join(
      f'<g class="btv-legend"><circle cx="{width - right + 16}" cy="{top + 10 + 18 * k}" r="5" '
      f'fill="{c}"></circle><text x="{width - right + 26}" y="{top + 14 + 18 * k}">'
      f"{html.escape(_shorten(g, 20))}</text></g>"
      for k, (g, c) in enumerate(colors.items()) if g)
  view_id = new_view_id()
  clip = f"{view_id}-plot"
  plot = [left, top, width - right, height - bottom]
  domain = [float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])]
  axes = (f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
          f'stroke="#888"></line><line x1="{left}" y1="{top}" x2="{left}" '
          f'y2="{height - bottom}" stroke="#888"></line>'
          f'<text class="btv-axis" x="{(left + width - right) / 2}" y="{height - 12}" '
          f'text-anchor="middle">PC1 ({100 * ratios[0]:.1f}% of variance)</text>'
          f'<text class="btv-axis" transform="translate(14,{(top + height - bottom) / 2}) '
          f'rotate(-90)" text-anchor="middle">PC2 ({100 * ratios[1]:.1f}% of variance)</text>')
  fragment = f"""<div class="btv-scatter" id="{view_id}">
<style>{_SCATTER_STYLE}</style>
<div class="btv-title">{html.escape(title)}</div>
<div class="btv-zoom"><button class="btv-zoom-in" title="zoom in">+</button><button
 class="btv-zoom-out" title="zoom out">&minus;</button><button class="btv-reset">reset</button>
<span class="btv-help">wheel: zoom, drag: pan, hover a point: its text</span></div>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"
 viewBox="0 0 {width} {height}" data-plot="{plot}" data-domain="{domain}">
<defs><clipPath id="{clip}"><rect x="{left}" y="{top}" width="{width - left - right}"
 height="{height - top - bottom}"></rect></clipPath></defs>
<g class="btv-ticks"></g>{axes}<g clip-path="url(#{clip})">{circles}</g>{legend}</svg>
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
