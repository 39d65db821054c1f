"""report wing."""
