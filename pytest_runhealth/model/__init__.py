"""What a check is, what it needs and what it returns: the registry, targets, findings, results and the hook specifications."""
