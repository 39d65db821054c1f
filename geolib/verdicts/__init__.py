"""verdicts wing: how a claim is decided, from the analysis stages' tables to its row."""
