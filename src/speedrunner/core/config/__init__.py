"""Run configuration: typed sections, layered loading, loud validation."""
