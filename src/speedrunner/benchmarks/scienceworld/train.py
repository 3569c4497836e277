"""Train on scienceworld:
``python -m speedrunner.benchmarks.scienceworld.train --config_file PATH``.

Flags: see ``speedrunner.train_cli`` (or ``--help``).
"""

import sys

from speedrunner.train_cli import main

if __name__ == "__main__":
    sys.exit(main("scienceworld", "speedrunner.benchmarks.scienceworld.train"))
