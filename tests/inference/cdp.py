"""A page in headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``:
JSON messages ending in NUL on file descriptors 3 and 4; no extra package), for tests that need
a real pointer: ``Input.dispatchMouseEvent`` moves the browser's own mouse, so ``mouseenter``,
``mouseleave`` and clicks come from Chromium's hit testing, as a user's would.

Every wait is for a condition (a message with the awaited id, a page expression turning true),
bounded by a deadline; nothing waits a fixed time.
"""

import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time


class CdpError(AssertionError):
  pass


class Page:
  """``with Page(chromium, url, width) as page: page.evaluate("1 + 1")``."""

  def __init__(self, chromium, url, width=1200, height=900, timeout=600):
    self._deadline = time.monotonic() + timeout
    self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
    to_child_r, self._to_child = os.pipe()
    self._from_child, from_child_w = os.pipe()
    # Above 4, so that placing them at 3 and 4 in the child cannot overwrite each other (3 and
    # 4 are in pass_fds: subprocess closes the others after preexec_fn).
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
    os.close(to_child_r)
    os.close(from_child_w)

    def place():
      os.dup2(high[0], 3)
      os.dup2(high[1], 4)

    self._process = subprocess.Popen(
        [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
         "--no-first-run", "--disable-extensions", "--remote-debugging-pipe",
         f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
         "about:blank"],
        preexec_fn=place, pass_fds=(3, 4, *high), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    for fd in high:
      os.close(fd)
    self._buffer, self._next_id = b"", 0
    targets = self._call("Target.getTargets")["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    self._session = self._call("Target.attachToTarget", targetId=page["targetId"],
                               flatten=True)["sessionId"]
    self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
              deviceScaleFactor=1, mobile=False)
    self.call("Page.navigate", url=url)
    self.wait_for("document.readyState === 'complete'")

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def close(self):
    """Asks Chromium to close (it stops its renderer and helper processes and writes its
    profile), then kills whatever of its process group is left, then removes the profile.
    Chromium's helpers are not our children: one may still write into the profile just after
    the browser process is gone (a removal then meets "Directory not empty"), so the removal is
    repeated until the folder is gone, bounded."""
    if self._process.poll() is None:
      try:
        self._deadline = time.monotonic() + 30
        self._call("Browser.close")
        self._process.wait(timeout=30)
      except (CdpError, OSError, subprocess.TimeoutExpired):
        pass
    try:
      os.killpg(self._process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    self._process.wait()
    os.close(self._to_child)
    os.close(self._from_child)
    deadline = time.monotonic() + 60
    while os.path.exists(self._profile) and time.monotonic() < deadline:
      shutil.rmtree(self._profile, ignore_errors=True)
      time.sleep(0.05)

  def _send(self, message):
    os.write(self._to_child, json.dumps(message).encode() + b"\0")

  def _receive(self):
    while b"\0" not in self._buffer:
      left = self._deadline - time.monotonic()
      if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
        raise CdpError("Chromium did not answer in time")
      chunk = os.read(self._from_child, 1 << 16)
      if not chunk:
        raise CdpError("Chromium closed the DevTools pipe")
      self._buffer += chunk
    message, self._buffer = self._buffer.split(b"\0", 1)
    return json.loads(message)

  def _call(self, method, session=None, **params):
    self._next_id += 1
    message = {"id": self._next_id, "method": method, "params": params}
    if session:
      message["sessionId"] = session
    self._send(message)
    while True:
      answer = self._receive()
      if answer.get("id") == self._next_id:
        if "error" in answer:
          raise CdpError(f"{method}: {answer['error']}")
        return answer["result"]

  def call(self, method, **params):
    """A DevTools command on the page."""
    return self._call(method, session=self._session, **params)

  def evaluate(self, expression):
    """The JSON value of a JavaScript expression in the page."""
    result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
    if "exceptionDetails" in result:
      raise CdpError(f"{expression}: {result['exceptionDetails']}")
    return result["result"].get("value")

  def wait_for(self, expression):
    while not self.evaluate(expression):
      if time.monotonic() > self._deadline:
        raise CdpError(f"never true: {expression}")
      self.call("Runtime.evaluate", expression="new Promise(r => requestAnimationFrame(r))",
                awaitPromise=True)

  def centre(self, selector):
    """(x, y) of the centre of the first element matching ``selector`` in the viewport, after
    scrolling it into view."""
    box = self.evaluate(f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
                        "e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
                        "return [r.left + r.width / 2, "
                        "r.top + r.height / 2]; })()")
    return box[0], box[1]

  def move_mouse(self, x, y):
    self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

  def click(self, x, y):
    self.move_mouse(x, y)
    for kind in ("mousePressed", "mouseReleased"):
      self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
