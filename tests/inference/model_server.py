"""A local stand-in for Google's model storage (conftest's ``model_mirror`` fixture): an HTTP
server on 127.0.0.1 (a thread of the test process) serving zips laid out as Google's, for
``bert_tf.pretrained`` through ``$BERT_TF_MIRROR``. No test reaches the internet.

``ModelServer.mode`` makes it misbehave on purpose: ``"truncate"`` sends half of a zip and
closes the connection (with the whole length announced); ``"hold"`` sends half and then waits
until ``release`` is called (the client is then necessarily waiting for the rest: the point at
which a test kills it).
"""

import http.server
import io
import os
import threading
import zipfile

from bert_tf import pretrained


def google_zip(folder, top=None):
  """A zip of a model folder's files, under ``top/`` (Google's 2018-2019 zips) or at the top
  (``top=None``, the 2020 small BERTs)."""
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
    for name in sorted(os.listdir(folder)):
      path = os.path.join(folder, name)
      if os.path.isfile(path) and (name.startswith("bert_model.ckpt") or
                                   name in ("bert_config.json", "vocab.txt")):
        archive.write(path, f"{top}/{name}" if top else name)
  return buffer.getvalue()


class ModelServer:
  """Serves ``{url path: bytes}``; counts the requests per path."""

  def __init__(self):
    self.files = {}
    self.requests = []
    self.mode = "whole"
    self._release = threading.Event()
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):

      def do_GET(self):  # pylint: disable=invalid-name
        server.requests.append(self.path)
        body = server.files.get(self.path)
        if body is None:
          self.send_error(404)
          return
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.mode == "whole":
          self.wfile.write(body)
          return
        self.wfile.write(body[:len(body) // 2])
        self.wfile.flush()
        if server.mode == "hold":
          server._release.wait(600)  # pylint: disable=protected-access  # (bounds a hang)
        self.close_connection = True

      def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.httpd.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
    self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
    self._thread.start()

  def serve(self, name, folder):
    """Serves ``folder`` as the zip of the released model ``name`` (any accepted name)."""
    model = pretrained.find(name)
    top = None if model.date == "2020_02_20" else model.name
    self.files[f"/{model.date}/{model.name}.zip"] = google_zip(folder, top)
    return model

  def release(self):
    self._release.set()

  def close(self):
    self.release()
    self.httpd.shutdown()
    self.httpd.server_close()
    self._thread.join(10)

