"""babyai benchmark."""
