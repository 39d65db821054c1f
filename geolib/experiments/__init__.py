"""experiments wing."""
