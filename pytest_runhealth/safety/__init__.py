"""What every reader and writer goes through: read-only opens, the reader contract, redaction, the one output sanitiser, and which patterns from a config may run."""
