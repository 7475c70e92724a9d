"""Expected faults, said once: one WARNING when the apiserver stops answering, one INFO when it answers again.

An apiserver restart or a network cut is not a crash, but left alone it is logged like one: Kopf logs every
retried request at ERROR ("Request attempt N failed; will retry"), and our own passes, writes and resyncs each
warn about the same refused connection. `OutageFilter` is attached to those loggers: a record about an
unreachable apiserver (a connection refused or reset, a timeout, a 502/503/504) is counted by `Outage`
and dropped (kept, as DEBUG, with --verbose); the first one logs the outage's WARNING. Everything else passes
untouched: a 403, a 422, Kopf's "escalating" (retries exhausted) and any traceback of ours are real errors.
`Outage.watch()` asks the apiserver every few seconds while it is down and logs the recovery once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

from . import rest

log = logging.getLogger("kueue_doctor.outage")

# Kopf's retry line, and the error kinds in it that mean "the apiserver is not there" (not a refusal by it)
KOPF_RETRY = re.compile(r"^Request attempt #?[\d/]+ failed; will retry: (?P<what>.*?) -> (?P<error>.*)$", re.S)
UNREACHABLE_NAMES = ("ClientConnectorError", "ClientConnectionError", "ServerDisconnectedError", "ClientOSError",
                     "ConnectionRefusedError", "ConnectionResetError", "TimeoutError", "ServerTimeoutError",
                     "APIServerError", "ClientPayloadError", "NewConnectionError", "MaxRetryError", "ProtocolError",
                     "RemoteDisconnected", "ReadTimeoutError", "SSLEOFError", "ConnectionAbortedError",
                     "BrokenPipeError")
UNREACHABLE_STATUS = (0, 502, 503, 504)
# whose records are judged: Kopf, ours, and the official client's own retries ("Retrying (Retry(total=2...")
JUDGED = ("kopf", "kueue_doctor", "urllib3")


def unreachable(exc: BaseException) -> bool:
    """Does this error mean the apiserver did not answer (rather than answered no)?"""
    if isinstance(exc, rest.ApiError):
        return exc.status in UNREACHABLE_STATUS
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
        return True
    return any(name in f"{type(e).__name__} {e!r}" for e in _chain(exc) for name in UNREACHABLE_NAMES)


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 8:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


class Outage:
    def __init__(self, api: Any, probe_every: float = 3.0) -> None:
        self.api = api
        self.probe_every = probe_every
        self.since: float | None = None  # unix time of the first failure of this outage
        self.failures = 0
        self._lock = threading.Lock()  # records come from the loop and from worker threads

    def failed(self, what: str) -> None:
        with self._lock:
            self.failures += 1
            if self.since is not None:
                return
            self.since = time.time()
        log.warning(
            "The Kubernetes API does not answer since %s (%s). Retrying quietly until it does: Kopf's watches "
            "(back-off up to 21s), AdmissionDiagnosis writes (every 10s), the Lease and the resync. Verdicts and "
            "metrics keep the last state seen and nothing is lost; further failures are logged only with --verbose. "
            "If this lasts, check the apiserver (its /readyz, its etcd) and the network from this Pod to it.",
            _clock(self.since), what[:300])

    def recovered(self) -> None:
        with self._lock:
            since, failures = self.since, self.failures
            self.since, self.failures = None, 0
        if since is None:
            return
        log.info("The Kubernetes API answers again after %.0fs (down since %s; %d requests failed meanwhile): watches "
                 "resume where they were and verdicts catch up within seconds.", time.time() - since, _clock(since),
                 failures)

    async def watch(self) -> None:
        """Forever: while an outage is on, ask the apiserver every few seconds; log the recovery once."""
        while True:
            await asyncio.sleep(self.probe_every)
            if self.since is None:
                continue
            try:
                await asyncio.to_thread(rest.request, self.api, "GET", "/version", None, None, "application/json", 5.0)
            except rest.ApiError:
                continue
            self.recovered()

    def install(self, verbose: bool, logger: logging.Logger | None = None) -> OutageFilter:
        """Attach the filter to the handlers (after `kopf.configure`): every record reaching the log passes it,
        whichever of Kopf's, ours or the client's loggers it comes from."""
        flt = OutageFilter(self, verbose)
        for handler in (logger or logging.getLogger()).handlers:
            handler.addFilter(flt)
        return flt


class OutageFilter(logging.Filter):
    """Counts and drops log records that only say the apiserver is unreachable (see the module's docstring)."""

    def __init__(self, outage: Outage, verbose: bool) -> None:
        super().__init__()
        self.outage, self.verbose = outage, verbose
        # one record, several handlers: judged (and counted) once. Not an attribute of the record: JSON logs
        # print every attribute.
        self._judged: weakref.WeakKeyDictionary[logging.LogRecord, bool] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            judged = self._judged.get(record)
        if judged is not None:
            return judged
        keep = self._judge(record)
        with self._lock:
            self._judged[record] = keep
        return keep

    def _judge(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.name == log.name or not record.name.startswith(JUDGED):
            return True
        what = self._unreachable(record)
        if what is None:
            return True
        self.outage.failed(what)
        if self.verbose:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return True
        return False

    @staticmethod
    def _unreachable(record: logging.LogRecord) -> str | None:
        """What failed, if the record is only about an unreachable apiserver; else None."""
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            return f"{type(exc).__name__}: {exc}" if unreachable(exc) else None
        args = record.args if isinstance(record.args, tuple) else ()
        errors = [a for a in args if isinstance(a, BaseException)]
        if errors:
            return str(errors[0]) if all(unreachable(e) for e in errors) else None
        match = KOPF_RETRY.match(record.getMessage())
        if match and any(name in match["error"] for name in UNREACHABLE_NAMES):
            return f"{match['what']}: {match['error']}"
        return None


def _clock(at: float | None) -> str:
    return datetime.fromtimestamp(at or 0, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
