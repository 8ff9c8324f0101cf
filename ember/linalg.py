"""``ember.linalg``: the linear-algebra namespace (functions live in ``ember/ops/linalg.py``)."""
