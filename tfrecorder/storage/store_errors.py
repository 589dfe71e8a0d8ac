"""Why a store or a web server failed a request, in one line a person can act on.

A store's client (gcsfs, s3fs, aiohttp for http) raises errors several layers deep: a
DNS failure inside a connection error inside a retry's timeout. `answer` says what the
store answered ('access denied (403)'), or why no answer came ('cannot reach
127.0.0.1:9: connection refused'); `FIXES` says what to check for each store;
`check_reachable` probes a server before its client's first request, because the client
would retry for a minute or more and then blame the bucket or the credentials.

Apart from `fs`, which only moves bytes: this module reads errors and sockets, never
files, so it imports nothing of `fs`, and `fs` calls it where a store fails.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import urllib.parse
from collections.abc import Iterator

from tfrecorder.errors import StorageError


class _NoTracebacks(logging.Filter):
    """Drops a store client's records that carry a traceback: gcsfs logs one with every
    error it then raises, and that error reaches the user anyway, as one line. They stay
    for whoever asks for the client's debug logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.exc_info or logging.getLogger(record.name).isEnabledFor(
            logging.DEBUG)


def quiet_tracebacks(logger: logging.Logger) -> None:
    """Keeps `logger` (a store client's) from printing the tracebacks `_NoTracebacks`
    drops."""
    if not any(isinstance(f, _NoTracebacks) for f in logger.filters):
        logger.addHandler(logging.NullHandler())  # nothing where logging is not set up
        logger.addFilter(_NoTracebacks())


FIXES = {
    "gs": "Check the bucket's name and the credentials: `gcloud auth application-default "
          "login` or GOOGLE_APPLICATION_CREDENTIALS must give an account that may use it.",
    "s3": "Check the bucket's name and the credentials: AWS_PROFILE, AWS_ACCESS_KEY_ID or "
          "~/.aws/credentials must give an account that may use it.",
}


UNREACHABLE_FIX = "Check the network connection (a proxy, a firewall) and the address."


def answer(error: BaseException) -> str:
    """What the store answered, in a few words: 'not found (404)', 'HTTP 503: ...', or
    why it could not answer: 'cannot reach 127.0.0.1:9: connection refused'; for a local
    file, the system's words ('no such file or directory'), without the errno and the
    path, which a rejected row gives beside its reason."""
    if isinstance(error, StorageError):
        return str(error)
    cause = network_cause(error)
    if cause is not None:
        address = _address(error)
        return f"cannot reach {address}: {cause}" if address else cause
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    if isinstance(error, FileNotFoundError) and error.filename is None:  # not the OS's
        return "not found (404)"
    code = getattr(error, "code", None)
    if code is None:
        response = getattr(error, "response", None)
        if isinstance(response, dict):  # botocore's ClientError
            details = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return f"{details.get('Code', 'error')} ({status}): {details.get('Message', '')}"\
                .rstrip(": ")
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if message.startswith("Forbidden: "):  # gcsfs's 403
        return "access denied (403)"
    if isinstance(code, int):
        return f"HTTP {code}: {message}".rstrip(": ")
    if isinstance(error, PermissionError):
        return f"access denied (403): {message}".rstrip(": ")
    name = type(error).__name__
    return f"{name}: {message}" if message and name not in message else message or name


def network_cause(error: BaseException) -> str | None:
    """Why no answer came, in the words a person checks first ('DNS lookup failed',
    'connection refused', 'no route to host', 'timed out', 'TLS failed: ...'), from the
    error or the errors it wraps; None when the store did answer."""
    import ssl  # here: importing tfrecorder stays fast

    for link in _chain(error):
        if isinstance(link, socket.gaierror):
            return "DNS lookup failed"
        if isinstance(link, ssl.SSLCertVerificationError):
            return f"TLS failed: the certificate was refused ({link.verify_message})"
        if isinstance(link, ssl.SSLError):
            return f"TLS failed: {link.reason or link}"
        if isinstance(link, ConnectionRefusedError):
            return "connection refused"
        if isinstance(link, OSError) and link.errno in (errno.ENETUNREACH,
                                                        errno.EHOSTUNREACH):
            return "no route to host"
        if isinstance(link, TimeoutError):  # asyncio's and aiohttp's timeouts too
            return "timed out"
    return None


def _address(error: BaseException) -> str | None:
    """The host:port a connection was tried to, where an error in the chain says
    (aiohttp's connection errors; botocore's name the endpoint's URL)."""
    for link in _chain(error):
        host, port = getattr(link, "host", None), getattr(link, "port", None)
        if isinstance(host, str) and isinstance(port, int):
            return f"{host}:{port}"
        details = getattr(link, "kwargs", None)
        url = details.get("endpoint_url") if isinstance(details, dict) else None
        if isinstance(url, str):
            return urllib.parse.urlsplit(url).netloc or None
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and the errors it wraps, as causes, contexts or (aiohttp, botocore)
    attributes."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        details = getattr(link, "kwargs", None)
        wrapped = details.get("error") if isinstance(details, dict) else None
        link = (getattr(link, "os_error", None) or getattr(link, "certificate_error", None)
                or (wrapped if isinstance(wrapped, BaseException) else None)
                or link.__cause__ or link.__context__)


# How long the probe of a server waits, DNS lookup, connection and TLS together: time for
# a slow network's handshake, where a store's client retried for a minute.
_PROBE_SECONDS = 5.0


def check_reachable(uri: str, endpoint: str, setting: str | None = None) -> None:
    """Fails within seconds when the server at `endpoint` (a URL), which `uri` is read
    from, cannot be reached: as soon as the DNS lookup or the connection fails, or after
    `_PROBE_SECONDS` without an answer. The message names the URI, the host (and
    `setting`, the environment variable the endpoint came from, if one did), the cause
    in `answer`'s words, and what to check: a store's client would retry for a minute or
    more, then blame the bucket or the credentials."""
    cause = _connect(endpoint)
    if cause is not None:
        address = urllib.parse.urlsplit(endpoint).netloc
        named = f" ({setting})" if setting else ""
        raise StorageError(f"{uri}: cannot reach {address}{named}: {cause}. "
                           f"{UNREACHABLE_FIX}", uri=uri)


def _connect(url: str) -> str | None:
    """Why `url`'s server cannot be connected to (TLS handshake included), or None.
    Runs on a daemon thread, so a DNS lookup that hangs is given up on too."""
    import ssl

    parts = urllib.parse.urlsplit(url)
    tls = parts.scheme == "https"
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            address = (parts.hostname, parts.port or (443 if tls else 80))
            with socket.create_connection(address, timeout=_PROBE_SECONDS) as connection:
                if tls:
                    ssl.create_default_context().wrap_socket(
                        connection, server_hostname=parts.hostname).close()
        except Exception as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=attempt, daemon=True, name="tfrecorder-probe")
    thread.start()
    thread.join(_PROBE_SECONDS)
    if not outcome:
        return "timed out"
    error = outcome[0]
    return None if error is None else network_cause(error) or answer(error)
