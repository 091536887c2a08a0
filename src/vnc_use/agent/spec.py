# compat-alias: RunSpec moved up to vnc_use.runs.spec; old imports keep working
from vnc_use.runs.spec import SPEC_NAMESPACE, RunSpec

__all__ = ["SPEC_NAMESPACE", "RunSpec"]
