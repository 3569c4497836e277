"""Train on babyai: ``python -m speedrunner.benchmarks.babyai.train --config_file PATH``.

Flags: see ``speedrunner.train_cli`` (or ``--help``).
"""

import sys

from speedrunner.train_cli import main

if __name__ == "__main__":
    sys.exit(main("babyai", "speedrunner.benchmarks.babyai.train"))
