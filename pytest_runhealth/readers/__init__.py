"""The run-folder readers: each turns one kind of file (ledger, log, event file, checkpoint, a layout's files) into data, through ``safety``."""
