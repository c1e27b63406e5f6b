"""Coffer's offline evaluation suites (`python -m evals.run`)."""
