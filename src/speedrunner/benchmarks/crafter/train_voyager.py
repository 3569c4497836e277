"""Voyager on Crafter:
``python -m speedrunner.benchmarks.crafter.train_voyager --config_file PATH``.

Runs only method ``voyager`` (curriculum + critic + skill retrieval); the other methods
use ``python -m speedrunner.benchmarks.crafter.train``. Flags: see ``speedrunner.train_cli``.
"""

import sys

from speedrunner.train_cli import main

if __name__ == "__main__":
    sys.exit(main("crafter", "speedrunner.benchmarks.crafter.train_voyager"))
