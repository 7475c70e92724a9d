"""kube-state-metrics beside kueue-doctor in bench/operator_scale.py (--peer ksm): the binary, its command line,
the /metrics parser that finds a Workload's condition series, and a scraper process that stamps when a
condition change becomes visible on /metrics.

KSM runs out of cluster against the bench's apiserver (`--kubeconfig`), with the custom-resource-state
configuration of hack/ksm/workload-conditions.yaml (one `kueue_workload_status_condition` series per condition
of every Workload), as a platform team would run it, alone or with some of its own collectors (the bench runs one
instance without and one with `pods`); its /metrics is served on 127.0.0.1. It serves /metrics from its informer
cache (each object's series are rendered once per watch event), so "visible on /metrics" is its watch latency
plus one scrape.

The scraper runs in a process of its own so that parsing a large /metrics page at 20 Hz never holds the GIL of
the bench process, whose watch threads stamp the bare watch's and kueue-doctor's latencies.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "hack" / "ksm" / "build.sh"
CONFIG = ROOT / "hack" / "ksm" / "workload-conditions.yaml"
METRIC = "kueue_workload_status_condition"  # metricNamePrefix + "_" + the metric's name in CONFIG

# one sample line of the text exposition format: name{labels} value [timestamp]
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Condition:
    """One Workload condition as KSM exposes it: the labels of its series and the value."""

    status: str
    reason: str
    value: float


Key = tuple[str, str, str]  # namespace, Workload name, condition type


def labels_of(text: str) -> dict[str, str]:
    """The labels between the braces of a sample line, unescaped (\\\\, \\", \\n)."""
    return {k: _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), v)
            for k, v in _LABEL.findall(text)}


def family_block(text: str, metric: str) -> str:
    """The part of a /metrics page that holds `metric`'s samples: from its `# TYPE` line to the next family's
    header (the text format keeps a family's samples together); the whole page when it has no such line. A KSM
    page with its pods collector is about 4 KB per Pod, so this keeps a 20 Hz scrape from parsing all of it."""
    head = text.find(f"# TYPE {metric} ")
    if head < 0:
        return text
    end = text.find("\n# ", head + 1)
    return text[head:] if end < 0 else text[head:end + 1]


def samples(text: str, metric: str, *needles: str) -> Iterator[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of `metric` in a /metrics page; with `needles`, only the lines holding all."""
    prefix = metric + "{"
    for line in family_block(text, metric).splitlines():
        if not line.startswith(prefix) or not all(n in line for n in needles):
            continue
        m = _LINE.match(line)
        if m is None or m.group(1) != metric:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        yield labels_of(m.group(2) or ""), value


def condition_series(text: str, metric: str = METRIC, condition_type: str = "",
                     reason: str = "") -> dict[Key, Condition]:
    """Every Workload condition on a KSM /metrics page, by (namespace, name, type); only those of `condition_type`
    and `reason` if given (the scraper asks for the reason it waits for: parsing every series of 10,000 Workloads
    takes 0.3 s, too long for 20 scrapes a second).

    A series without namespace, name or type is skipped; should KSM ever show two series for one condition (it
    replaces the old label set on an update), the last one wins."""
    needles = [f'{k}="{v}"' for k, v in (("type", condition_type), ("reason", reason)) if v]
    out: dict[Key, Condition] = {}
    for lab, value in samples(text, metric, *needles):
        ns, name, ctype = lab.get("namespace", ""), lab.get("name", ""), lab.get("type", "")
        if not (ns and name and ctype) or (condition_type and ctype != condition_type) or \
                (reason and lab.get("reason") != reason):
            continue
        out[(ns, name, ctype)] = Condition(lab.get("status", ""), lab.get("reason", ""), value)
    return out


def first_seen(scrapes: Iterable[tuple[float, dict[Key, Condition]]], want: dict[Key, tuple[str, str]],
               after: dict[Key, float]) -> dict[Key, float]:
    """When each wanted condition (status, reason) first showed: the time of the first scrape, taken after the
    change for that key was sent (`after`), whose page holds it. Keys never seen are absent."""
    seen: dict[Key, float] = {}
    for t, page in scrapes:
        for key, (status, reason) in want.items():
            if key in seen or key not in after or t < after[key]:
                continue
            c = page.get(key)
            if c is not None and c.status == status and c.reason == reason:
                seen[key] = t
    return seen


def argv(binary: Path, kubeconfig: Path, config: Path, port: int, telemetry_port: int, resources: str) -> list[str]:
    """KSM's command line: out of cluster, our Workload conditions, `resources` of its own collectors (comma
    separated; empty: custom resources only), /metrics and its telemetry on 127.0.0.1."""
    args = [str(binary), f"--kubeconfig={kubeconfig}", f"--custom-resource-state-config-file={config}",
            "--host=127.0.0.1", f"--port={port}", "--telemetry-host=127.0.0.1", f"--telemetry-port={telemetry_port}"]
    return [*args, f"--resources={resources}"] if resources else [*args, "--custom-resource-state-only=true"]


def build() -> Path:
    """hack/ksm/build.sh (builds into the cache once, a few minutes cold); the binary."""
    out = subprocess.run(["bash", str(BUILD)], check=True, stdout=subprocess.PIPE, text=True).stdout
    return Path(out.strip().splitlines()[-1]) / "kube-state-metrics"


def scrape_bytes(url: str, timeout: float = 60.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as rsp:
        return bytes(rsp.read())


def scrape(url: str, timeout: float = 60.0) -> str:
    return scrape_bytes(url, timeout).decode()


# ------------------------------------------------------------------------------------------------
# the scraper process
# ------------------------------------------------------------------------------------------------
def _scrape_loop(url: str, condition_type: str, hz: float, want: dict[Key, tuple[str, str]],
                 inbox: Any, outbox: Any, progress: Any) -> None:
    """Child process: scrape at `hz` until told to stop; answer when each wanted condition first showed.

    `inbox` brings {key: time the change was sent} as changes go out, then None to stop; `progress` counts the
    keys seen so far."""
    after: dict[Key, float] = {}
    seen: dict[Key, float] = {}
    durations: list[float] = []
    errors = 0
    reasons = {r for _, r in want.values()}
    reason = next(iter(reasons)) if len(reasons) == 1 else ""
    period = 1.0 / hz
    started = nxt = time.time()
    stop = False
    while not stop:
        while not inbox.empty():
            msg = inbox.get()
            if msg is None:
                stop = True
            else:
                after.update(msg)
        t0 = time.time()
        try:
            text = scrape(url)
        except OSError:
            errors += 1
            text = ""
        t1 = time.time()
        durations.append(t1 - t0)
        if text:
            page = condition_series(text, METRIC, condition_type, reason)
            pending = {k: v for k, v in want.items() if k not in seen}
            seen.update(first_seen([(t1, page)], pending, after))
            progress.value = len(seen)
        nxt = max(nxt + period, time.time())
        time.sleep(max(nxt - time.time(), 0.0))
    outbox.put({"seen": seen, "scrapes": len(durations), "scrape_s": durations, "errors": errors,
                "seconds": time.time() - started})


class Scraper:
    """Scrapes KSM's /metrics at `hz` in a child process while the bench's changes go out."""

    def __init__(self, url: str, condition_type: str, want: dict[Key, tuple[str, str]], hz: float = 20.0) -> None:
        ctx = mp.get_context("spawn")
        self.inbox: Any = ctx.Queue()
        self.outbox: Any = ctx.Queue()
        self.progress: Any = ctx.Value("i", 0)
        self.proc = ctx.Process(target=_scrape_loop, name="ksm-scraper", daemon=True,
                                args=(url, condition_type, hz, want, self.inbox, self.outbox, self.progress))

    def start(self) -> None:
        self.proc.start()

    def sent(self, key: Key, t: float) -> None:
        self.inbox.put({key: t})

    def seen(self) -> int:
        return int(self.progress.value)

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        self.inbox.put(None)
        out: dict[str, Any] = self.outbox.get(timeout=timeout)
        self.proc.join(timeout=10)
        return out
