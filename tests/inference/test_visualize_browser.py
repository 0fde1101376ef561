"""The HTML pictures rendered by headless Chromium (Debian's ``chromium``; ``make test`` installs
it when run as root): the DOM after the pages' scripts ran, and screenshots' pixels.

- Two head views on one page both draw their own tokens and lines, and every model-view cell
  (layers x heads) paints the lines its weights call for.
- The PCA scatter shows one point per embedding where PCA puts it, and hovering a point shows
  its sentence.
"""

import html
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from bert_tf import visualize
from tests.inference import cdp
from tests.inference.test_visualize import png_pixels

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
  if os.geteuid() == 0:  # CI: make test installs chromium first, so this must not skip there.
    pytest.fail("chromium is not installed: `make test` installs it as root (apt-get install -y "
                "chromium); run that, or install it yourself", pytrace=False)
  pytest.skip("headless Chromium is not installed (apt-get install chromium); the HTML "
              "pictures are not rendered", allow_module_level=True)


def _chromium(*args, timeout=600):
  # A profile of its own per run: runs side by side (pytest -n 2) never share a profile lock.
  with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
    command = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                            check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  return result.stdout


def dump_dom(path):
  """The page's DOM after its scripts ran, as HTML."""
  return _chromium("--dump-dom", f"file://{path}")


def screenshot(path, out, size=(1200, 900)):
  _chromium(f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", f"file://{path}")
  return png_pixels(out)[..., :3]


def _with_script(page, script):
  """``page`` with a test script run after everything else (the tests' stand-in for a user)."""
  return page.replace("</body>", f"<script>{script}</script></body>")


def _roots(dom, cls):
  """``{id: that root's DOM}`` for every ``<div class="cls" id=...>``: up to the next view's
  root (head view or scatter; they are not nested) or the notebook page's data."""
  starts = [(m.start(), m.group(1), m.group(2)) for m in
            re.finditer(r'<div class="(btv-root|btv-scatter)" id="([^"]+)"[^>]*>', dom)]
  tail = dom.find('<script type="application/json" id="outputs">')
  ends = [s for s, _, _ in starts[1:]] + [tail if tail > 0 else len(dom)]
  return {root_id: dom[s:e] for (s, kind, root_id), e in zip(starts, ends) if kind == cls}


def _line_count(weights):
  # The page draws a line for every weight >= the threshold, as rounded in its JSON.
  return int((np.round(np.asarray(weights, np.float64), 5) >= visualize.LINE_THRESHOLD).sum())


@pytest.fixture(scope="module")
def two_texts(minilm_bert):
  out = minilm_bert(["The bank by the river.", "It closed <early> & late, said Ann."],
                    output_attentions=True)
  views = []
  for b, tokens in enumerate(out.tokens):
    views.append((tokens, np.stack(out.attentions)[:, b, :, :len(tokens), :len(tokens)]))
  return views  # [(tokens, [L,N,S,S])]


# Counts, for every model-view canvas, the pixels its drawing changed from white.
_COUNT_PAINTED = """
document.querySelectorAll(".btv-model canvas").forEach(function (c) {
  var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, n = 0;
  for (var k = 0; k < d.length; k += 4) if (d[k] < 250 || d[k + 1] < 250 || d[k + 2] < 250) n++;
  c.dataset.painted = n;
});
"""


def test_two_head_views_on_one_page(two_texts, tmp_path):
  views = [visualize.attention_view(tokens, att, title=f"text {k}")
           for k, (tokens, att) in enumerate(two_texts)]
  path = tmp_path / "two.html"
  path.write_text(_with_script(visualize.page_html(views), _COUNT_PAINTED), encoding="utf-8")
  roots = _roots(dump_dom(path), "btv-root")
  assert len(roots) == 2
  for (tokens, att), (root_id, dom) in zip(two_texts, roots.items()):
    layers, heads = att.shape[:2]
    assert 'data-drawn="true"' in dom, root_id  # Its script ran, on its own elements.
    escaped = [html.escape(t, quote=False) for t in tokens]
    # Head view (layer 0, every head shown): both columns of tokens and a line per weight.
    assert re.findall(r'<text [^>]*class="btv-from"[^>]*>(.*?)</text>', dom) == escaped
    assert re.findall(r'<text [^>]*class="btv-to"[^>]*>(.*?)</text>', dom) == escaped
    assert len(re.findall(r"<line ", dom)) == _line_count(att[0])
    # Model view: every (layer, head), each with the lines of its own weights, painted.
    cells = re.findall(r'<canvas data-layer="(\d+)" data-head="(\d+)"[^>]*data-lines="(\d+)"'
                       r'[^>]*data-painted="(\d+)"', dom)
    assert [(int(l), int(h)) for l, h, _, _ in cells] == [
        (l, h) for l in range(layers) for h in range(heads)]
    for l, h, lines, painted in cells:
      assert int(lines) == _line_count(att[int(l), int(h)]), (root_id, l, h)
      assert int(painted) > 100, (root_id, l, h)


def test_head_view_screenshot_shows_lines_in_head_colours(two_texts, tmp_path):
  tokens, att = two_texts[0]
  page = tmp_path / "one.html"
  # Only head 3 (colour #d62728): a click on its model-view cell of layer 2.
  script = ('document.querySelector(\'.btv-model canvas[data-layer="2"][data-head="3"]\')'
            '.dispatchEvent(new MouseEvent("click", {bubbles: true}));')
  page.write_text(_with_script(visualize.head_view_html(tokens, att), script), encoding="utf-8")
  dom = dump_dom(page)
  assert len(re.findall(r"<line ", dom)) == _line_count(att[2, 3])
  assert set(re.findall(r'<line [^>]*stroke="(#[0-9a-f]+)"', dom)) == {"#d62728"}
  pixels = screenshot(page, tmp_path / "one.png")
  red = (pixels[..., 0] > 0.6) & (pixels[..., 1] < 0.5) & (pixels[..., 2] < 0.5)
  blue = (pixels[..., 2] > 0.5) & (pixels[..., 0] < 0.3)
  assert red.sum() > 200  # Head 3's lines (and its cell's border).
  # The other heads are hidden from the head view, but the model view still shows head 0.
  assert blue.sum() > 100


def test_scatter_shows_points_and_hover_text(tmp_path):
  rng = np.random.RandomState(3)
  points = np.concatenate([rng.randn(50, 12) + 1.5, rng.randn(50, 12) - 1.5])
  labels = [f"Sentence {i} is about a <bank> & a river." for i in range(100)]
  groups = ["river"] * 50 + ["money"] * 50
  coords, _ = visualize.pca_2d(points)
  page = visualize.pca_scatter_html(points, labels, title="100 sentences", groups=groups)
  assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", page)
  path = tmp_path / "scatter.html"
  hover = ('document.querySelector(\'circle[data-index="7"]\')'
           '.dispatchEvent(new MouseEvent("mouseenter"));')
  path.write_text(_with_script(page, hover), encoding="utf-8")
  dom = dump_dom(path)
  circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="5" fill="(#[0-9a-f]+)" '
                       r'data-index="(\d+)"[^>]*><title>(.*?)</title></circle>', dom)
  assert [int(c[3]) for c in circles] == list(range(100))
  assert [html.unescape(c[4]) for c in circles] == labels
  assert {c[2] for c in circles[:50]} != {c[2] for c in circles[50:]}  # A colour per group.
  # Placed as PCA says: x a rising linear function of PC1, y (downwards on screen) a falling
  # one of PC2 (to the 0.1 px the page is written with), inside the 800 x 600 plot.
  for k, sign in ((0, 1), (1, -1)):
    screen = np.array([float(c[k]) for c in circles])
    slope, offset = np.polyfit(coords[:, k], screen, 1)
    assert sign * slope > 0
    assert np.abs(screen - (slope * coords[:, k] + offset)).max() < 0.1
    assert 0 < screen.min() and screen.max() < (800, 600)[k]
  tip = re.search(r'<div class="btv-tip" style="([^"]*)">(.*?)</div>', dom)
  assert "display: block" in tip.group(1)
  assert html.unescape(tip.group(2)) == labels[7] + "  [river]"
  assert 'class="hover"' in dom
  # The tooltip's pale yellow box is on screen.
  pixels = screenshot(path, tmp_path / "scatter.png", size=(900, 700))
  tip_colour = np.abs(pixels - np.array([255, 251, 230]) / 255).max(axis=-1) < 2 / 255
  assert tip_colour.sum() > 2000


# What a notebook front end does with display(view): the fragment is set as an output cell's
# innerHTML (where scripts do not run), then every script is replaced by a fresh copy, which
# runs when the cell joins the page; three outputs, two of them head views, share the page.
_NOTEBOOK = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<div id="notebook"></div>
<script type="application/json" id="outputs">%s</script>
<script>
var outputs = JSON.parse(document.getElementById("outputs").textContent);
outputs.forEach(function (fragment) {
  var cell = document.createElement("div");
  cell.className = "output";
  cell.innerHTML = fragment;
  cell.querySelectorAll("script").forEach(function (old) {
    var fresh = document.createElement("script");
    for (var k = 0; k < old.attributes.length; k++)
      fresh.setAttribute(old.attributes[k].name, old.attributes[k].value);
    fresh.textContent = old.textContent;
    old.parentNode.replaceChild(fresh, old);
  });
  document.getElementById("notebook").appendChild(cell);
});
</script></body></html>"""


def test_views_display_in_a_notebook_like_page(two_texts, tmp_path):
  (tokens_a, att_a), (tokens_b, att_b) = two_texts
  views = [visualize.attention_view(tokens_a, att_a), visualize.attention_view(tokens_b, att_b),
           visualize.pca_scatter(np.eye(4), ["one", "two", "three", "four"])]
  fragments = json.dumps([v._repr_html_() for v in views]).replace("</", "<\\/")
  path = tmp_path / "notebook.html"
  path.write_text(_NOTEBOOK % fragments, encoding="utf-8")
  dom = dump_dom(path)
  assert dom.count('class="output"') == 3
  roots = _roots(dom, "btv-root")
  assert len(roots) == 2
  for (tokens, att), part in zip(two_texts, roots.values()):
    assert 'data-drawn="true"' in part
    assert len(re.findall(r'class="btv-from"', part)) == len(tokens)
    assert len(re.findall(r"<line ", part)) == _line_count(att[0])
    assert len(re.findall(r"<canvas [^>]*data-lines=", part)) == att.shape[0] * att.shape[1]
  assert 'data-drawn="true"' in next(iter(_roots(dom, "btv-scatter").values()))


# ---------------------------------------------------------------------------------------------
# The head view under a real pointer (the DevTools protocol's mouse: Chromium's own hit testing
# fires mouseenter/mouseleave and clicks), line counts against the weights.
# ---------------------------------------------------------------------------------------------

_FILTER_RANGES = {"all": ("all", "all"), "aa": ("a", "a"), "bb": ("b", "b"), "ab": ("a", "b"),
                  "ba": ("b", "a")}


def expected_lines(att, layer, heads, focus=None, sentence_filter="all", sentence_b_start=None):
  """The lines the head view draws for ``att`` [L,N,S,S]: every weight >= the threshold (as
  rounded in the page's JSON) of the shown heads, from-tokens and to-tokens inside the sentence
  filter's ranges, only the hovered token's row (side 0, from) or column (side 1, to)."""
  count = att.shape[-1]
  span = {"all": range(count), "a": range(sentence_b_start or 0),
          "b": range(sentence_b_start or 0, count)}
  rows, cols = (np.array(span[k], int) for k in _FILTER_RANGES[sentence_filter])
  if focus is not None:
    side, index = focus
    if side == 0:
      rows = rows[rows == index]
    else:
      cols = cols[cols == index]
  weights = np.round(att[layer][heads].astype(np.float64), 5)[:, rows][:, :, cols]
  return int((weights >= visualize.LINE_THRESHOLD).sum())


@pytest.fixture(scope="module")
def pair(minilm_bert):
  """A pair's tokens, its bert_tf output's attentions (tuple of [1,N,S,S]) and B's start."""
  out = minilm_bert([("The bank by the river flooded.", "It closed early, said Ann.")],
                    output_attentions=True)
  return out.tokens[0], out.attentions, int(np.argmax(out.input_type_ids[0]))


_LINES = "document.querySelectorAll('.btv-lines line').length"
_FOCUSED = ("Array.from(document.querySelectorAll('.btv-lines text.btv-focus'))"
            ".map(t => [t.getAttribute('class').split(' ')[0], +t.dataset.index])")


def _set_select(page, cls, value):
  page.evaluate(f"(function () {{ var s = document.querySelector('.{cls}'); s.value = '{value}';"
                " s.dispatchEvent(new Event('change')); })()")


def test_head_view_follows_the_pointer(pair, tmp_path):
  tokens, attentions, b = pair
  att = np.concatenate(attentions)  # [L,N,S,S]
  heads = list(range(att.shape[1]))
  path = tmp_path / "pair.html"
  visualize.attention_view(tokens, attentions, sentence_b_start=b).save(str(path))
  with cdp.Page(CHROMIUM, f"file://{path}", width=1200, height=900) as page:
    page.wait_for("document.querySelector('.btv-root').dataset.drawn === 'true'")
    everything = expected_lines(att, 0, heads)
    assert page.evaluate(_LINES) == everything > 0
    # Hover a token (from, then to), leave it: its lines only, highlighted; then all again.
    for side, cls, index in ((0, "btv-from", 3), (1, "btv-to", 5), (0, "btv-from", 3)):
      page.move_mouse(*page.centre(f'.btv-lines .{cls}[data-index="{index}"]'))
      assert page.evaluate(_LINES) == expected_lines(att, 0, heads, focus=(side, index))
      assert page.evaluate(_FOCUSED) == [[cls, index]]
      page.move_mouse(2, 2)  # Off every token.
      assert page.evaluate(_LINES) == everything
      assert page.evaluate(_FOCUSED) == []
    _set_select(page, "btv-layer", 2)
    assert page.evaluate(_LINES) == expected_lines(att, 2, heads)
    # A model-view cell's click: that layer and head alone in the head view.
    page.click(*page.centre('.btv-model canvas[data-layer="4"][data-head="5"]'))
    assert page.evaluate("document.querySelector('.btv-layer').value") == "4"
    assert page.evaluate(_LINES) == expected_lines(att, 4, [5]) > 0
    # Sentence filter: head view and every model-view cell draw only A -> B weights.
    _set_select(page, "btv-filter", "ab")
    assert page.evaluate(_LINES) == expected_lines(att, 4, [5], sentence_filter="ab",
                                                   sentence_b_start=b)
    cells = page.evaluate("Array.from(document.querySelectorAll('.btv-model canvas'))"
                          ".map(c => [+c.dataset.layer, +c.dataset.head, +c.dataset.lines])")
    assert cells == [[l, h, expected_lines(att, l, [h], sentence_filter="ab",
                                           sentence_b_start=b)]
                     for l in range(att.shape[0]) for h in heads]
    # Tokens outside the filter's ranges are greyed: from-side B, to-side A.
    out = page.evaluate("Array.from(document.querySelectorAll('.btv-lines text.btv-out'))"
                        ".map(t => [t.getAttribute('class').split(' ')[0], +t.dataset.index])")
    assert out == ([["btv-from", i] for i in range(b, len(tokens))] +
                   [["btv-to", i] for i in range(b)])
    # Hovering a B token on the to side under the filter: its A -> B lines.
    page.move_mouse(*page.centre(f'.btv-lines .btv-to[data-index="{b + 1}"]'))
    assert page.evaluate(_LINES) == expected_lines(att, 4, [5], focus=(1, b + 1),
                                                   sentence_filter="ab", sentence_b_start=b)
    page.move_mouse(2, 2)
    _set_select(page, "btv-filter", "bb")
    assert page.evaluate(_LINES) == expected_lines(att, 4, [5], sentence_filter="bb",
                                                   sentence_b_start=b)


# ---------------------------------------------------------------------------------------------
# The HTML scatter's tick values, zoom and pan, under the real pointer.
# ---------------------------------------------------------------------------------------------

_POINTS = ("Array.from(document.querySelectorAll('circle[data-index]')).map(c => "
           "[+c.dataset.x, +c.dataset.y, +c.getAttribute('cx'), +c.getAttribute('cy')])")
_TICKS = ("Array.from(document.querySelectorAll('.btv-tick-{axis}')).map(t => "
          "[t.dataset.value, t.textContent, +t.getAttribute('{at}')])")


def _screen_map(points):
  """(slope, offset) of screen = slope * data for x and for y, fitted to the circles, and the
  fit's worst miss (px)."""
  points = np.array(points)
  fits = [np.polyfit(points[:, k], points[:, k + 2], 1) for k in (0, 1)]
  miss = max(np.abs(points[:, k + 2] - np.polyval(fits[k], points[:, k])).max() for k in (0, 1))
  return fits, miss


def _check_ticks(page, fits):
  """Tick values are round numbers 1, 2 or 5 x 10^k apart, written as they are, and placed
  where the points' map puts those values; returns the x ticks' step."""
  steps = []
  for k, (axis, at) in enumerate((("x", "x"), ("y", "y"))):
    ticks = page.evaluate(_TICKS.format(axis=axis, at=at))
    assert 3 <= len(ticks) <= 8, ticks
    values = np.array([float(v) for v, _, _ in ticks])
    assert [text for _, text, _ in ticks] == [v for v, _, _ in ticks]
    step = np.diff(values)
    np.testing.assert_allclose(step, step[0], rtol=1e-9)
    mantissa = step[0] / 10 ** np.floor(np.log10(step[0]) + 1e-9)
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-6, step[0]
    offset = 4 if axis == "y" else 0  # y labels sit on their line's baseline + 4.
    np.testing.assert_allclose([p for _, _, p in ticks],
                               np.polyval(fits[k], values) + offset, atol=0.01)
    steps.append(step[0])
  return steps[0]


def test_scatter_ticks_zoom_and_pan(tmp_path):
  rng = np.random.RandomState(5)
  points = rng.randn(40, 6) * 3.0
  path = tmp_path / "scatter.html"
  visualize.pca_scatter_html(points, [f"text {i}" for i in range(40)], str(path))
  coords, _ = visualize.pca_2d(points)
  with cdp.Page(CHROMIUM, f"file://{path}", width=1200, height=900) as page:
    page.wait_for("document.querySelector('.btv-scatter').dataset.drawn === 'true'")
    start = page.evaluate(_POINTS)
    np.testing.assert_allclose(np.array(start)[:, :2], coords, atol=1e-9)  # PCA's numbers
    fits, miss = _screen_map(start)
    assert miss < 1e-6 and fits[0][0] > 0 > fits[1][0]
    first_step = _check_ticks(page, fits)
    # Wheel up three times over point 7: 1.25^3 times larger, about the pointer.
    x, y = page.centre('circle[data-index="7"]')
    page.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=-100)
    for _ in range(2):
      page.call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0,
                deltaY=-100)
    zoomed = page.evaluate(_POINTS)
    zoomed_fits, miss = _screen_map(zoomed)
    assert miss < 1e-6
    for k in (0, 1):
      assert zoomed_fits[k][0] == pytest.approx(fits[k][0] * 1.25 ** 3, rel=1e-9)
    # About the pointer (Chromium hands the page whole pixels: within 1 px).
    left, top = page.evaluate("(r => [r.left, r.top])(document.querySelector('.btv-scatter svg')"
                              ".getBoundingClientRect())")
    pointer = np.array([x - left, y - top])
    np.testing.assert_allclose(np.array(zoomed)[:, 2:],
                               pointer + (np.array(start)[:, 2:] - pointer) * 1.25 ** 3, atol=1.0)
    assert _check_ticks(page, zoomed_fits) < first_step  # Finer ticks.
    # Drag by (+90, +40) px: every point moves with the pointer; ticks follow.
    page.move_mouse(x, y)
    page.call("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left",
              clickCount=1)
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + 90, y=y + 40, button="left")
    page.call("Input.dispatchMouseEvent", type="mouseReleased", x=x + 90, y=y + 40,
              button="left", clickCount=1)
    panned = page.evaluate(_POINTS)
    np.testing.assert_allclose(np.array(panned)[:, 2:] - np.array(zoomed)[:, 2:],
                               np.tile([90.0, 40.0], (40, 1)), atol=1e-6)
    _check_ticks(page, _screen_map(panned)[0])
    # The buttons: zoom out about the centre, then reset to the start.
    page.evaluate("document.querySelector('.btv-zoom-out').click()")
    assert _screen_map(page.evaluate(_POINTS))[0][0][0] == pytest.approx(
        fits[0][0] * 1.25 ** 2, rel=1e-9)
    page.evaluate("document.querySelector('.btv-reset').click()")
    np.testing.assert_allclose(page.evaluate(_POINTS), start, atol=1e-9)
