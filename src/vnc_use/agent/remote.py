# compat-alias: the server client moved up to vnc_use.runs.remote; old imports keep working
from vnc_use.runs.remote import GRAPH_ID, client, follow, outcome, reaching

__all__ = ["GRAPH_ID", "client", "follow", "outcome", "reaching"]
