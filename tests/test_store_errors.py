"""`store_errors`: a store's failure in the words a person checks first, without a store.

The stores themselves (refused connections, emulators that answer 403) are in
test_remote.py; here, the errors their clients raise, built by hand.
"""

from __future__ import annotations

import socket
import threading

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


def test_an_endpoint_that_refuses_is_named_with_the_cause(monkeypatch):
    # An earlier test's emulator may have left its address in the environment; the
    # message then names the variable, which is another test's concern.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    try:
        store_errors.check_reachable("gs://bucket/a.jpg", f"http://127.0.0.1:{port}")
    except OSError as error:  # StorageError
        assert f"cannot reach the store at 127.0.0.1:{port}: connection refused" in str(error)
    else:
        raise AssertionError("no error")
    store_errors.check_reachable("s3://bucket/a.jpg", None)  # not probed: nothing to say


def test_an_endpoint_that_answers_passes():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        accepted = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
        accepted.start()
        port = listener.getsockname()[1]
        store_errors.check_reachable("gs://bucket/a.jpg", f"http://127.0.0.1:{port}")
        accepted.join(5)
