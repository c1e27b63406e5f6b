"""`python -m coffer` runs the CLI (used by tests and by clients without `coffer` on PATH)."""

from coffer.cli import main

main()
