"""crafter benchmark."""
