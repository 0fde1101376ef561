"""A notebook written for bertviz, run in a real Jupyter kernel (``jupyter nbconvert --to
notebook --execute``) with bert_tf's import instead: no cell writes to stderr (TensorFlow's
start-up lines included, with no TF_CPP_MIN_LOG_LEVEL set), the views are displayed, and in a
902 px wide output area (Jupyter's, on a laptop) every view fits, measured in headless
Chromium.

nbconvert, nbformat and ipykernel are test-only dependencies (the "test" extra installs them).
"""

import html
import json
import os
import subprocess
import sys

import pytest

from tests.inference import cdp
from tests.inference.test_visualize_browser import CHROMIUM, expected_lines

for _module in ("nbconvert", "nbformat", "ipykernel"):
  pytest.importorskip(_module, reason=f"{_module} is not installed: pip install -e '.[test]' "
                      "installs the notebook test's Jupyter kernel")

import nbformat  # noqa: E402  pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  pylint: disable=wrong-import-position

OUTPUT_AREA_PX = 902

# A bertviz tutorial's cells, with bert_tf in place of transformers (and the import changed).
CELLS = [
    "import bert_tf",
    "model = bert_tf.load({model!r})",
    "outputs = model([('The cat sat on the mat.', 'The cat lay on the rug.')],\n"
    "                output_attentions=True)\n"
    "attention = outputs.attentions\n"
    "tokens = outputs.tokens[0]\n"
    "sentence_b_start = tokens.index('[SEP]') + 1",
    "from bert_tf.visualize import head_view, model_view",
    "head_view(attention, tokens, sentence_b_start)",
    "model_view(attention, tokens, sentence_b_start)",
    "from bert_tf import visualize\n"
    "vectors = model.embed(['a river bank', 'a savings bank', 'the bank of a stream'])\n"
    "visualize.pca_scatter(vectors, ['river', 'money', 'river'])",
]


@pytest.fixture(scope="module")
def executed(minilm_path, tmp_path_factory):
  folder = tmp_path_factory.mktemp("notebook")
  source = folder / "bertviz_tutorial.ipynb"
  notebook = nbformat.v4.new_notebook(cells=[
      nbformat.v4.new_code_cell(cell.format(model=str(minilm_path))) for cell in CELLS])
  nbformat.write(notebook, str(source))
  env = dict(os.environ)
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # A user's default: nothing set.
  # ipykernel shows what reaches file descriptors 1 and 2 under the cell, as for a user, only
  # when it does not see pytest's variable.
  env.pop("PYTEST_CURRENT_TEST", None)
  result = subprocess.run(
      [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
       "--ExecutePreprocessor.timeout=300", "--output", "executed.ipynb", str(source)],
      cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return nbformat.read(str(folder / "executed.ipynb"), as_version=4)


def test_no_cell_writes_to_stderr(executed):
  for number, cell in enumerate(executed.cells):
    for output in cell.outputs:
      assert output.output_type != "error", (number, output)
      assert not (output.output_type == "stream" and output.name == "stderr"), (
          f"cell {number} ({CELLS[number].splitlines()[0]}) wrote to stderr:\n{output.text}")


def _html_outputs(executed):
  """Each displayed view's HTML, in cell order."""
  return [output.data["text/html"] for cell in executed.cells for output in cell.outputs
          if output.output_type in ("display_data", "execute_result")
          and "text/html" in output.data]


def _data(fragment):
  start = fragment.index('class="btv-data">') + len('class="btv-data">')
  return json.loads(fragment[start:fragment.index("</script>", start)])


def test_views_display_draw_and_fit_the_output_area(executed, tmp_path):
  fragments = _html_outputs(executed)
  assert len(fragments) == 3
  # head_view and model_view displayed themselves and returned None (as bertviz's do: no
  # execute_result); the scatter is the cell's value.
  kinds = [[o.output_type for o in cell.outputs] for cell in executed.cells]
  assert kinds[-3:] == [["display_data"], ["display_data"], ["execute_result"]]
  head, model, _ = fragments
  assert '<svg class="btv-lines"' in head and "<canvas" not in head
  assert "<canvas" in model and '<svg class="btv-lines"' not in model
  # Jupyter's output area: a 902 px wide box, the outputs one after another in it.
  page = tmp_path / "outputs.html"
  page.write_text(
      '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">'
      f'<div id="area" style="width:{OUTPUT_AREA_PX}px">' +
      "".join(f'<div class="output">{f}</div>' for f in fragments) + "</div></body></html>",
      encoding="utf-8")
  with cdp.Page(CHROMIUM, f"file://{page}", width=1200, height=900) as browser:
    browser.wait_for("Array.from(document.querySelectorAll('.btv-root, .btv-scatter'))"
                     ".every(r => r.dataset.drawn === 'true')")
    widths = browser.evaluate(
        "Array.from(document.querySelectorAll('#area, .output, .btv-root, .btv-scatter'))"
        ".map(e => [e.className || e.id, e.scrollWidth, e.getBoundingClientRect().right])")
    assert len(widths) == 1 + 3 + 3
    for name, scroll_width, right in widths:
      assert scroll_width <= OUTPUT_AREA_PX and right <= OUTPUT_AREA_PX, (name, scroll_width)
    # Every element's right edge inside the area (an overflowing child of a box that clips
    # would not show in scrollWidth).
    rightmost = browser.evaluate("Math.max(...Array.from(document.querySelectorAll('#area *'))"
                                 ".map(e => e.getBoundingClientRect().right))")
    assert rightmost <= OUTPUT_AREA_PX
    # The head view drew its lines; the model view its 6 x 12 cells, each its own lines.
    data = _data(head)
    att = np.array(data["attention"])
    assert browser.evaluate("+document.querySelector('.btv-lines').dataset.lines") == \
        expected_lines(att, 0, list(range(att.shape[1]))) > 0
    cells = browser.evaluate("Array.from(document.querySelectorAll('.btv-model canvas'))"
                             ".map(c => [c.getBoundingClientRect().width, +c.dataset.lines])")
    assert len(cells) == 6 * 12
    assert all(width >= 30 for width, _ in cells)  # Scaled down, still a picture.
    assert [lines for _, lines in cells] == [expected_lines(att, l, [h]) for l in range(6)
                                             for h in range(12)]
  assert html.unescape(data["tokens"][1]) == "the"
