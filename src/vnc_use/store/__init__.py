"""Where a run's durable state lives, below the agent: SQLite files or one PostgreSQL.

- :mod:`~vnc_use.store.journal` -- the action journal (no action performed twice);
- :mod:`~vnc_use.store.storage` -- where checkpoints, journal and leases live (SQLite,
  PostgreSQL via :mod:`~vnc_use.store.postgres`, the one module that imports psycopg);
- :mod:`~vnc_use.store.lease` -- one run per desktop.
"""
