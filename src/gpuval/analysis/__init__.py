"""Judging: normalised run records in, checks with verdicts and reasons out."""
