"""A local static file server on 127.0.0.1 (a free port), in a background thread."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType


class _QuietHandler(SimpleHTTPRequestHandler):
    # Pages load a dozen files per episode: request logs would drown everything else.
    def log_message(self, format: str, *args: object) -> None:
        pass

    def end_headers(self) -> None:
        # Let the browser cache scripts between episodes (a reset is then one HTML fetch).
        if not self.path.endswith(".html"):
            self.send_header("Cache-Control", "max-age=3600")
        super().end_headers()


class StaticServer:
    """Serve `root` at http://127.0.0.1:<port>/ until closed."""

    def __init__(self, root: str | Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"no such folder to serve: {self.root}")
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="rmsweb-static", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "") -> str:
        return f"{self.origin}/{path.lstrip('/')}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> StaticServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
