"""The sub-plugins: pytest hooks of one feature each, registered only in a run-health session (``plugin.SUBPLUGINS``); ``core`` holds the session's own hooks."""
