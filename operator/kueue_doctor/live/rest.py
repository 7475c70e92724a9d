"""Raw JSON requests through the official client's ApiClient (auth, TLS, proxies from the kubeconfig).

Plain dicts in and out, exactly what the apiserver sends: the engine reads the same shapes from a
file, a LIST and a watch. Blocking: the operator calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

FIELD_MANAGER = "kueue-doctor"
CONNECTIONS = 32  # kept open to the apiserver: 16 writers (publisher.WRITERS) and the LISTs beside them
# The apiserver's priority and fairness (or a proxy) answers 429 with Retry-After when it throttles a client:
# waited for (capped) and tried again, so a throttled write or LIST is delayed, not lost.
THROTTLE_RETRIES = 6
MAX_RETRY_AFTER = 10.0
throttled_total = 0  # 429s received by this process (read into the errors metric by the runtime)


class ApiError(Exception):
    """An HTTP error from the apiserver, with its status code and message."""

    def __init__(self, status: int, method: str, path: str, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


def load_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient from the kubeconfig (or in-cluster credentials); raises ApiError(0) if none works."""
    from kubernetes import client, config

    try:
        if kubeconfig or context:
            config.load_kube_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
        else:
            try:
                config.load_kube_config()  # type: ignore[no-untyped-call]
            except config.ConfigException:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
    except Exception as exc:  # ConfigException, FileNotFoundError, YAML errors: all mean "no credentials"
        raise ApiError(0, "LOAD", "kubeconfig", f"no usable kubeconfig or in-cluster credentials ({exc}); set "
                       "KUBECONFIG or --kubeconfig") from exc
    cfg = client.Configuration.get_default_copy()
    # connections kept open to the apiserver: the publisher's writers and the resync's LISTs at once; urllib3's
    # default (5 per core) would open and drop a connection, TLS handshake included, for each request beyond it
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, CONNECTIONS)
    return client.ApiClient(cfg)


def context_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig context (the current one unless named), "default" when it sets none, as
    kubectl reads it; "default" too when no kubeconfig can be read (the LIST then says what is wrong)."""
    import os

    from kubernetes.config import kube_config

    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except Exception:  # no file, bad YAML, no contexts
        return "default"
    chosen = next((c for c in contexts or [] if c.get("name") == context), None) if context else current
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def retry_after(resp: Any, default: float = 1.0) -> float:
    """Seconds a 429 asks us to wait (its Retry-After header), capped at MAX_RETRY_AFTER."""
    value = (getattr(resp, "headers", None) or {}).get("Retry-After")
    try:
        seconds = float(value) if value is not None else default
    except ValueError:
        seconds = default
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def request(api: Any, method: str, path: str, body: Any = None, query: Mapping[str, str] | None = None,
            content_type: str = "application/json", timeout: float = 60.0, accept: str = "application/json") -> Any:
    """One request; the decoded JSON body, or ApiError (status 0 when the server cannot be reached).

    A 429 (throttled) is retried after the server's Retry-After, up to THROTTLE_RETRIES times.
    """
    for _attempt in range(THROTTLE_RETRIES):
        try:
            return _request_once(api, method, path, body, query, content_type, timeout, accept)
        except Throttled as exc:
            time.sleep(exc.wait)
    return _request_once(api, method, path, body, query, content_type, timeout, accept, final=True)


class Throttled(Exception):
    def __init__(self, wait: float) -> None:
        super().__init__(f"throttled; retry in {wait}s")
        self.wait = wait


def _request_once(api: Any, method: str, path: str, body: Any, query: Mapping[str, str] | None, content_type: str,
                  timeout: float, accept: str, final: bool = False) -> Any:
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    try:
        m, url, hdrs, req_body, post = api.param_serialize(
            method=method, resource_path=path, query_params=list((query or {}).items()), header_params=headers,
            body=body, auth_settings=["BearerToken"])
        resp = api.call_api(m, url, header_params=hdrs, body=req_body, post_params=post, _request_timeout=timeout)
        data = resp.read()
    except Exception as exc:  # urllib3 connection errors, timeouts
        status = getattr(exc, "status", 0) or 0
        raise ApiError(status, method, path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    if resp.status == 429:
        global throttled_total
        throttled_total += 1
        if not final:
            raise Throttled(retry_after(resp))
    if not 200 <= resp.status <= 299:
        text = data.decode("utf-8", "replace") if data else ""
        try:
            message = json.loads(text).get("message", text)
        except (ValueError, AttributeError):
            message = text
        raise ApiError(resp.status, method, path, str(message)[:500])
    return json.loads(data) if data else None


def apply(api: Any, path: str, obj: Mapping[str, Any] | bytes, field_manager: str = FIELD_MANAGER) -> Any:
    """Server-side apply: creates or updates the whole object in one request. `obj` may be its JSON already (the
    publisher keeps queued diagnoses so): sent as it is, never walked nor encoded again."""
    return request(api, "PATCH", path, body=obj if isinstance(obj, bytes) else dict(obj),
                   query={"fieldManager": field_manager, "force": "true"}, content_type="application/apply-patch+yaml")
