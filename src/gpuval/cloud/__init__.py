"""Renting the nodes under test: Lambda Cloud instances launched, guarded and terminated per run.

`lambda_api` speaks Lambda's public Cloud API, `cost` plans and guards what a run may spend,
`state` records what a run launched (in its run folder), `provision` launches and tears down,
and `guard` terminates a run's instances when the controller-side run ends without doing so.
"""
