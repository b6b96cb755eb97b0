"""RH2xx: trainer runs, one module per thing judged.

``outcome`` (RH201 trainer error, RH207 run summary, RH208 steps complete),
``loss`` (RH202), ``checkpoints`` (RH205 resume pair, RH206 checkpoint intact),
``processes`` (RH203 process alive, RH204 run not stalled: pid files and what
the run last wrote), ``prelaunch`` (RH209-RH211: the workspace before a launch),
``trackers`` (RH212: MLflow and W&B run status)."""
