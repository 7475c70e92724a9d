"""Expected faults are said once (live/outage.py), real errors stay loud, a probe hanging up is no traceback.

The records come from the real libraries where they can: a real aiohttp connection error in Kopf's retry line,
urllib3's own "Retrying" warning from a real request to a closed port, our ApiError as the publisher logs it.
The end-to-end version (a real outage in front of the real apiserver) is tests/e2e/test_outage_logs.py.
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import struct
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import urllib3

from kueue_doctor.live import rest
from kueue_doctor.live.outage import Outage
from kueue_doctor.live.service import Health, QuietServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def captured() -> Iterator[tuple[list[logging.LogRecord], Outage]]:
    """A handler on a private root-like logger tree, with the filter installed as service.serve installs it."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    handler = Keep(level=logging.DEBUG)
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    outage = Outage(api=None)
    flt = outage.install(verbose=False, logger=root)
    try:
        yield records, outage
    finally:
        root.removeHandler(handler)
        handler.removeFilter(flt)
        root.setLevel(old)


async def aiohttp_error(port: int) -> BaseException:
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/version"):
            pass
    except aiohttp.ClientError as exc:
        return exc
    raise AssertionError("connected to a closed port")


def kopf_retry_line(idx: str, url: str, exc: BaseException, outcome: str = "will retry") -> None:
    """The line Kopf 1.45 logs per failed API request (kopf/_cogs/clients/api.py), with a real exception."""
    logging.getLogger("kopf._cogs.clients.api").error(f"Request attempt {idx} failed; {outcome}: GET {url} -> {exc!r}")


def messages(records: list[logging.LogRecord]) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in records]


def test_an_outage_is_one_warning_however_many_retries_and_one_info_when_it_ends(
        captured: tuple[list[logging.LogRecord], Outage]) -> None:
    records, outage = captured
    port = closed_port()
    exc = asyncio.run(aiohttp_error(port))
    assert type(exc).__name__ == "ClientConnectorError"
    for n in range(1, 8):
        kopf_retry_line(f"#{n}/9", f"https://127.0.0.1:{port}/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true", exc)
    pool = urllib3.PoolManager(retries=urllib3.Retry(total=2, backoff_factor=0))
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        pool.request("GET", f"http://127.0.0.1:{port}/version")  # logs "Retrying (Retry(total=1...))" twice
    logging.getLogger("kueue_doctor.publisher").warning(
        "Cannot write AdmissionDiagnosis %s/%s: %s. Retrying in a few seconds.", "team-a", "wl",
        rest.ApiError(0, "PATCH", "/apis/x", "connection refused"))
    try:
        raise rest.ApiError(503, "GET", "/apis/x", "the server is currently unable to handle the request")
    except rest.ApiError:
        logging.getLogger("kueue_doctor.runtime").exception("Diagnosis pass failed; retrying.")

    (warning,) = [r for r in records if r.levelno >= logging.WARNING]
    assert warning.name == "kueue_doctor.outage"
    assert "does not answer since" in warning.getMessage() and "Retrying quietly" in warning.getMessage()
    assert "workloads?watch=true" in warning.getMessage()  # what failed first
    assert outage.failures == 7 + 2 + 1 + 1
    outage.recovered()
    outage.recovered()  # once only
    recovery = [m for m in messages(records) if "answers again after" in m[1]]
    assert recovery == [("INFO", recovery[0][1])] and "11 requests failed meanwhile" in recovery[0][1]


def test_real_errors_stay_loud(captured: tuple[list[logging.LogRecord], Outage]) -> None:
    records, outage = captured
    port = closed_port()
    exc = asyncio.run(aiohttp_error(port))
    kopf_retry_line("#9/9", f"https://127.0.0.1:{port}/api/v1/pods", exc, outcome="escalating")  # retries ran out
    logging.getLogger("kopf._cogs.clients.api").error(
        "Request attempt #1/9 failed; will retry: GET https://x/api/v1/pods -> APIForbiddenError('pods is forbidden')")
    logging.getLogger("kueue_doctor.publisher").warning("Cannot write AdmissionDiagnosis %s/%s: %s.", "a", "b",
                                                         rest.ApiError(422, "PATCH", "/x", "invalid"))
    try:
        raise KeyError("status")
    except KeyError:
        logging.getLogger("kueue_doctor.runtime").exception("Diagnosis pass failed")
    assert [r.levelname for r in records] == ["ERROR", "ERROR", "WARNING", "ERROR"]
    assert outage.since is None


def test_verbose_keeps_the_retries_as_debug() -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("kueue_doctor.test_verbose")
    handler = logging.Handler(level=logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.propagate = False
    Outage(api=None).install(verbose=True, logger=logger)
    logger.warning("Cannot list: %s", rest.ApiError(0, "GET", "/x", "refused"))
    assert [r.levelname for r in records][-1] == "DEBUG"


def test_a_health_probe_that_hangs_up_leaves_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    class Slow(Health):
        def check(self) -> tuple[int, dict[str, Any]]:
            time.sleep(0.3)  # the prober is gone by the time the answer is written
            return 200, {"x": "y" * 200_000}

    class _Runtime:
        ready = asyncio.Event()

    server = QuietServer(("127.0.0.1", 0), Slow(_Runtime(), 600.0).handler())  # type: ignore[arg-type]
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        time.sleep(1.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as rsp:
            assert rsp.status == 200  # still serving
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err


def test_other_handler_errors_are_still_printed() -> None:
    server = QuietServer(("127.0.0.1", 0), lambda *a: None)
    buf = io.StringIO()
    old, sys.stderr = sys.stderr, buf
    try:
        try:
            raise ValueError("a real bug")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
    finally:
        sys.stderr = old
        server.server_close()
    assert "ValueError: a real bug" in buf.getvalue()
