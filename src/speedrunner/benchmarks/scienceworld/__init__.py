"""scienceworld benchmark."""
