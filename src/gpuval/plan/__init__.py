"""What a run will do, decided before anything starts: the step-name registry (steps),
the pairs of hosts and their rounds (pair_rounds) and the one mpirun launch contract
(mpirun)."""
