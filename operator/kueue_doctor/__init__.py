"""kueue-doctor: why is my Kueue Workload not running? Admission (Kueue) or scheduling (Pods).

Public API: `diagnose_objects` turns a snapshot of objects (plain dicts, as `kubectl get -o json`
returns them) into complete AdmissionDiagnosis objects, exactly what the operator writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "diagnose_objects"]


def diagnose_objects(objects: Iterable[Mapping[str, Any]], now: datetime | None = None,
                     grace: timedelta | None = None) -> list[dict[str, Any]]:
    """Diagnose every Workload among `objects`; `now` defaults to the current time (UTC).

    Kinds it does not use are ignored; malformed objects get an `Unknown` verdict, never an exception.
    `grace`: how long an owner may wait for Kueue to make its Workload before it is diagnosed NoWorkload
    (default 30 s; 0 for a dump whose time is only known from its newest timestamp).
    """
    from .engine.diagnose import diagnose
    from .engine.no_workload import GRACE
    from .state import ClusterState

    return diagnose(ClusterState.from_objects(objects), now or datetime.now(UTC),
                    grace=GRACE if grace is None else grace)
