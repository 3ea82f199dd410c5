"""`python -m kvplan.cli` (the tests run the CLI this way)."""

from kvplan.cli import main

main()
