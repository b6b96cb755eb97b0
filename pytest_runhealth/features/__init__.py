"""The models the sub-plugins report: run status, locality, the pre-launch line, roots and consequences, shards, and what a sweep's ledger says."""
