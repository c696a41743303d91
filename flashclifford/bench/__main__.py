"""`python -m flashclifford.bench`: see flashclifford.bench.cli."""

import sys

from .cli import main

sys.exit(main())
