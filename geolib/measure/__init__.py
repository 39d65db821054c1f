"""measure wing."""
