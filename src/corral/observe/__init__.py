"""observe layer."""
