"""The online wake/sleep loop: actor episodes, budgets, batches, sleep, evaluation, resume."""
