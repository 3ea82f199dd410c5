"""`python -m kvplan` runs the `kvplan` command."""

from kvplan.cli import main

if __name__ == "__main__":
    main()
