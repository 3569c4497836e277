"""Shared runtime pieces. ``core`` names no benchmark and no method: they register here."""
