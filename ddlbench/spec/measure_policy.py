"""How much a spec must measure before ddlbench warns, without the spec's models.

``validate`` and ``plan`` warn below these (:mod:`ddlbench.plan.advice`); the report says how
many measured windows fell below the minimum (:mod:`ddlbench.report.narrative`) without
importing the spec models (pydantic: 0.2-0.3 s of every report otherwise).
"""

from __future__ import annotations

#: fewer repeats give a very wide interval (none from one) and tests too weak to call a change
MIN_REPEATS = 3
#: a throughput run's measured window shorter than this is mostly the moment it ran in
MIN_MEASURE_SECONDS = 5.0
