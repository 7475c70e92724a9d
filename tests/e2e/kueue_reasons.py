"""The two reason wordings of Kueue, as a fixture parameter: the same scenario runs under both.

``legacy``: the session's Kueue v0.19.2 as configured (``UnadmittedWorkloadsObservability`` off, its
default): QuotaReserved=False says ``Pending`` / ``Inadmissible``. ``granular``: Kueue restarted with the
gate on (the v0.20 default): ``ExceedsMaxQuota``, ``WaitingForQuota``, ``Misconfigured``, ``Suspended``, ...
with the same messages. The fixture is module-scoped, so pytest runs a module's tests of one wording
together and restarts Kueue twice per module (on and back off), not per test.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from .kube import condition, workload_for

GATE = "UnadmittedWorkloadsObservability"
LEGACY = frozenset({"Pending", "Inadmissible"})


@dataclass(frozen=True)
class KueueReasons:
    """Which wording the running Kueue writes; ``check`` proves it wrote that one and the verdict says so."""

    name: str  # "legacy" | "granular"

    @property
    def granular(self) -> bool:
        return self.name == "granular"

    def fixture(self, stem: str) -> str:
        """The fixture name a scenario records under: the legacy one keeps its historical name."""
        return stem if not self.granular else f"{stem}-granular"

    def check(self, api: Any, namespace: str, job: str, status: Mapping[str, Any], granular_reason: str | set[str],
              wl: Mapping[str, Any] | None = None) -> None:
        """The Job's Workload (``wl``: the one the diagnosis read, else read now) has QuotaReserved=False with this
        wording's reason (``granular_reason``, or one of them, when the gate is on), and the diagnosis
        ``status`` names that reason."""
        wl = wl if wl is not None else workload_for(api, namespace, job)
        qr = condition(wl, "QuotaReserved") if wl else None
        assert qr is not None and qr["status"] == "False", qr
        if self.granular:
            assert qr["reason"] in ({granular_reason} if isinstance(granular_reason, str) else granular_reason), qr
        else:
            assert qr["reason"] in LEGACY, qr
        wording = "granular wording" if self.granular else "legacy wording"
        said = f"Kueue wrote QuotaReserved=False reason {qr['reason']} ({wording}"
        assert said in status["message"], status["message"]


@pytest.fixture(scope="module", params=["legacy", "granular"])
def kueue_reasons(request: pytest.FixtureRequest) -> Iterator[KueueReasons]:
    """Each test that takes it runs under both wordings (``granular``: Kueue restarted with the gate on)."""
    if request.param == "legacy":
        yield KueueReasons("legacy")
        return
    cluster = request.getfixturevalue("cluster")
    gates = {**cluster.local.kueue.feature_gates, GATE: True} if cluster.local is not None else {}
    with cluster.kueue_settings(feature_gates=gates):
        yield KueueReasons("granular")
