"""The engine: how the items of one run become verdicts.

``judge_run`` judges every check of one run (or chunk, or run dir) in one
pass and folds the failures into roots and consequences; ``judge_chunk`` is
that pass over a chunk of a very large run dir, run by run; ``call_check``
calls one check on one target; ``report_item`` is the body of every
generated test, which only reports its own check's verdict."""
