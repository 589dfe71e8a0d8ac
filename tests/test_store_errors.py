"""`store_errors`: a store's failure in the words a person checks first, without a store.

The stores themselves (refused connections, emulators that answer 403) are in
test_remote.py; here, the errors their clients raise, built by hand.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tfrecorder.storage import store_errors


def _raised_from(error: BaseException, cause: BaseException) -> BaseException:
    try:
        raise error from cause
    except BaseException as raised:
        return raised


def test_why_no_answer_came_is_found_in_the_errors_a_client_wraps():
    dns = _raised_from(RuntimeError("retries exhausted"), socket.gaierror(-2, "not known"))
    assert store_errors.answer(dns) == "DNS lookup failed"
    refused = _raised_from(OSError("cannot connect"), ConnectionRefusedError(111, "refused"))
    assert store_errors.network_cause(refused) == "connection refused"
    assert store_errors.network_cause(ValueError("bad request")) is None


def test_what_a_store_answered_is_said_in_a_few_words():
    class ClientError(Exception):  # botocore's shape
        response = {"Error": {"Code": "AccessDenied", "Message": "no"},
                    "ResponseMetadata": {"HTTPStatusCode": 403}}

    assert store_errors.answer(ClientError()) == "AccessDenied (403): no"
    assert store_errors.answer(OSError("Forbidden: gs://b/a.jpg")) == "access denied (403)"
    assert store_errors.answer(FileNotFoundError("gs://b/a.jpg")) == "not found (404)"
    assert store_errors.answer(FileNotFoundError(2, "No such file or directory", "a.jpg")) \
        == "no such file or directory"


def test_an_endpoint_that_refuses_is_named_with_the_cause():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    for setting, named in [(None, ""), ("STORAGE_EMULATOR_HOST", " (STORAGE_EMULATOR_HOST)")]:
        try:
            store_errors.check_reachable("gs://bucket/a.jpg", f"http://127.0.0.1:{port}",
                                         setting)
        except OSError as error:  # StorageError
            assert str(error) == (f"gs://bucket/a.jpg: cannot reach 127.0.0.1:{port}{named}: "
                                  f"connection refused. {store_errors.UNREACHABLE_FIX}")
        else:
            raise AssertionError("no error")


def test_a_host_that_does_not_resolve_fails_at_once():
    """A DNS failure is the answer as soon as the lookup fails, not after the probe's
    time (`.invalid` never resolves: RFC 6761)."""
    started = time.monotonic()
    with pytest.raises(OSError, match="cannot reach tables.invalid: DNS lookup failed"):
        store_errors.check_reachable("https://tables.invalid/t.csv", "https://tables.invalid")
    assert time.monotonic() - started < store_errors._PROBE_SECONDS / 2


def test_an_endpoint_that_answers_passes():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        accepted = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
        accepted.start()
        port = listener.getsockname()[1]
        store_errors.check_reachable("gs://bucket/a.jpg", f"http://127.0.0.1:{port}")
        accepted.join(5)
