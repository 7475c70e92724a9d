"""Shared by the alert, dashboard and Prometheus tests: where promtool/prometheus are, what the operator exports.

The binaries are looked up like hack/prometheus.sh does: ``KUEUE_DOCTOR_PROM_BIN``, then ``PATH``, then
the cache that ``bash hack/prometheus.sh`` unpacks Debian's ``prometheus`` package into. Missing binaries
skip a test locally and fail it when a cluster is required (``KUEUE_DOCTOR_REQUIRE_CLUSTER=1``, or ``CI=true``
without ``KUEUE_DOCTOR_REQUIRE_CLUSTER=0``): CI must run them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "charts" / "kueue-doctor" / "files" / "alerts.rules.yaml"
DASHBOARD = ROOT / "charts" / "kueue-doctor" / "files" / "dashboard.json"
ALERT_TESTS = ROOT / "tests" / "alerts"
ALERTS_DOC = ROOT / "docs" / "alerts.md"
PROMETHEUS_RULE = ROOT / "manifests" / "overlays" / "prometheus-rule" / "prometheusrule.yaml"
# labels Prometheus adds to every scraped series (plus whatever the service discovery relabels in)
TARGET_LABELS = {"job", "instance"}


def required() -> bool:
    flag = os.environ.get("KUEUE_DOCTOR_REQUIRE_CLUSTER")
    if flag is not None:
        return flag == "1"
    return os.environ.get("CI", "").lower() == "true"


def _cache_dir() -> Path:
    cache = os.environ.get("KUEUE_DOCTOR_PROM_CACHE")
    if cache:
        return Path(cache) / "usr" / "bin"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kueue-doctor" / "prometheus" / "usr" / "bin"


def find_binary(name: str) -> str | None:
    explicit = os.environ.get("KUEUE_DOCTOR_PROM_BIN")
    candidates = [Path(explicit) / name] if explicit else []
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(_cache_dir() / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def need_binary(name: str) -> str:
    """The binary's path; skip (locally) or fail (CI) without it."""
    path = find_binary(name)
    if path is None:
        msg = f"{name} not found (install it: bash hack/prometheus.sh)"
        if required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return path


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def load_rules() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return data


def alerts() -> list[dict[str, Any]]:
    return [r for g in load_rules()["groups"] for r in g["rules"] if "alert" in r]


def exported_metrics() -> dict[str, set[str]]:
    """Every sample name the operator's collector exposes (suffixes included) -> its label names.

    Taken from a real scrape of the collector with every family populated, so a renamed metric or label
    in operator/kueue_doctor/live/metrics.py shows up here without a copy to keep in sync.
    """
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from kueue_doctor.live.metrics import Verdict, registry_for
    from kueue_doctor.live.runtime import Options, Runtime

    rt = Runtime(api=None, options=Options(max_workload_series=1))
    now = time.time()
    verdicts = [Verdict("team-a", "wl-1", "main", "cq-a", "Admission", "ExceedsMaxQuota", "QueueAdmin", now - 60),
                Verdict("team-a", "wl-2", "main", "cq-a", "Admission", "WaitingForQuota", "Nobody", now - 30,
                        "InsufficientUnusedQuota", limit_exceeded=True),
                Verdict("team-a", "wl-3", "main", "cq-a", "Running", "Running", "Nobody", now - 10)]
    rt.verdicts.update({(v.namespace, v.name): v for v in verdicts})
    st = rt.stats
    st.passes, st.pass_seconds, st.last_pass, st.kueue_installed = 2, [0.01, 0.02], now, True
    st.writes, st.events, st.errors = {"applied": 1, "error": 1}, {"Workload": 3}, {"ApiError": 1}
    st.access = {"Workload": True, "Pod": False}
    st.time_in_reason.observe(("cq-a", "Admission", "WaitingForQuota"), 90.0)
    st.write_delay.observe((), 0.2)
    text = generate_latest(registry_for(rt)).decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


# ----- a careful PromQL reader: which metrics and label names an expression uses -----
# Syntax itself is checked by promtool (check_exprs_parse); this only has to find names reliably in the
# expressions this repository writes: selectors, matchers, aggregation and vector-matching clauses.

FUNCTIONS_AND_KEYWORDS = {
    # aggregations
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile",
    # clause keywords, binary operators, modifiers
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
    "atan2",
    # literals
    "inf", "nan",
}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# series Prometheus itself makes: allowed besides the operator's
SYNTHETIC = {"up": {"job", "instance"}, "scrape_duration_seconds": {"job", "instance"}}
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|\[[^\]]*\]|[0-9][0-9.eE+-]*|[A-Za-z_:][A-Za-z0-9_:]*|\{|\(|\)|\S')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')\s*,?')


@dataclass
class Selector:
    metric: str
    matchers: dict[str, tuple[str, str]]  # label -> (op, value)


@dataclass
class ExprNames:
    selectors: list[Selector] = field(default_factory=list)
    grouping_labels: set[str] = field(default_factory=set)

    @property
    def metrics(self) -> set[str]:
        return {s.metric for s in self.selectors}


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables replaced by values Prometheus accepts, for parsing and for querying."""
    for var, value in (("$__rate_interval", "1m"), ("$__interval", "1m"), ("$__range", "1h")):
        expr = expr.replace(var, value)
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr)


def _matchers(body: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    pos = 0
    while pos < len(body.rstrip()):
        m = _MATCHER.match(body, pos)
        if not m:
            raise ValueError(f"cannot read matchers {body!r} at {body[pos:]!r}")
        out[m.group(1)] = (m.group(2), m.group(3)[1:-1])
        pos = m.end()
    return out


def _brace_body(expr: str, start: int) -> tuple[str, int]:
    """The text between expr[start] == '{' and its '}' (strings skipped), and the index after the '}'."""
    i = start + 1
    while i < len(expr):
        c = expr[i]
        if c in "\"'":
            m = _STRING.match(expr, i)
            if not m:
                raise ValueError(f"unterminated string in {expr!r}")
            i = m.end()
            continue
        if c == "}":
            return expr[start + 1:i], i + 1
        i += 1
    raise ValueError(f"unterminated {{ in {expr!r}")


def names_in(expr: str) -> ExprNames:
    """Metric selectors and grouping labels of one PromQL expression."""
    tokens: list[tuple[str, int, int]] = []
    pos = 0
    while True:
        m = _TOKEN.search(expr, pos)
        if not m:
            break
        if m.group() == "{":
            body, after = _brace_body(expr, m.start())
            tokens.append(("{}", m.start(), after))
            tokens.append((body, m.start(), after))
            pos = after
            continue
        tokens.append((m.group(), m.start(), m.end()))
        pos = m.end()
    out = ExprNames()
    i = 0
    while i < len(tokens):
        tok = tokens[i][0]
        nxt = tokens[i + 1][0] if i + 1 < len(tokens) else ""
        if tok in GROUPING and nxt == "(":
            j = i + 2
            while tokens[j][0] != ")":
                if tokens[j][0] != ",":
                    out.grouping_labels.add(tokens[j][0])
                j += 1
            i = j + 1
            continue
        if tok == "{}":  # a selector without a metric name: {__name__=...}; not used here
            raise ValueError(f"selector without a metric name in {expr!r}")
        if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", tok):
            if tok in FUNCTIONS_AND_KEYWORDS or nxt == "(":
                i += 1
                continue
            matchers: dict[str, tuple[str, str]] = {}
            if nxt == "{}":
                matchers = _matchers(tokens[i + 2][0])
                i += 2
            out.selectors.append(Selector(tok, matchers))
        i += 1
    return out


def check_names(expr: str, exported: dict[str, set[str]]) -> list[str]:
    """Problems: metrics the operator does not export, label names those metrics do not have."""
    problems = []
    names = names_in(grafana_to_promql(expr))
    known = {**{k: v | TARGET_LABELS for k, v in exported.items()}, **SYNTHETIC}
    all_labels: set[str] = set(TARGET_LABELS)
    for sel in names.selectors:
        if sel.metric not in known:
            problems.append(f"{sel.metric}: not exported by the operator")
            continue
        all_labels |= known[sel.metric]
        for label in sel.matchers:
            if label not in known[sel.metric]:
                problems.append(f"{sel.metric}{{{label}}}: no such label (has {sorted(known[sel.metric])})")
    for label in names.grouping_labels - all_labels:
        problems.append(f"by/on ({label}): no metric of the expression has it")
    return problems


def check_exprs_parse(promtool: str, exprs: dict[str, str], workdir: Path) -> str:
    """promtool's parser on every expression, as recording rules of one generated rules file; '' if all parse."""
    rules = {"groups": [{"name": "parse", "rules": [
        {"record": f"check:expr_{i}", "expr": grafana_to_promql(e)} for i, e in enumerate(exprs.values())]}]}
    path = workdir / "exprs.rules.yaml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    res = run([promtool, "check", "rules", str(path)])
    if res.returncode == 0:
        return ""
    index = "\n".join(f"  check:expr_{i} = {k}: {e}" for i, (k, e) in enumerate(exprs.items()))
    return f"{res.stdout}{res.stderr}\n{index}"
