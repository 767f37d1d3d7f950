"""`gpuval run`: the playbook through ansible-runner (launch), its live progress (progress) and
the hook for providers that rent the nodes (providers)."""
