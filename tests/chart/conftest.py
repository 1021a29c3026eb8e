"""pytest fixtures of the chart tests (helpers: chartlib.py)."""

from chartlib import chart  # noqa: F401  (the session's loaded chart)
