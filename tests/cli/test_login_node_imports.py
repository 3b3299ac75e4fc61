"""The login-node path never imports a deep-learning framework.

Importing every login-node package and command must leave no framework in ``sys.modules``.
(The login environment has no framework installed, so a hard import would also fail the probe.)
"""

from __future__ import annotations

import json
import subprocess
import sys

FRAMEWORKS = ("torch", "tensorflow", "keras", "mxnet", "horovod", "jax")

PROBE = """
import json, sys
import ddlbench.cli, ddlbench.spec.load, ddlbench.plan, ddlbench.render, ddlbench.doctor
import ddlbench.execute.api, ddlbench.collect, ddlbench.analyse, ddlbench.report
from ddlbench.cli import main
for name in ("validate", "plan", "submit", "status", "wait", "cancel", "retry", "collect",
             "report", "compare", "doctor", "predict", "init", "docs"):
    main.get_command(None, name)
print(json.dumps(sorted(m.split(".")[0] for m in sys.modules)))
"""


def test_login_node_modules_import_no_framework():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert not loaded & set(FRAMEWORKS), sorted(loaded & set(FRAMEWORKS))
