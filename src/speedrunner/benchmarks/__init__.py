"""Benchmarks: each is declared by a spec in speedrunner.catalog
(an entry point of pyproject.toml)."""
