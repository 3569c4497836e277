"""Methods: what the actor knows and how each sleep phase updates it."""
