"""SpeedRunner: online learning of programmatic agent skills.

Importing this package is cheap and has no side effects: no environment, JVM or
server starts until a benchmark or method is looked up by name.
"""

__version__ = "0.1.0"
