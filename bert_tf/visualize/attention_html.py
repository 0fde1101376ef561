"""Attention as HTML: the head view and model view, with bertviz's calls.

``head_view`` and ``model_view`` take bertviz's arguments (``attention`` a per-layer sequence of
``[batch=1, heads, T, T]`` tensors, torch, TensorFlow or numpy; ``tokens``; ``sentence_b_start``;
``layer``/``heads``; ``include_layers``/``include_heads``; ``html_action``), so that a notebook
written for bertviz runs after ``from bert_tf.visualize import head_view, model_view``; bert_tf's
own ``out.attentions`` (``[layers][1,N,S,S]`` for one text) and ``[L,N,S,S]`` arrays are taken
too. ``attention_view`` is both views on one page, linked (a model-view cell click shows that
head in the head view): what ``python -m bert_tf attention --output_html`` writes.

Each view is one self-contained HTML fragment (inline data, script and scoped style; nothing
fetched from the network) that scales down to its container's width (a notebook's output area).

Shape legend: L = layers, N = heads, S = tokens.
"""

import html

import numpy as np

from bert_tf.errors import BertTfError
from bert_tf.visualize.page import (HEAD_COLORS, AttentionView, act, json_in_script,
                                    new_view_id)

# Weights below this draw no line (head view and model view): they would be invisible anyway.
LINE_THRESHOLD = 0.01
# bertviz's sentence filter: (value, label); A = tokens [0, sentence_b_start), B = the rest.
SENTENCE_FILTERS = (("all", "All"), ("aa", "Sentence A -> Sentence A"),
                    ("bb", "Sentence B -> Sentence B"), ("ab", "Sentence A -> Sentence B"),
                    ("ba", "Sentence B -> Sentence A"))

# Every selector is under .btv-root, so a view's style leaves a notebook's page alone.
_STYLE = """
.btv-root { font-family: sans-serif; color: #222; margin: 0.5em 0 1.5em 0; max-width: 100%; }
.btv-root.btv-dark { background: #000; color: #ddd; padding: 0.3em; }
.btv-root .btv-title { font-size: 1.15em; font-weight: bold; margin: 0.3em 0; }
.btv-root .btv-controls { margin: 0.4em 0; }
.btv-root .btv-toggle { display: inline-block; width: 1.6em; height: 1.2em; margin: 0 2px;
  cursor: pointer; text-align: center; color: #fff; font-size: 0.75em; line-height: 1.2em; }
.btv-root .btv-toggle.off { opacity: 0.2; }
.btv-root svg.btv-lines { max-width: 100%; height: auto; }
.btv-root svg text { font-size: 13px; cursor: default; fill: #222; }
.btv-root svg text.btv-out { fill: #bbb; }
.btv-root svg text.btv-focus { font-weight: bold; }
.btv-root svg rect.btv-mark { fill: none; pointer-events: none; }
.btv-root svg rect.btv-mark.btv-focus { fill: #ddd; }
.btv-root .btv-model { display: grid; gap: 4px; align-items: center; max-width: 100%; }
.btv-root .btv-model canvas { border: 1px solid #ddd; cursor: pointer; box-sizing: border-box;
  width: 100%; height: auto; min-width: 0; }
.btv-root .btv-model canvas.selected { border-color: #d62728; }
.btv-root .btv-axis { font-size: 0.8em; color: #666; overflow-wrap: anywhere; }
.btv-root h4 { margin: 1em 0 0.3em 0; font-size: 1em; }
"""

# One function per view, run with the view's root element: every lookup goes through it, so
# several views on one page (or notebook) never see each other's elements.
_SCRIPT = """
(function (root) {
  if (!root || root.dataset.drawn) return;
  var data = JSON.parse(root.querySelector(".btv-data").textContent);
  var tokens = data.tokens, att = data.attention, N = data.heads, S = tokens.length;
  var colors = data.colors, threshold = data.threshold, b = data.sentence_b_start;
  var layerSelect = root.querySelector(".btv-layer");    // null in a model view alone
  var filterSelect = root.querySelector(".btv-filter");  // null without sentence_b_start
  var svg = root.querySelector(".btv-lines");            // null in a model view alone
  var cells = root.querySelectorAll(".btv-model canvas");
  var toggles = root.querySelectorAll(".btv-toggle");
  var NS = "http://www.w3.org/2000/svg";
  var shown = [];
  for (var h = 0; h < N; h++) shown.push(data.shown_heads.indexOf(h) >= 0);
  var focus = null;  // {side: 0 (from) | 1 (to), index: i} while the pointer is on a token.

  // The sentence filter (bertviz's): which tokens attend (from) and are attended (to).
  function ranges() {
    var A = [0, b], B = [b, S], all = [0, S];
    var f = filterSelect ? filterSelect.value : "all";
    return {all: [all, all], aa: [A, A], bb: [B, B], ab: [A, B], ba: [B, A]}[f];
  }
  function layer() { return layerSelect ? +layerSelect.value : 0; }

  // Head view. The tokens are drawn once and never replaced (only their classes change), so
  // the token under the pointer stays in the page and its mouseleave always comes.
  var texts = [[], []], marks = [[], []], lineGroup = null;
  if (svg) {
    var rowH = 20, textW = data.text_width, gap = 160, W = 2 * textW + gap, H = S * rowH + 10;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("width", W); svg.setAttribute("height", H);
    for (var side = 0; side < 2; side++) {
      for (var i = 0; i < S; i++) {
        var mark = document.createElementNS(NS, "rect");
        mark.setAttribute("x", side ? textW + gap : 0); mark.setAttribute("width", textW);
        mark.setAttribute("y", (i + 1) * rowH - 14); mark.setAttribute("height", 18);
        mark.setAttribute("class", "btv-mark");
        svg.appendChild(mark); marks[side].push(mark);
        var t = document.createElementNS(NS, "text");
        t.setAttribute("x", side ? textW + gap + 4 : textW - 4);
        t.setAttribute("y", (i + 1) * rowH);
        t.setAttribute("text-anchor", side ? "start" : "end");
        t.setAttribute("class", side ? "btv-to" : "btv-from");
        t.dataset.index = i;
        t.textContent = tokens[i];
        t.addEventListener("mouseenter", (function (s, k) {
          return function () { focus = {side: s, index: k}; drawHeads(); };
        })(side, i));
        t.addEventListener("mouseleave", function () { focus = null; drawHeads(); });
        svg.appendChild(t); texts[side].push(t);
      }
    }
    lineGroup = document.createElementNS(NS, "g");
    lineGroup.setAttribute("class", "btv-linegroup");
    svg.insertBefore(lineGroup, svg.firstChild);
  }

  function drawHeads() {
    if (!svg) return;
    var l = layer(), r = ranges(), count = 0, visible = 0;
    for (var side = 0; side < 2; side++) {
      for (var i = 0; i < S; i++) {
        var inside = r[side][0] <= i && i < r[side][1];
        var focused = focus !== null && focus.side === side && focus.index === i;
        texts[side][i].setAttribute("class", (side ? "btv-to" : "btv-from") +
            (inside ? "" : " btv-out") + (focused ? " btv-focus" : ""));
        marks[side][i].setAttribute("class", "btv-mark" + (focused ? " btv-focus" : ""));
      }
    }
    while (lineGroup.firstChild) lineGroup.removeChild(lineGroup.firstChild);
    for (var h = 0; h < N; h++) if (shown[h]) visible++;
    for (var h = 0; h < N; h++) {
      if (!shown[h]) continue;
      var a = att[l][h];
      for (var i = r[0][0]; i < r[0][1]; i++) {
        if (focus && focus.side === 0 && focus.index !== i) continue;
        for (var j = r[1][0]; j < r[1][1]; j++) {
          if (focus && focus.side === 1 && focus.index !== j) continue;
          var w = a[i][j];
          if (w < threshold) continue;
          var line = document.createElementNS(NS, "line");
          line.setAttribute("x1", textW); line.setAttribute("y1", (i + 1) * rowH - 4);
          line.setAttribute("x2", textW + gap); line.setAttribute("y2", (j + 1) * rowH - 4);
          line.setAttribute("stroke", colors[h]);
          line.setAttribute("stroke-width", 2);
          line.setAttribute("stroke-opacity", focus ? w : w / Math.sqrt(visible));
          lineGroup.appendChild(line); count++;
        }
      }
    }
    svg.dataset.lines = count;
    for (var c = 0; c < cells.length; c++) {
      var cl = +cells[c].dataset.layer, ch = +cells[c].dataset.head;
      cells[c].className = (cl === l && shown[ch]) ? "selected" : "";
    }
  }

  // Model view: one small picture per (layer, head), a line from each token (left) to each
  // token it attends to (right), its opacity the weight (as bertviz's model_view).
  function drawCell(canvas) {
    var a = att[+canvas.dataset.layer][+canvas.dataset.head], r = ranges();
    var ctx = canvas.getContext("2d"), W = canvas.width, H = canvas.height;
    var pad = 4, step = (H - 2 * pad) / Math.max(S - 1, 1), lines = 0;
    ctx.globalAlpha = 1;
    ctx.fillStyle = data.dark ? "#000000" : "#ffffff"; ctx.fillRect(0, 0, W, H);
    ctx.strokeStyle = colors[+canvas.dataset.head]; ctx.lineWidth = 1.5;
    for (var i = r[0][0]; i < r[0][1]; i++) for (var j = r[1][0]; j < r[1][1]; j++) {
      var w = a[i][j];
      if (w < threshold) continue;
      ctx.globalAlpha = w;
      ctx.beginPath(); ctx.moveTo(pad, pad + i * step); ctx.lineTo(W - pad, pad + j * step);
      ctx.stroke(); lines++;
    }
    ctx.globalAlpha = 1;
    canvas.dataset.lines = lines;
  }
  function drawModel() { for (var c = 0; c < cells.length; c++) drawCell(cells[c]); }

  function syncToggles() {
    for (var k = 0; k < toggles.length; k++)
      toggles[k].className = "btv-toggle" + (shown[+toggles[k].dataset.head] ? "" : " off");
  }
  for (var c = 0; c < cells.length; c++) {
    cells[c].addEventListener("click", function (e) {
      if (!svg) return;
      layerSelect.value = e.target.dataset.layer;
      for (var k = 0; k < N; k++) shown[k] = (k === +e.target.dataset.head);
      syncToggles(); drawHeads();
    });
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
  if (layerSelect) {
    layerSelect.value = data.layer;
    layerSelect.addEventListener("change", drawHeads);
  }
  if (filterSelect)
    filterSelect.addEventListener("change", function () { drawHeads(); drawModel(); });
  syncToggles(); drawHeads(); drawModel();
  root.dataset.drawn = "true";
})(document.currentScript ? document.currentScript.parentNode
                          : document.getElementById("__VIEW_ID__"));
"""


def _to_numpy(x):
  if hasattr(x, "detach"):  # torch: off the autograd graph and the GPU; bfloat16 -> float32
    x = x.detach().cpu().float().numpy()
  elif hasattr(x, "numpy") and not isinstance(x, np.ndarray):  # a TensorFlow tensor
    x = x.numpy()
  return np.asarray(x, np.float32)


def as_attention(attention, tokens):
  """One text's attention as a [L,N,S,S] float32 array.

  Takes bertviz's form (a per-layer sequence of [1,N,T,T] tensors: torch, TensorFlow or numpy;
  [N,T,T] per layer too), bert_tf's ``out.attentions`` for one text (a tuple of [1,N,T,T];
  positions past ``len(tokens)`` that are bert_tf's zeroed padding are dropped), an [L,N,S,S]
  array, or ``np.stack(out.attentions)`` ([L,1,N,S,S]).
  """
  if attention is None:
    raise BertTfError("attention is required: one text's attention, a per-layer sequence of "
                      "[1, heads, tokens, tokens] (e.g. out.attentions with output_attentions)")
  if isinstance(attention, (list, tuple)):
    if not attention:
      raise BertTfError("attention is an empty sequence: expected one entry per layer")
    layers = []
    for l, a in enumerate(attention):
      a = _to_numpy(a)
      if a.ndim == 4:
        if a.shape[0] != 1:
          raise BertTfError(f"attention[{l}] has a batch of {a.shape[0]} texts: give one text's "
                            "attention, e.g. [a[i:i + 1] for a in out.attentions]")
        a = a[0]
      if a.ndim != 3:
        raise BertTfError(f"attention[{l}] must be [batch, heads, tokens, tokens], got shape "
                          f"{list(a.shape)}")
      if layers and a.shape != layers[0].shape:
        raise BertTfError(f"attention[{l}] has shape {list(a.shape)} but attention[0] "
                          f"{list(layers[0].shape)}")
      layers.append(a)
    attention = np.stack(layers)
  else:
    attention = _to_numpy(attention)
    if attention.ndim == 5 and attention.shape[1] == 1:
      attention = attention[:, 0]
  if attention.ndim != 4 or attention.shape[2] != attention.shape[3]:
    raise BertTfError(f"attentions must be [layers, heads, tokens, tokens], got shape "
                      f"{list(attention.shape)}")
  n = len(tokens)
  if attention.shape[2] > n > 0 and _is_padding(attention, n):
    attention = attention[:, :, :n, :n]
  if attention.shape[2] != n:
    raise BertTfError(f"attentions cover {attention.shape[2]} tokens but {n} tokens were given")
  return attention


def _is_padding(attention, n):
  """Whether positions n.. are bert_tf's padding: zero rows and columns, the first n rows whole
  softmax rows over the first n columns."""
  return (not attention[:, :, n:, :].any() and not attention[:, :, :, n:].any() and
          np.allclose(attention[:, :, :n, :n].sum(-1), 1.0, atol=1e-3))


def _prettify(tokens):
  # bertviz's prettify_tokens: byte-level BPE's and SentencePiece's space marks as spaces.
  return [t.replace("\u0120", " ").replace("\u2581", " ").replace("</w>", "") for t in tokens]


def _indexes(values, count, what):
  if values is None:
    return list(range(count))
  values = [values] if isinstance(values, (int, np.integer)) else list(values)
  for v in values:
    if not 0 <= v < count:
      raise BertTfError(f"{what} {v} is out of range (the attention has {count})")
  return [int(v) for v in values]


def _check_sentence_b_start(sentence_b_start, count):
  if sentence_b_start is None:
    return None
  if not 0 < sentence_b_start < count:
    raise BertTfError(f"sentence_b_start {sentence_b_start} must be inside the {count} tokens "
                      "(the index of sentence B's first token)")
  return int(sentence_b_start)


def _fragment(tokens, attention, *, title, parts, layer_labels, head_labels, layer=0,
              shown_heads=None, sentence_b_start=None, dark=False):
  """The HTML fragment of a view: ``parts`` holds "head" and/or "model"; ``attention`` [L,N,S,S]
  with rows/columns named by ``layer_labels``/``head_labels`` (the model's numbers)."""
  layers, heads = attention.shape[:2]
  view_id = new_view_id()
  colors = [HEAD_COLORS[h % len(HEAD_COLORS)] for h in head_labels]
  data = {"tokens": tokens, "layers": layers, "heads": heads, "colors": colors,
          "layer_labels": layer_labels, "head_labels": head_labels,
          "threshold": LINE_THRESHOLD, "sentence_b_start": sentence_b_start, "layer": layer,
          "shown_heads": list(range(heads)) if shown_heads is None else shown_heads,
          "dark": dark, "text_width": max(60, min(220, 8 * max(len(t) for t in tokens) + 10)),
          "attention": np.round(attention.astype(np.float64), 5).tolist()}
  controls = []
  if "head" in parts:
    options = "".join(f'<option value="{k}">layer {l}</option>'
                      for k, l in enumerate(layer_labels))
    controls.append(f'Layer: <select class="btv-layer">{options}</select>')
  if sentence_b_start is not None:
    options = "".join(f'<option value="{v}">{html.escape(t)}</option>'
                      for v, t in SENTENCE_FILTERS)
    controls.append(f'Attention: <select class="btv-filter">{options}</select>')
  if "head" in parts:
    controls.append("Heads: " + "".join(
        f'<span class="btv-toggle" data-head="{k}" style="background:{colors[k]}" '
        f'title="head {h} (double-click: only this head)">{h}</span>'
        for k, h in enumerate(head_labels)))
  token_list = " ".join(f"<code>{html.escape(t)}</code>" for t in tokens)
  body = [f'<div class="btv-title">{html.escape(title)}</div>',
          f'<p class="btv-axis">{layers} layers &times; {heads} heads, {len(tokens)} tokens: '
          f"{token_list}</p>",
          f'<div class="btv-controls">{" &nbsp; ".join(controls)}</div>']
  if "head" in parts:
    body.append('<h4>Head view</h4>\n<svg class="btv-lines" xmlns="http://www.w3.org/2000/svg">'
                '</svg>\n<p class="btv-axis">Left: the attending token (from); right: the '
                "attended token (to). Hover a token to see only its weights.</p>")
  if "model" in parts:
    cell_w = max(40, min(90, 960 // max(heads, 1)))
    cell_h = max(50, min(200, 6 * len(tokens)))
    cells = []
    for k, l in enumerate(layer_labels):
      cells.append(f'<span class="btv-axis">layer {l}</span>')
      cells.extend(f'<canvas data-layer="{k}" data-head="{m}" width="{cell_w}" '
                   f'height="{cell_h}" title="layer {l}, head {h}"></canvas>'
                   for m, h in enumerate(head_labels))
    header = '<span></span>' + "".join(f'<span class="btv-axis">head {h}</span>'
                                       for h in head_labels)
    click = " Click one to show it in the head view." if "head" in parts else ""
    body.append(
        "<h4>Model view</h4>\n<p class=\"btv-axis\">Every layer (rows) and head (columns): lines "
        f"from each token (left) to the tokens it attends to (right).{click}</p>\n"
        '<div class="btv-model" style="grid-template-columns: 4.5em '
        f'repeat({heads}, minmax(0, {cell_w + 2}px))">\n{header}{"".join(cells)}</div>')
  dark_class = " btv-dark" if dark else ""
  return f"""<div class="btv-root{dark_class}" id="{view_id}">
<style>{_STYLE}</style>
{chr(10).join(body)}
<script type="application/json" class="btv-data">{json_in_script(data)}</script>
<script>{_SCRIPT.replace("__VIEW_ID__", view_id)}</script>
</div>"""


def _is_tokens(value):
  return (isinstance(value, (list, tuple)) and len(value) > 0 and
          all(isinstance(t, str) for t in value))


def _inputs(attention, tokens, prettify_tokens, encoder_decoder):
  if any(a is not None for a in encoder_decoder):
    raise BertTfError("bert_tf's views show a BERT's self-attention: pass attention= and "
                      "tokens=, not encoder_attention/decoder_attention/cross_attention")
  if _is_tokens(attention) and not _is_tokens(tokens):  # bert_tf's own order: (tokens, att)
    attention, tokens = tokens, attention
  if tokens is None:
    raise BertTfError("tokens is required: the word pieces of the text (e.g. out.tokens[0])")
  tokens = [str(t) for t in tokens]
  attention = as_attention(attention, tokens)
  return attention, (_prettify(tokens) if prettify_tokens else tokens)


def head_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True,
              layer=None, heads=None, encoder_attention=None, decoder_attention=None,
              cross_attention=None, encoder_tokens=None, decoder_tokens=None,
              include_layers=None, html_action="view", *, title="Head view"):
  """bertviz's ``head_view``: for one layer (a menu), a line from each token (left, "from") to
  each token it attends to (right, "to"), opacity the weight, a colour per head (toggles;
  double-click one to show it alone); hovering a token shows only its lines and highlights it.

  Args (bertviz's):
    attention: one text's attention, a per-layer sequence of [1,N,S,S] (torch, TensorFlow,
      numpy; bert_tf's ``out.attentions`` for one text), or an [L,N,S,S] array.
    tokens: the S word pieces (``out.tokens[0]``). ``head_view(tokens, attention)``, bert_tf's
      earlier order, works too.
    sentence_b_start: index of sentence B's first token, for a pair: adds bertviz's filter
      (All, A -> A, B -> B, A -> B, B -> A).
    prettify_tokens: show BPE/SentencePiece space marks as spaces (WordPiece is unchanged).
    layer: the layer shown first (default the first of ``include_layers``); heads: the heads
      shown first (default all); include_layers: the layers in the menu (default all).
    encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens:
      bertviz's encoder-decoder arguments; a BERT has none (an error if given).
    html_action: "view" displays the view in a Jupyter kernel and returns None; outside one
      (a script, a terminal) it returns the view. "return" returns the view, an
      ``AttentionView`` (``.data`` its HTML, as bertviz's returned object; ``.save(path)``).
    title: shown above the view.
  """
  attention, tokens = _inputs(attention, tokens, prettify_tokens,
                              (encoder_attention, decoder_attention, cross_attention,
                               encoder_tokens, decoder_tokens))
  layers = _indexes(include_layers, attention.shape[0], "layer")
  if layer is None:
    layer = layers[0]
  if layer not in layers:
    raise BertTfError(f"layer {layer} is not in include_layers: {layers}")
  shown = _indexes(heads, attention.shape[1], "head")
  view = AttentionView(_fragment(
      tokens, attention[layers], title=title, parts=("head",), layer_labels=layers,
      head_labels=list(range(attention.shape[1])), layer=layers.index(layer), shown_heads=shown,
      sentence_b_start=_check_sentence_b_start(sentence_b_start, len(tokens))), title)
  return act(view, html_action)


def model_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True,
               display_mode="dark", encoder_attention=None, decoder_attention=None,
               cross_attention=None, encoder_tokens=None, decoder_tokens=None,
               include_layers=None, include_heads=None, html_action="view", *,
               title="Model view"):
  """bertviz's ``model_view``: a grid of every layer (rows) x head (columns), each cell a line
  from each token (left) to each token it attends to (right), opacity the weight.

  Args: as ``head_view``'s, and bertviz's ``display_mode`` ("dark", its default, or "light"),
  ``include_layers``/``include_heads`` (the rows and columns drawn; default all).
  """
  attention, tokens = _inputs(attention, tokens, prettify_tokens,
                              (encoder_attention, decoder_attention, cross_attention,
                               encoder_tokens, decoder_tokens))
  if display_mode not in ("dark", "light"):
    raise BertTfError(f"display_mode must be 'dark' or 'light', got {display_mode!r}")
  layers = _indexes(include_layers, attention.shape[0], "layer")
  heads = _indexes(include_heads, attention.shape[1], "head")
  view = AttentionView(_fragment(
      tokens, attention[layers][:, heads], title=title, parts=("model",), layer_labels=layers,
      head_labels=heads, sentence_b_start=_check_sentence_b_start(sentence_b_start, len(tokens)),
      dark=display_mode == "dark"), title)
  return act(view, html_action)


def select_indexes(values, count, what):
  """Layer or head indexes as the command line gives them (None: all; negative: from the
  end) -> non-negative indexes, or a one-line error naming the one out of range."""
  if values is None:
    return list(range(count))
  values = [values] if isinstance(values, (int, np.integer)) else list(values)
  for v in values:
    if not -count <= v < count:
      raise BertTfError(f"{what} {v} is out of range (the model has {count})")
  return [int(v) % count for v in values]


def attention_view(tokens, attentions, title="BERT attention", sentence_b_start=None,
                   layers=None, heads=None):
  """The head view and model view of one text's attention, linked (clicking a model-view cell
  shows that head in the head view), as an ``AttentionView``. Lines for weights below
  ``LINE_THRESHOLD`` are not drawn.

  Args:
    tokens: S word pieces (e.g. one text's ``BertOutput.tokens``, no padding).
    attentions: that text's attention, in any form ``as_attention`` takes ([L,N,S,S] ...).
    title: shown above the view (and the page's title).
    sentence_b_start: for a pair, sentence B's first token: adds the sentence filter.
    layers, heads: the layers and heads shown (default all; negative indexes count from the
      last), in both views.
  The data are embedded as JSON in ``<script type="application/json" class="btv-data">``
  (``tokens``, ``attention`` [L][N][S][S] rounded to 5 decimals, ``layers``, ``heads``).
  """
  tokens = [str(t) for t in tokens]
  attentions = as_attention(attentions, tokens)
  layers = select_indexes(layers, attentions.shape[0], "layer")
  heads = select_indexes(heads, attentions.shape[1], "head")
  return AttentionView(_fragment(
      tokens, attentions[layers][:, heads], title=title, parts=("head", "model"),
      layer_labels=layers, head_labels=heads,
      sentence_b_start=_check_sentence_b_start(sentence_b_start, len(tokens))), title)


def head_view_html(tokens, attentions, path=None, title="BERT attention", sentence_b_start=None,
                   layers=None, heads=None):
  """``attention_view(...).html``: a whole self-contained HTML page; written to ``path``
  (atomically) if given. Returns the HTML (str)."""
  view = attention_view(tokens, attentions, title=title, sentence_b_start=sentence_b_start,
                        layers=layers, heads=heads)
  if path:
    view.save(path)
  return view.html
