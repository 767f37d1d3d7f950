"""Slurm on the controller: the nodes of a partition as Slurm reports them (nodes), and the
`scontrol` calls that read them and drain or resume a node (scontrol)."""
