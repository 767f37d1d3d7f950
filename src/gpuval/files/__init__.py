"""The controller's files: written whole or not at all, never through a link (atomic), under
names that cannot leave their folder (slugs), in the reports folder of run folders, history
and baselines (archive)."""
