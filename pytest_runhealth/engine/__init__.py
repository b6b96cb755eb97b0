"""The engine: how the items of one run become verdicts.

``judge_run`` decides what one pass judges (a run, a chunk of runs, or a run
dir's own checks) and keeps its verdicts for its items; ``judge_checks`` is
the one judging path, the checks of one run called and folded into roots and
consequences, used by a run's pass and by ``judge_chunk`` for each run of a
chunk of a very large run dir; ``call_check`` calls one check on one target;
``report_item`` is the body of every generated test, which only reports its
own check's verdict."""
