"""data wing."""
