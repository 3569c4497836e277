"""Benchmarks: each registers its config, factory and train entry point in speedrunner.catalog."""
