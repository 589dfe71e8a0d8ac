"""Local GCS, S3 and web (plain HTTP) servers for tests, with injected latency, faults and
held requests, and a count of requests in flight.

Session fixtures `gcs_store`, `s3_store` and `web_store` yield a `Store` (bucket
"test-bucket"; for the web server, a folder of that name); the autouse fixture
`clean_stores` clears latency, faults and stats after each test.

Why it is built this way:
- Each server runs in a *subprocess* (this file run as a script): the library forks worker
  pools, and a fork should not copy a live server thread. Everything, including the
  fault model, lives in that server process and is driven over HTTP (`/_test/...`), so the
  test, its forked workers and its subprocesses all see and share the same state.
- The server serves until its stdin closes, which also happens when the test process dies,
  so no server outlives its test run. It binds 127.0.0.1 only and keeps data in memory.
- The port is picked by binding port 0 and closing it; another process could take it first,
  so a failed start is retried on a new port.
- Both servers are `BaseHTTPRequestHandler`s (gcp-storage-emulator's own, and werkzeug's
  under moto), so one hook wraps their entry points: the fault model is one piece of code.
  The servers are threaded, or injected latency would serialize all requests; the
  emulator's storage is not thread-safe, so its handlers run one at a time behind a lock,
  after the latency, with the response buffered so a slow reader can't hold the lock.
- GCS env: `STORAGE_EMULATOR_HOST` points google-cloud-storage and gcsfs at the emulator.
  `NO_GCE_CHECK=true`, an empty `CLOUDSDK_CONFIG` and no `GOOGLE_APPLICATION_CREDENTIALS`
  keep clients from real credentials and the GCE metadata server (whose probe retries for
  about 20 s). Beam caches its own credentials per process: see
  `use_anonymous_gcs_credentials`.
- S3 env: `AWS_ENDPOINT_URL` (honoured by botocore, hence s3fs) and test keys. Config files
  point nowhere, and retry and endpoint overrides are unset, so a developer's ~/.aws can't
  change where requests go or how often they are retried.
"""

import contextlib
import http.server
import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http import HTTPStatus

import pytest

BUCKET = "test-bucket"
CONTROL = "/_test/"  # never delayed, counted or failed
_LIVE = []  # stores started in this process, cleared after each test


# ---- Server side: runs in the server subprocess. ----

class Faults:
    """Latency, fault rules and request counts of one server."""

    def __init__(self, error_body):
        self._error_body = error_body  # (status, code, method, target) -> (type, bytes)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.clear()

    def clear(self):
        with self._lock:
            self.latency, self.rules = 0.0, []
        self.reset_stats()

    def reset_stats(self):
        with self._lock:
            self.requests = self.failed = 0
            self.max_in_flight = self.in_flight
            self.log = []

    def stats(self):
        with self._lock:
            return {"requests": self.requests, "in_flight": self.in_flight,
                    "max_in_flight": self.max_in_flight, "failed": self.failed,
                    "latency": self.latency, "rules": [dict(rule) for rule in self.rules],
                    "log": list(self.log)}

    def control(self, name, body):
        """Answer a control request `/_test/<name>`; returns (status, JSON-able)."""
        args = json.loads(body or b"{}")
        if name == "latency":
            self.latency = float(args["seconds"])
        elif name == "fail":
            with self._lock:
                self.rules.append(args)
        elif name == "hold":  # a rule that delays, then answers as usual
            with self._lock:
                self.rules.append({**args, "status": None, "times": None, "method": None})
        elif name == "clear":
            self.clear()
        elif name == "reset_stats":
            self.reset_stats()
        elif name != "stats":
            return 404, {"error": f"unknown control {name!r}"}
        return 200, self.stats()

    def _take_rule(self, method, target):
        for rule in self.rules:
            if (rule["substring"] in target and rule["times"] != 0
                    and rule["method"] in (None, method)):
                if rule["times"] is not None:
                    rule["times"] -= 1
                return rule
        return None

    def handle(self, handler, original, lock=None):
        """Serve one request on a BaseHTTPRequestHandler: control, fault or pass-through."""
        if handler.path.startswith(CONTROL):
            body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            name = urllib.parse.urlsplit(handler.path).path[len(CONTROL):]
            status, out = self.control(name, body)
            return _reply(handler, status, "application/json", json.dumps(out).encode())
        target = urllib.parse.unquote(handler.path)  # object names are %-quoted in URLs
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            latency, rule = self.latency, self._take_rule(handler.command, target)
            if rule and rule.get("hold"):
                latency, rule = latency + rule["hold"], None
            self.failed += rule is not None
            if len(self.log) < 1000:
                injected = f" -> {rule['status']}" if rule else ""
                self.log.append(f"{handler.command} {target}{injected}")
        try:
            time.sleep(latency)
            if rule:
                kind, body = self._error_body(rule["status"], rule["code"], handler.command,
                                              target)
                return _reply(handler, rule["status"], kind, body, _drain(handler))
            if lock is None:
                return original(handler)
            real, handler.wfile = handler.wfile, io.BytesIO()
            try:
                with lock:
                    original(handler)
            finally:
                buffered, handler.wfile = handler.wfile.getvalue(), real
            real.write(buffered)
        finally:
            with self._lock:
                self.in_flight -= 1


def _drain(handler):
    """Read an unanswered request body, so the connection stays usable; returns False (so
    the connection is closed) when that is unsafe: chunked or waiting for 100-continue."""
    length = handler.headers.get("Content-Length")
    if handler.headers.get("Expect") or handler.headers.get("Transfer-Encoding"):
        return False
    handler.rfile.read(int(length or 0))
    return True


def _reply(handler, status, content_type, body, keep_alive=True):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    if not keep_alive:
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def _message(status):
    return f"{HTTPStatus(status).phrase} (injected by the test)"


_GCS_REASONS = {400: "badRequest", 401: "required", 403: "forbidden", 404: "notFound",
                409: "conflict", 412: "conditionNotMet", 429: "rateLimitExceeded"}


def _gcs_error(status, code, method, target):
    """GCS JSON API error; `code` overrides the reason."""
    reason = code or _GCS_REASONS.get(status, "backendError")
    error = {"code": status, "message": _message(status),
             "errors": [{"domain": "global", "reason": reason, "message": _message(status)}]}
    return "application/json", json.dumps({"error": error}).encode()


_S3_CODES = {400: "InvalidRequest", 403: "AccessDenied", 409: "OperationAborted",
             412: "PreconditionFailed", 416: "InvalidRange", 429: "SlowDown",
             500: "InternalError", 501: "NotImplemented", 503: "SlowDown"}


def _s3_error(status, code, method, target):
    """S3 XML error; `code` overrides the default code for the status (for a 404: NoSuchKey,
    or NoSuchBucket for a request on the bucket itself)."""
    path = urllib.parse.urlsplit(target).path.strip("/")
    if code is None and status == 404:
        code = "NoSuchKey" if "/" in path else "NoSuchBucket"
    code = code or _S3_CODES.get(status) or HTTPStatus(status).phrase.replace(" ", "")
    message = "Please reduce your request rate." if code == "SlowDown" else _message(status)
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
           f"<Message>{message}</Message><Resource>/{path}</Resource>"
           "<RequestId>injected</RequestId></Error>")
    return "application/xml", xml.encode()


def _hook(handler_class, names, faults, lock=None):
    """Route the handler's entry points (`do_GET`..., or werkzeug's `run_wsgi`) via faults."""
    def hooked(original):
        return lambda handler: faults.handle(handler, original, lock)

    for name in names:
        setattr(handler_class, name, hooked(getattr(handler_class, name)))


class _ThreadingHTTPServer(http.server.ThreadingHTTPServer):
    # Not socketserver's 5: the emulator answers in HTTP/1.0, a new connection per request,
    # and a burst beyond the queue has its SYNs dropped and retried a second later.
    request_queue_size = max(128, http.server.ThreadingHTTPServer.request_queue_size)


def _honour_if_generation_match(handler_class):
    """GCS answers 412 to an upload with `ifGenerationMatch=0` when the object exists
    (exclusive creation: the output folder's lock); the emulator ignores the parameter."""
    original = handler_class.do_POST

    def do_post(handler):
        parts = urllib.parse.urlsplit(handler.path)
        if urllib.parse.parse_qs(parts.query).get("ifGenerationMatch") != ["0"]:
            return original(handler)
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        handler.rfile = io.BytesIO(body)
        bucket = parts.path.split("/b/", 1)[1].split("/", 1)[0]
        name = json.loads(re.search(rb"\n\n(\{.*?\})\n", body, re.S)[1])["name"]
        try:
            handler.storage.get_file_obj(urllib.parse.unquote(bucket), name)
        except Exception:  # NotFound: create it
            return original(handler)
        error = {"error": {"code": 412, "message": "At least one of the pre-conditions you "
                                                   "specified did not hold."}}
        return _reply(handler, 412, "application/json", json.dumps(error).encode())

    handler_class.do_POST = do_post


def _keep_multipart_bytes_exact():
    """The emulator parses multipart uploads (gcsfs's for files under 5 MB) with the email
    package, which drops a last carriage return of the content: a shard ending in one
    (1 in 256) came back a byte short. Cut the parts at their delimiters
    instead, with the client's own line break (gcsfs writes "\\n", others "\\r\\n")."""
    from gcp_storage_emulator import server

    original = server._read_data

    def read_data(request_handler, query):
        content_type = request_handler.headers.get("Content-Type") or ""
        if not content_type.startswith("multipart/related"):
            return original(request_handler, query)
        raw = server._decode_raw_data(server._read_raw_data(request_handler),
                                      request_handler)
        delimiter = b"--" + re.search(r'boundary="?([^";]+)"?', content_type)[1].encode()
        newline = b"\r\n" if raw.startswith(delimiter + b"\r\n") else b"\n"
        parts = (newline + raw).split(newline + delimiter)[1:-1]  # the last is "--"
        heads, bodies = zip(*(part.split(newline * 2, 1) for part in parts))
        kind = re.search(rb"(?i)content-type:\s*([^\r\n;]+)", heads[1])
        return {"meta": json.loads(bodies[0]), "content": bodies[1],
                "content-type": kind[1].decode() if kind else "application/octet-stream"}

    server._read_data = read_data


def _serve_gcs(port, bucket):
    http.server.HTTPServer = _ThreadingHTTPServer  # the emulator looks it up at start()
    from gcp_storage_emulator.server import RequestHandler, create_server

    _keep_multipart_bytes_exact()
    _honour_if_generation_match(RequestHandler)
    methods = [f"do_{m}" for m in ("GET", "POST", "PUT", "PATCH", "DELETE")]
    _hook(RequestHandler, methods, Faults(_gcs_error), threading.Lock())
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    return server.stop


def _serve_s3(port, bucket):
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Handler(MotoRequestHandler):  # werkzeug sends every method through run_wsgi
        pass

    _hook(Handler, ["run_wsgi"], Faults(_s3_error))
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.shutdown


def _web_error(status, code, method, target):
    return "text/plain", _message(status).encode()


class _WebHandler(http.server.BaseHTTPRequestHandler):
    """A web server as image URLs in a table point at: GET (and HEAD) what was PUT."""

    protocol_version = "HTTP/1.1"
    objects = {}

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.objects[urllib.parse.urlsplit(self.path).path] = body
        _reply(self, 200, "text/plain", b"")

    def do_GET(self):
        data = self.objects.get(urllib.parse.urlsplit(self.path).path)
        if data is None:
            return _reply(self, 404, "text/plain", b"Not Found")
        _reply(self, 200, "application/octet-stream", data)

    do_HEAD = do_GET

    def do_POST(self):  # only control requests (`/_test/...`) are POSTs
        _reply(self, 405, "text/plain", b"Method Not Allowed", _drain(self))

    def log_message(self, *args):
        pass


def _serve_web(port, bucket):
    _hook(_WebHandler, ["do_GET", "do_HEAD", "do_PUT", "do_POST"], Faults(_web_error))
    server = _ThreadingHTTPServer(("127.0.0.1", port), _WebHandler)
    server.daemon_threads = True  # a held request does not delay the server's exit
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.shutdown


# ---- Test side. ----

class Store:
    """A running server, seen from tests: control calls and fsspec helpers. Picklable, so
    it can be handed to worker processes."""

    def __init__(self, kind, url, bucket, env):
        self.kind, self.url, self.bucket, self.env = kind, url, bucket, env
        self.protocol = {"gcs": "gs", "s3": "s3", "web": "http"}[kind]
        self.root = f"{url}/{bucket}" if kind == "web" else f"{self.protocol}://{bucket}"

    def __repr__(self):
        return f"Store({self.kind!r}, {self.url!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.clear()

    def _control(self, name, **args):
        data = None if name == "stats" else json.dumps(args).encode()  # others are POSTs
        request = urllib.request.Request(f"{self.url}{CONTROL}{name}", data=data)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def set_latency(self, seconds):
        """Sleep `seconds` in the server before handling each request."""
        self._control("latency", seconds=seconds)

    def fail(self, substring, status, times=None, code=None, method=None):
        """Answer `status` to requests whose unquoted path+query contains `substring` (and
        whose HTTP method is `method`, if given), for `times` requests (None: always).
        `code` overrides the S3 error code / GCS reason. Rules are tried in order."""
        self._control("fail", substring=substring, status=status, times=times, code=code,
                      method=method)

    def clear(self):
        """No latency, no faults, stats reset."""
        self._control("clear")

    def stats(self):
        """requests, in_flight, max_in_flight, failed (injected), latency, rules, and log:
        "METHOD unquoted-target[ -> injected status]" of the first 1000 requests."""
        return self._control("stats")

    def reset_stats(self):
        self._control("reset_stats")

    def hold(self, substring, seconds):
        """Hold requests whose unquoted path+query contains `substring` for `seconds`
        before answering them as usual (a read in flight for that long)."""
        self._control("hold", substring=substring, hold=seconds)

    def wait_idle(self, timeout=5.0):
        """Stats once no request is in flight: a server thread finishes a request a moment
        after its client has read the response."""
        deadline = time.monotonic() + timeout
        while (stats := self.stats())["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.01)
        return stats

    def fs(self):
        """An fsspec filesystem on this server (fsspec caches it per process)."""
        if self.kind == "gcs":
            import gcsfs.core  # not gcsfs.GCSFileSystem: its gRPC probe stalls on emulators

            return gcsfs.core.GCSFileSystem(token="anon", endpoint_url=self.url)
        import s3fs

        return s3fs.S3FileSystem(key=self.env["AWS_ACCESS_KEY_ID"],
                                 secret=self.env["AWS_SECRET_ACCESS_KEY"],
                                 endpoint_url=self.url, config_kwargs={"region_name": "us-east-1"})

    def upload_bytes(self, data, uri):
        if self.kind == "web":
            urllib.request.urlopen(urllib.request.Request(uri, data, method="PUT"),
                                   timeout=10).close()
            return uri
        self.fs().pipe_file(uri, data)
        return uri

    def upload(self, local_path, uri):
        if self.kind == "web":
            with open(local_path, "rb") as f:
                return self.upload_bytes(f.read(), uri)
        self.fs().put_file(str(local_path), uri)
        return uri

    def read_bytes(self, uri):
        if self.kind == "web":
            with urllib.request.urlopen(uri, timeout=10) as response:
                return response.read()
        return self.fs().cat_file(uri)

    def http_url(self, uri):
        """A URL that a plain HTTP GET reads the object from (S3: presigned)."""
        return self.fs().url(uri)

    def list(self, prefix_uri):
        """Sorted URIs of the objects below `prefix_uri`."""
        fs = self.fs()
        fs.invalidate_cache()  # others (the library, forked workers) wrote meanwhile
        return sorted(f"{self.protocol}://{path}" for path in fs.find(prefix_uri))

    def make_bucket(self, name):
        self.fs().mkdir(f"{self.protocol}://{name}")
        return name


def use_anonymous_gcs_credentials():
    """Make Beam's GCS client anonymous in this process. Returns the old cache state.

    Beam asks `google.auth.default()` once per process and caches the answer; without
    credentials that probes the metadata server for about 20 s, with a developer's it
    would refresh a token from Google. Forked workers inherit the cache; spawned workers
    must call this in their pool initializer (a private Beam detail, checked on 2.77)."""
    from apache_beam.internal.gcp import auth

    old = (auth._Credentials._credentials_init, auth._Credentials._credentials)
    auth._Credentials._credentials_init, auth._Credentials._credentials = True, None
    return old


def _start(kind, bucket, attempts=3):
    for _ in range(attempts):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, __file__, kind, str(port), bucket],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}{CONTROL}stats", timeout=1):
                    return proc, url
            except OSError:
                time.sleep(0.02)
        _stop(proc)
    raise RuntimeError(f"could not start the {kind} server")


def _stop(proc):
    proc.stdin.close()
    proc.terminate()  # Forked workers still alive hold the pipe open: don't wait for EOF.
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def _environment(env):
    saved = {name: os.environ.get(name) for name in env}
    try:
        for name, value in env.items():
            _set_env(name, value)
        yield
    finally:
        for name, value in saved.items():
            _set_env(name, value)


def _set_env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def _running(kind, env_for_url):
    proc, url = _start(kind, BUCKET)
    with tempfile.TemporaryDirectory() as empty_dir:
        env = env_for_url(url, empty_dir)
        store = Store(kind, url, BUCKET, {k: v for k, v in env.items() if v is not None})
        _LIVE.append(store)
        try:
            with _environment(env):
                yield store
        finally:
            _LIVE.remove(store)
            _stop(proc)


def _gcs_env(url, empty_dir):
    return {"STORAGE_EMULATOR_HOST": url, "NO_GCE_CHECK": "true",
            "CLOUDSDK_CONFIG": empty_dir, "GOOGLE_APPLICATION_CREDENTIALS": None}


def _s3_env(url, empty_dir):
    env = {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": os.path.join(empty_dir, "config"),
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(empty_dir, "credentials")}
    unset = ["AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3",
             "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS",
             "AWS_REGION"]
    return env | dict.fromkeys(unset)


@pytest.fixture(scope="session")
def gcs_store():
    """gcp-storage-emulator with bucket "test-bucket"; Beam's client made anonymous too."""
    with _running("gcs", _gcs_env) as store:
        saved_credentials = use_anonymous_gcs_credentials()
        try:
            yield store
        finally:
            from apache_beam.internal.gcp import auth

            auth._Credentials._credentials_init, auth._Credentials._credentials = (
                saved_credentials)


@pytest.fixture(scope="session")
def s3_store():
    """moto's S3 server with bucket "test-bucket"."""
    with _running("s3", _s3_env) as store:
        store.make_bucket(BUCKET)
        yield store


@pytest.fixture(scope="session")
def web_store():
    """A plain HTTP server of image URLs; files are PUT under `store.root`."""
    with _running("web", lambda url, empty_dir: {}) as store:
        yield store


def closed_port():
    """A port on 127.0.0.1 nothing listens on (connection refused), as far as can be
    told: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def clean_stores():
    """Latency and faults set by one test must not slow down or break the next."""
    yield
    for store in _LIVE:
        store.clear()


if __name__ == "__main__":
    kind, port, bucket = sys.argv[1:]
    stop = {"gcs": _serve_gcs, "s3": _serve_s3, "web": _serve_web}[kind](int(port), bucket)
    sys.stdin.read()
    stop()
