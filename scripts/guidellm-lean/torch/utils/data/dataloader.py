"""torch.utils.data.DataLoader for an IterableDataset with batch_size=1, as guidellm uses it.

num_workers=0 iterates in the calling process. num_workers=1 (guidellm's default) does what torch
does: one worker process (the default multiprocessing context) iterates the dataset, collates each
item and keeps up to prefetch_factor of them queued ahead of the consumer; get_worker_info() in the
worker says id 0 of 1. More workers are not supported (guidellm warns against them too).
"""

import multiprocessing
import queue
import traceback
from typing import Generic, TypeVar

from .dataset import IterableDataset

T_co = TypeVar("T_co", covariant=True)

_worker_info = None


class WorkerInfo:
    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset


def get_worker_info():
    """None in the main process; a WorkerInfo inside the loader's worker process."""
    return _worker_info


def _default_collate(batch):
    return batch


class DataLoader(Generic[T_co]):
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if not isinstance(dataset, IterableDataset):
            raise NotImplementedError("tokentap's torch stub only loads an IterableDataset")
        if shuffle:
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified shuffle option, "
                f"but got shuffle={shuffle}"
            )
        if batch_size != 1 or sampler is not None or batch_sampler is not None:
            raise NotImplementedError("tokentap's torch stub only loads with batch_size=1")
        if num_workers not in (0, 1):
            raise NotImplementedError("tokentap's torch stub runs at most one worker process")
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor if prefetch_factor is not None else 2
        self.collate_fn = collate_fn if collate_fn is not None else _default_collate
        self.generator = generator
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.drop_last = drop_last

    def __iter__(self):
        if self.num_workers == 0:
            return (self.collate_fn([item]) for item in self.dataset)
        return _WorkerIter(self)


def _worker_loop(dataset, collate_fn, worker_init_fn, seed, out_q, stop):
    global _worker_info
    _worker_info = WorkerInfo(id=0, num_workers=1, seed=seed, dataset=dataset)
    try:
        if worker_init_fn is not None:
            worker_init_fn(0)
        for item in dataset:
            batch = collate_fn([item])
            while not stop.is_set():
                try:
                    out_q.put(("item", batch), timeout=0.1)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
        out_q.put(("end", None))
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer, as torch does
        out_q.put(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class _WorkerIter:
    def __init__(self, loader):
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        seed = loader.generator.initial_seed() if loader.generator is not None else 0
        self._done = False
        self._queue = ctx.Queue(maxsize=loader.prefetch_factor)
        self._stop = ctx.Event()
        self._process = ctx.Process(
            target=_worker_loop,
            args=(loader.dataset, loader.collate_fn, loader.worker_init_fn, seed,
                  self._queue, self._stop),
            daemon=True,
        )
        self._process.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        while True:
            try:
                kind, value = self._queue.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._process.is_alive():
                    self._shutdown()
                    raise RuntimeError("DataLoader worker exited unexpectedly") from None
        if kind == "item":
            return value
        self._shutdown()
        if kind == "end":
            raise StopIteration
        raise RuntimeError(f"DataLoader worker failed: {value}")

    def _shutdown(self):
        if self._done:
            return
        self._done = True
        self._stop.set()
        # Drain so a worker blocked on a full queue sees the stop flag.
        try:
            while True:
                self._queue.get_nowait()
        except (queue.Empty, OSError, ValueError):
            pass
        self._process.join(timeout=2)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=2)
        self._queue.cancel_join_thread()
        self._queue.close()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
