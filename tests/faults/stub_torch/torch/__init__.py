"""A stub ``torch`` for the plumbing suite: raises PyTorch's CUDA out-of-memory error, in its wording,
from a module really named torch (so the traceback's frames and exception class read as they do)."""


class OutOfMemoryError(RuntimeError):
    pass


def cuda_step() -> None:
    raise OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which "
        "1.12 GiB is free. Including non-PyTorch memory, this process has 22.51 GiB memory in use. Of the "
        "allocated memory 21.90 GiB is allocated by PyTorch, and 187.55 MiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )
