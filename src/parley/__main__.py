"""`python -m parley` runs the command-line interface."""

from parley.cli import main

main()
