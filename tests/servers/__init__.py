"""Real HTTP servers the live-probe tests talk to on 127.0.0.1."""
