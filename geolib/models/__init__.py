"""models wing."""
