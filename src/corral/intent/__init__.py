"""intent layer."""
