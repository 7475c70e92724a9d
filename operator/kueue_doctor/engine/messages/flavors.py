"""What Kueue's flavor assigner says about each flavor, and the messages made of those reasons.

One reason ("insufficient unused quota for cpu in flavor f, 2 more needed") is matched against a table
of (first character, anchored regex, builder) rows and becomes a `FlavorFailure`. Reasons are scanned,
never split on commas, because several contain ", " themselves; text between recognised reasons is
kept as an `UNPARSED` failure. Two message shapes are made of them: the flavor-assignment condition
message ("couldn't assign flavors to pod set main: <reasons>" plus the scheduler's trailers,
`parse_assignment`) and the attempts of a QuotaReserved event's "Flavors considered" list
(`parse_attempts`).

Neighbours: `templates.py` (the result types), `workload.py` (hands flavor-assignment texts here and the
"Flavors considered" list of the QuotaReserved note), `events.py` (finds that list in an event note).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...kube.objects import TRUNCATION_SUFFIX
from .templates import FailureKind, FlavorAttempt, FlavorFailure, ParsedMessage, Template

# =================================================================================================
# Reasons inside one pod set part
# =================================================================================================

_N = r"[^\s,]+"  # a resource / flavor name or a quantity: never contains blanks or commas
_END = r"(?=, |\Z)"  # a reason ends at the ", " separator or at the end of the part

_ReasonBuilder = Callable[[str, "re.Match[str]"], FlavorFailure]


def _rx(body: str) -> re.Pattern[str]:
    return re.compile(body + _END)


def _gi(m: re.Match[str], name: str) -> int | None:
    v = m.group(name)
    return int(v) if isinstance(v, str) and v.isdigit() else None


# flavorassigner.go fitsResourceQuota (v0.19.2:1368); "in cohort" variant: <= v0.9. The hot row: it has
# its own name because `scan_reasons` also reads whole parts made of it with one findall.
_UNUSED_RX = _rx(rf"(?P<reason>insufficient unused quota (?:in cohort )?for (?P<resource>{_N}) in flavor "
                 rf"(?P<flavor>{_N}), (?P<missing>{_N}) more needed)")


def _b_unused(ps: str, m: re.Match[str]) -> FlavorFailure:
    """The hot row: its groups in one m.group call, FlavorFailure built positionally (a third cheaper)."""
    text, resource, flavor, missing = m.group("reason", "resource", "flavor", "missing")
    return FlavorFailure(FailureKind.INSUFFICIENT_UNUSED_QUOTA, ps, text, resource, flavor, missing)


def _b_max(ps: str, m: re.Match[str]) -> FlavorFailure:
    gd = m.groupdict()
    return FlavorFailure(FailureKind.EXCEEDS_MAXIMUM_CAPACITY, ps, m.group(0), resource=gd.get("resource"),
                         flavor=gd.get("flavor"), previous=gd.get("previous"), requested=gd.get("requested"),
                         maximum=gd.get("maximum"))


def _b_resource(ps: str, m: re.Match[str]) -> FlavorFailure:
    gd = m.groupdict()
    return FlavorFailure(FailureKind.RESOURCE_NOT_COVERED, ps, m.group(0), resource=gd.get("resource"),
                         flavor=gd.get("flavor"))


def _b_flavor_not_found(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.FLAVOR_NOT_FOUND, ps, m.group(0), flavor=m.group("flavor"))


def _b_affinity(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.NODE_AFFINITY_MISMATCH, ps, m.group(0), flavor=m.group("flavor"))


def _taint_string(key: str, value: str, effect: str) -> str:
    # k8s.io/api/core/v1 Taint.ToString()
    if not effect:
        return f"{key}={value}:" if value else key
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _b_taint(ps: str, m: re.Match[str]) -> FlavorFailure:
    taint = _taint_string(m.group("key") or "", m.group("value") or "", m.group("effect") or "")
    return FlavorFailure(FailureKind.UNTOLERATED_TAINT, ps, m.group(0), flavor=m.group("flavor"), taint=taint)


def _b_tas_flavor(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.TOPOLOGY_FLAVOR, ps, m.group(0), flavor=m.group("flavor"),
                         detail=m.group("problem"))


_EXCLUDED_ITEM_RX = re.compile(r'(?P<what>[A-Za-z]+(?: "[^"]*")?): (?P<count>\d+)')
_LAYER_RX = re.compile(r"; (?P<fit>\d+)/(?P<needed>\d+) slice\(s\) fit on level (?P<level>[^\s;]+?)(?=; |\Z)")


def _b_tas_fit(ps: str, m: re.Match[str]) -> FlavorFailure:
    excluded: tuple[tuple[str, int], ...] = ()
    raw_excl = m.group("excluded")
    if raw_excl:
        excluded = tuple((e.group("what"), int(e.group("count")))
                         for e in _EXCLUDED_ITEM_RX.finditer(raw_excl))
    layers: tuple[tuple[str, int, int], ...] = ()
    raw_layers = m.group("layers")
    if raw_layers:
        layers = tuple((la.group("level"), int(la.group("fit")), int(la.group("needed")))
                       for la in _LAYER_RX.finditer(raw_layers))
    requested = _gi(m, "req0")
    if requested is None:
        requested = _gi(m, "req1")
    fit = _gi(m, "fit")
    if fit is None and m.group("req0") is not None:
        fit = 0
    return FlavorFailure(FailureKind.TOPOLOGY_PLACEMENT, ps, m.group(0), topology=m.group("topology"), fit=fit,
                         requested_count=requested, unit=m.group("unit0") or m.group("unit1"), excluded=excluded,
                         total_nodes=_gi(m, "total"), layers=layers)


def _b_tas_request(ps: str, m: re.Match[str]) -> FlavorFailure:
    level = next((v for k, v in m.groupdict().items() if k.startswith("lvl") and v is not None), None)
    return FlavorFailure(FailureKind.TOPOLOGY_REQUEST, ps, m.group(0), level=level)


def _b_tas_error(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.TOPOLOGY_ERROR, ps, m.group(0), detail=m.group("detail"))


def _b_node(ps: str, m: re.Match[str]) -> FlavorFailure:
    found = m.groupdict()  # two patterns: one names the node, the other the stale domain
    detail = found.get("node") or found.get("domain")
    return FlavorFailure(FailureKind.NODE_REPLACEMENT, ps, m.group(0), detail=detail)


def _b_slice(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.SLICE_FLAVOR_MISMATCH, ps, m.group(0), flavor=m.group("flavor"),
                         detail=m.group("original"))


def _b_skipped(ps: str, m: re.Match[str]) -> FlavorFailure:
    return FlavorFailure(FailureKind.FLAVOR_SKIPPED, ps, m.group(0), flavor=m.group("flavor"),
                         resource=m.group("resource"))


_EXCL = r'[A-Za-z]+(?: "[^"]*")?: \d+'
# (first character, regex, builder). Tried in order at every reason boundary.
_REASON_TABLE: tuple[tuple[str, re.Pattern[str], _ReasonBuilder], ...] = (
    ("i", _UNUSED_RX, _b_unused),  # first of the "i" rows: _unused_run relies on it
    # flavorassigner.go:1350 (v0.14.2+, v0.13.7+)
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}), previously considered "
              r"podsets requests \((?P<previous>[^()]*)\) \+ current podset request "
              r"\((?P<requested>[^()]*)\) > maximum capacity \((?P<maximum>[^()]*)\)"), _b_max),
    # <= v0.14.1 and <= v0.13.6
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}), request > maximum "
              r"capacity \((?P<requested>[^\s()]+) > (?P<maximum>[^()]+)\)"), _b_max),
    # <= v0.9
    ("i", _rx(rf"insufficient quota for (?P<resource>{_N}) in flavor (?P<flavor>{_N}) in ClusterQueue"),
     _b_max),
    ("b", _rx(rf"borrowing limit for (?P<resource>{_N}) in flavor (?P<flavor>{_N}) exceeded"), _b_max),
    # flavorassigner.go:1071
    ("r", _rx(rf"resource (?P<resource>{_N}) unavailable in ClusterQueue"), _b_resource),
    # flavorassigner.go:1220, 1252; flavor_assigner_attempts.go (Flavors considered only)
    ("f", _rx(rf"flavor (?P<flavor>{_N}) not found"), _b_flavor_not_found),
    ("f", _rx(rf"flavor (?P<flavor>{_N}) doesn't match node affinity"), _b_affinity),
    ("f", _rx(rf"flavor (?P<flavor>{_N}) does not provide resource (?P<resource>{_N})"), _b_resource),
    # flavorassigner.go:1243: "%s" of a corev1.Taint struct: {Key Value Effect TimeAdded}
    ("u", _rx(r"untolerated taint \{(?P<key>[^\s{}]*) (?P<value>[^\s{}]*) (?P<effect>[^\s{}]*)"
              rf"(?: (?P<added>[^{{}}]*))?\}} in flavor (?P<flavor>{_N})"), _b_taint),
    # tas_flavorassigner.go:182-200
    ("F", _rx(r'Flavor "(?P<flavor>[^"]*)" (?P<problem>does not support TopologyAwareScheduling'
              r"|information missing in TAS cache|does not contain the requested level"
              r"|supports only TopologyAwareScheduling)"),
     _b_tas_flavor),
    # tas_flavor_snapshot.go notFitMessage / multiLayerNotFitMessage (v0.19.2:1996-2066)
    ("t", _rx(r'topology "(?P<topology>[^"]*)" (?:'
              r"doesn't allow to fit any of (?P<req0>\d+) (?P<unit0>pod|slice)\(s\)"
              r"|allows to fit only (?P<fit>\d+) out of (?P<req1>\d+) (?P<unit1>pod|slice)\(s\)"
              r"|doesn't allow to fit(?P<layers>(?:; \d+/\d+ slice\(s\) fit on level [^\s;]+?)*))"
              rf"(?:\. Total nodes: (?P<total>\d+); excluded: (?P<excluded>{_EXCL}(?:, {_EXCL})*))?"),
     _b_tas_fit),
    # tas_flavor_snapshot.go: the TAS request does not fit the Topology
    ("n", _rx(rf"no topology domains at level: (?P<lvl1>{_N})"), _b_tas_request),
    ("n", _rx(rf"no requested topology level(?: for slices| for additional slice layer)?: (?P<lvl2>{_N})"),
     _b_tas_request),
    ("p", _rx(rf"podset slice topology (?P<lvl3>{_N}) is above the podset topology {_N}"), _b_tas_request),
    ("a", _rx(rf"additional slice layer topology (?P<lvl4>{_N}) must be at a lower level than {_N}"),
     _b_tas_request),
    ("a", _rx(r"additional slice layer size \d+ must evenly divide parent layer size \d+"), _b_tas_request),
    ("t", _rx(r"topology level not specified"), _b_tas_request),
    ("s", _rx(r"slice topology requested, but slice size not provided"), _b_tas_request),
    # tas_flavor_snapshot.go: errors, free text to the end of the part
    ("i", _rx(r"(?:invalid node selectors: |invalid affinity node selectors: "
              r"|invalid preferred node affinity terms: |invalid podSetUpdate for PodSet )(?P<detail>.*)"),
     _b_tas_error),
    ("u", _rx(r"unable to calculate domain capacities for PodSet (?P<detail>.*)"), _b_tas_error),
    ("c", _rx(r"cannot find replacement assignment for unhealthy node: (?P<node>[^\s,]*)"), _b_node),
    ("C", _rx(r"Cannot replace the node, because the existing topologyAssignment is invalid, as it contains "
              r"the stale domain (?P<domain>.*)"), _b_node),
    # flavorassigner.go:1129 (ElasticJobsViaWorkloadSlices)
    ("c", _rx(rf"could not assign (?P<flavor>{_N}) flavor since the original workload is assigned: "
              r"(?P<original>[^\s,]*)"), _b_slice),
    # flavorassigner.go:1093, 1097
    ("s", _rx(rf"skipping flavor (?P<flavor>{_N}) (?:as it is not found in the nomination mapping for "
              rf"resource (?P<resource>{_N})|due to WorkloadAllowedResourceFlavorAnnotation annotation)"),
     _b_skipped),
)

_REASONS_BY_CHAR: dict[str, tuple[tuple[re.Pattern[str], _ReasonBuilder], ...]] = {}
for _c, _r, _b in _REASON_TABLE:
    _REASONS_BY_CHAR[_c] = (*_REASONS_BY_CHAR.get(_c, ()), (_r, _b))
assert _REASONS_BY_CHAR["i"][0][0] is _UNUSED_RX, "_unused_run gives the scan's result only while it is first"


def unparsed(podset: str, text: str) -> FlavorFailure:
    return FlavorFailure(FailureKind.UNPARSED, podset, text)


_new_tuple = tuple.__new__
# the FlavorFailure fields after `missing`, at their defaults: what an "insufficient unused quota" reason leaves out
_UNUSED_TAIL = tuple(FlavorFailure._field_defaults[f] for f in FlavorFailure._fields[6:])
assert FlavorFailure._fields[:6] == ("kind", "podset", "text", "resource", "flavor", "missing")


def _unused_run(podset: str, part: str) -> list[FlavorFailure] | None:
    """The reasons of a part made only of "insufficient unused quota" reasons, else None.

    Most parts are (a Workload waiting for quota), and one findall reads them in 25% less time than the
    scan's match and builder call per reason. Same result as the scan: when the matches joined by ", "
    give the part back they tile it from its start (each match must be followed by ", " or the end), and
    at each of those boundaries the scan would have tried this row first and taken the same match.
    """
    if not part.startswith("insufficient unused quota "):  # cheap refusal of the other parts
        return None
    found = _UNUSED_RX.findall(part)
    if ", ".join([f[0] for f in found]) != part:
        return None
    # each built by tuple.__new__ from (text, resource, flavor, missing) and the defaults of the other fields: a C
    # call where the NamedTuple's generated __new__ is a Python frame per failure
    head = (FailureKind.INSUFFICIENT_UNUSED_QUOTA, podset)
    return [_new_tuple(FlavorFailure, head + f + _UNUSED_TAIL) for f in found]


def scan_reasons(podset: str, part: str, truncated: bool = False) -> list[FlavorFailure]:
    """Recognise the reasons of one pod set part; never split on commas, never drop text."""
    run = _unused_run(podset, part)
    if run is not None:
        if truncated:
            run[-1] = unparsed(podset, run[-1].text)
        return run
    out: list[FlavorFailure] = []
    n = len(part)
    pos = 0
    gap_start = -1
    while pos < n:
        for rx, build in _REASONS_BY_CHAR.get(part[pos], ()):
            m = rx.match(part, pos)
            if m is not None:
                if gap_start >= 0:
                    out.append(unparsed(podset, part[gap_start:pos - 2]))
                    gap_start = -1
                out.append(build(podset, m))
                pos = m.end() + 2  # skip ", " (the lookahead guarantees it, or the end of the part)
                break
        else:  # no reason starts here: text up to the next ", " is kept as UNPARSED
            if gap_start < 0:
                gap_start = pos
            nxt = part.find(", ", pos)
            if nxt < 0:
                break
            pos = nxt + 2
    if gap_start >= 0:
        out.append(unparsed(podset, part[gap_start:]))
    if truncated and out and out[-1].kind is not FailureKind.UNPARSED:
        out[-1] = unparsed(podset, out[-1].text)
    if not out and part:
        out.append(unparsed(podset, part))
    return out


# =================================================================================================
# The flavor-assignment message (Assignment.Message() + scheduler trailers)
# =================================================================================================

_PODSET_HEADER = "couldn't assign flavors to pod set "
_PODSET_ERROR = "failed to assign flavors to pod set "
# The texts `parse_assignment` reads: pod set parts, a pod set error, or a bare trailer (". Pending ...").
ASSIGNMENT_PREFIXES = (_PODSET_HEADER, _PODSET_ERROR, ". P")
_PODSET_HEADER_RX = re.compile(r"couldn't assign flavors to pod set (?P<podset>[^\s:;]*): ")
_NEXT_PODSET = "; " + _PODSET_HEADER  # pod set parts are joined by "; " (Assignment.Message)
_PODSET_ERROR_RX = re.compile(r"failed to assign flavors to pod set (?P<podset>[^\s:;]*): (?P<error>.*)",
                              re.S)
_TRAILER_RX = re.compile(
    r"\. (?:Pending the preemption of (?P<pending>\d+) workload\(s\)"
    r"|Preempting (?P<failed>\d+) workload\(s\) failed, will retry\."
    r"|Pending the migration of (?P<migrating>\d+) workload\(s\))\Z"
)
_TRAILER_WINDOW = 64
_TRAILER_ENDS = ("workload(s)", "will retry.")  # how every trailer of _TRAILER_RX ends


def _strip_trailers(text: str) -> tuple[str, int | None, int | None, int | None]:
    pending = failed = migrating = None
    for _ in range(3):
        if not text.endswith(_TRAILER_ENDS):  # no trailer (most messages): no regex search
            break
        m = _TRAILER_RX.search(text, max(0, len(text) - _TRAILER_WINDOW))
        if m is None:
            break
        if m.group("pending") is not None and pending is None:
            pending = int(m.group("pending"))
        elif m.group("failed") is not None and failed is None:
            failed = int(m.group("failed"))
        elif m.group("migrating") is not None and migrating is None:
            migrating = int(m.group("migrating"))
        else:
            break
        text = text[:m.start()]
    return text, pending, failed, migrating


def _next_podset_header(body: str, pos: int) -> tuple[re.Match[str] | None, int]:
    """The next "; couldn't assign flavors to pod set X: " from `pos` and where the part before it ends.

    `str.find` of the literal, not a regex search: a search tries the header at every character of the
    reasons and took a quarter of the parse time of a typical quota message.
    """
    sep = body.find(_NEXT_PODSET, pos)
    while sep >= 0:
        h = _PODSET_HEADER_RX.match(body, sep + 2)
        if h is not None:
            return h, sep
        sep = body.find(_NEXT_PODSET, sep + 1)
    return None, len(body)


def parse_assignment(text: str, body: str, truncated: bool) -> ParsedMessage:
    body, pending, failed, migrating = _strip_trailers(body)
    if not body:
        tpl = Template.PENDING_MIGRATION if migrating is not None else Template.FLAVOR_ASSIGNMENT
        return ParsedMessage(tpl, text, truncated=truncated, pending_preemptions=pending,
                             failed_preemptions=failed, pending_migrations=migrating)
    if body.startswith(_PODSET_ERROR):
        m = _PODSET_ERROR_RX.fullmatch(body)
        if m is None:
            return ParsedMessage(Template.UNKNOWN, text, truncated=truncated)
        ps, err = m.group("podset"), m.group("error")
        return ParsedMessage(Template.FLAVOR_ASSIGNMENT_ERROR, text, names={"podSet": ps},
                             podset_errors=((ps, err),), details=err, truncated=truncated,
                             pending_preemptions=pending, failed_preemptions=failed,
                             pending_migrations=migrating)
    h = _PODSET_HEADER_RX.match(body)
    if h is None:
        return ParsedMessage(Template.UNKNOWN, text, truncated=truncated)
    failures: list[FlavorFailure] = []
    while h is not None:
        start, podset = h.end(), h.group("podset")
        h, stop = _next_podset_header(body, start)
        failures.extend(scan_reasons(podset, body[start:stop], truncated and h is None))
    return ParsedMessage(Template.FLAVOR_ASSIGNMENT, text, failures=tuple(failures), truncated=truncated,
                         pending_preemptions=pending, failed_preemptions=failed, pending_migrations=migrating)


# =================================================================================================
# "Flavors considered" of the QuotaReserved event: "<podset>: <flavor>(<mode>[;borrow=N][;reason...]), ... | ..."
# =================================================================================================

_ATTEMPT_SPLIT_RX = re.compile(r";(?! )")  # reasons are joined by ";" and may contain "; " themselves
_MODES = frozenset({"NoFit", "Preempt", "Fit", "DeferredFit", "Unknown"})


def _attempt(podset: str, flavor: str, content: str, text: str, truncated: bool) -> FlavorAttempt:
    tokens = _ATTEMPT_SPLIT_RX.split(content) if content else []
    mode = preemption_mode = None
    borrow: int | None = None
    i = 0
    if tokens and (tokens[0] in _MODES or tokens[0].startswith("preemptionMode=")):
        if tokens[0].startswith("preemptionMode="):
            preemption_mode = tokens[0][len("preemptionMode="):]
            mode = "Preempt" if preemption_mode in ("Preempt", "Reclaim") else None
        else:
            mode = tokens[0]
        i = 1
    if i < len(tokens) and tokens[i].startswith("borrow=") and tokens[i][7:].isdigit():
        borrow = int(tokens[i][7:])
        i += 1
    reasons: list[FlavorFailure] = []
    rest = tokens[i:]
    for j, tok in enumerate(rest):
        reasons.extend(scan_reasons(podset, tok, truncated and j == len(rest) - 1))
    if truncated and not rest and content:
        reasons.append(unparsed(podset, content))
    return FlavorAttempt(podset, flavor, text, mode=mode, preemption_mode=preemption_mode, borrow=borrow,
                         reasons=tuple(reasons))


def parse_attempts(s: str, truncated: bool) -> tuple[FlavorAttempt, ...]:
    if truncated and s.endswith(TRUNCATION_SUFFIX):
        s = s[:-len(TRUNCATION_SUFFIX)]
    out: list[FlavorAttempt] = []
    n = len(s)
    pos = 0
    podset = ""
    expect_podset = True
    while pos < n:
        if expect_podset:
            colon = s.find(": ", pos)
            if colon < 0:
                break
            podset = s[pos:colon]
            pos = colon + 2
            expect_podset = False
        paren = s.find("(", pos)
        if paren < 0:
            break
        flavor = s[pos:paren]
        depth = 0
        close = -1
        for k in range(paren, n):
            ch = s[k]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    close = k
                    break
        if close < 0:  # cut by the 1 KiB event limit
            out.append(_attempt(podset, flavor, s[paren + 1:], s[pos:], True))
            break
        out.append(_attempt(podset, flavor, s[paren + 1:close], s[pos:close + 1], False))
        pos = close + 1
        if s.startswith(", ", pos):
            pos += 2
        elif s.startswith(" | ", pos):
            pos += 3
            expect_podset = True
        else:
            break
    return tuple(out)
