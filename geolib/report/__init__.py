"""report wing: the book and the runs' records."""
