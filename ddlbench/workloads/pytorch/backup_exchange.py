"""The gradient exchange of backup workers, run by a watcher thread on every rank.

The training thread of a rank computes; this module's thread communicates. Per step ``k``
(docs/backup-workers.md has the full argument why this cannot deadlock or mix steps):

1. a rank whose training thread finished step ``k`` takes a ticket, ``store.add("step/k",
   1)``; the ``N``-th ticket's holder sets the key ``full/k``;
2. the watcher thread of every rank waits (``store.wait``, no polling) for ``full/k``, then
   decides under a lock shared with the training thread: the rank is **kept** when it took a
   ticket ``<= N``, else **dropped**, and a dropped rank's training thread will never take a
   ticket for ``k`` (its work on ``k``, finished or not, is discarded);
3. the watcher thread joins the step's one allreduce at once, with the gradient (kept) or
   zeros (dropped), whatever the training thread is doing; on a GPU from a CUDA stream of its
   own, so the collective does not queue behind the training thread's kernels;
4. with buffers (BatchNorm's running statistics), it broadcasts the buffers of the lowest
   kept rank, as DDP broadcasts rank 0's;
5. the result waits for the training thread, which applies it before it starts step ``k+1``.

A slow rank's watcher runs ahead of its training thread: it contributes zeros to the steps
the fast ranks complete meanwhile, and the training thread skips the steps decided without it.

A :class:`Heartbeat` thread bumps a per-rank counter in the store every second and watches
the others': a rank whose counter stops for :data:`DEAD_AFTER_S` is named, and the run fails,
instead of hanging; a store that stops answering (rank 0 ended) fails the run too.
Standard library and torch only; Python 3.8 syntax.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

import torch

#: seconds between two heartbeats of a rank
BEAT_S = 1.0
#: a rank whose heartbeat has not moved for this long has ended or lost its connection
DEAD_AFTER_S = 20.0
#: a rank whose heartbeat has not moved for this long is named when the store goes away
STALE_S = 5 * BEAT_S
#: the store key where the first rank to find dead ranks names them for the others
DEAD_KEY = "dead"
#: the value of ``full/k`` that ends the watcher (set by a rank after its last step)
END = b"end"


class ExchangeError(RuntimeError):
    """The exchange failed: a rank ended, or the store stopped answering."""


class Result:
    """Step ``k``'s outcome: the averaged flat gradient, the buffers of the lowest kept
    rank (or None), and the dropped ranks."""

    def __init__(self, grad: torch.Tensor, buffers: Optional[torch.Tensor], dropped: List[int]):
        self.grad, self.buffers, self.dropped = grad, buffers, dropped


class Exchange:
    """The watcher thread of one rank (see the module docstring)."""

    def __init__(
        self, stores: Any, rank: int, world: int, needed: int, device: torch.device, sizes: Any
    ) -> None:
        # one store client per thread: a client's ``wait`` holds its connection
        self.claim_store, self.store, beat_store = stores
        self.rank, self.world, self.needed = rank, world, needed
        self.device = device
        self.n_grad, self.n_buf, self.dtype = sizes
        self.cond = threading.Condition()
        self.decided: Set[int] = set()
        self.claims: Dict[int, Tuple[int, Any]] = {}
        self.results: Dict[int, Result] = {}
        self.error: Optional[BaseException] = None
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.thread = threading.Thread(target=self._run, name="ddlbench-backup", daemon=True)
        self.beat = Heartbeat(beat_store, rank, world, self.fail)

    def start(self) -> Exchange:
        self.thread.start()
        self.beat.start()
        return self

    # -- the training thread's side ---------------------------------------------------------
    def is_decided(self, step: int) -> bool:
        """Whether step ``step`` was decided without this rank (its work would be dropped)."""
        return step in self.decided

    def claim(self, step: int, payload: Any) -> Optional[int]:
        """Take this rank's ticket for ``step`` with its finished ``payload`` (flat gradient,
        flat buffers, CUDA event); None when the step was already decided without it."""
        with self.cond:
            if step in self.decided:
                return None
            store, key = self.claim_store, f"step/{step}"
            ticket = int(self._store(lambda: store.add(key, 1), f"take a ticket ({key})"))
            self.claims[step] = (ticket, payload)
            if ticket == self.needed:
                self._store(lambda: store.set(f"full/{step}", "go"), "mark the step full")
            return ticket

    def result(self, step: int) -> Result:
        """Wait for step ``step``'s result (raises the exchange's error, if any)."""
        with self.cond:
            while step not in self.results:
                if self.error is not None:
                    raise self.error
                self.cond.wait(0.5)
            return self.results.pop(step)

    def close(self, last_step: int) -> None:
        """After this rank's last step: end every rank's watcher (nothing waits for a later
        step) and stop the heartbeat."""
        if self.error is None:
            key = f"full/{last_step + 1}"
            self._store(lambda: self.claim_store.set(key, END), "end the exchange")
            self.thread.join(timeout=60)
        self.beat.stop()

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            if self.error is None:
                self.error = exc
            self.cond.notify_all()

    # -- the watcher thread -----------------------------------------------------------------
    def _run(self) -> None:
        step = 0
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # a new thread starts on device 0
        try:
            while True:
                key = f"full/{step}"
                self._store(lambda k=key: self.store.wait([k]), f"wait for {key}")
                if self._store(lambda k=key: self.store.get(k), f"read {key}") == END:
                    return
                self._step(step)
                step += 1
        except BaseException as exc:  # noqa: B036 - the training thread re-raises it
            self.fail(exc if isinstance(exc, ExchangeError) else self._explain(step, exc))

    def _step(self, step: int) -> None:
        with self.cond:
            self.decided.add(step)
            ticket, payload = self.claims.pop(step, (None, None))
        kept = ticket is not None and ticket <= self.needed
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                result = self._reduce(payload if kept else None)
            self.stream.synchronize()
        else:
            result = self._reduce(payload if kept else None)
        with self.cond:
            self.results[step] = result
            self.cond.notify_all()
        if self.rank == 0 and step > 0:  # every watcher is past step - 1: its allreduce ended
            for key in (f"step/{step - 1}", f"full/{step - 1}"):
                self._store(lambda k=key: self.store.delete_key(k), f"delete {key}")

    def _reduce(self, payload: Any) -> Result:
        """The masked allreduce ``[gradient x keep, one-hot(rank) x keep]`` (the gradient is
        already divided by N), then the buffers' broadcast from the lowest kept rank."""
        import torch.distributed as dist

        if payload is not None:
            grad, buffers, event = payload
            if event is not None:
                self.stream.wait_event(event)  # type: ignore[union-attr]
        else:
            grad, buffers = torch.zeros(self.n_grad, dtype=self.dtype, device=self.device), None
        flag = torch.zeros(self.world, dtype=self.dtype, device=self.device)
        flag[self.rank] = 1.0 if payload is not None else 0.0
        buf = torch.cat([grad, flag])
        dist.all_reduce(buf)
        mask = buf[-self.world :].tolist()
        dropped = [r for r in range(self.world) if mask[r] < 0.5]
        kept_buffers = None
        if self.n_buf:
            src = min(r for r in range(self.world) if r not in dropped)
            if self.rank != src or buffers is None:
                buffers = torch.empty(self.n_buf, dtype=torch.float64, device=self.device)
            dist.broadcast(buffers, src)
            kept_buffers = buffers
        return Result(buf[: -self.world], kept_buffers, dropped)

    def _store(self, call: Any, what: str) -> Any:
        try:
            return call()
        except Exception as exc:
            raise ExchangeError(
                f"backup workers: rank {self.rank} could not {what} in the rendezvous store "
                f"served by rank 0 ({exc}): rank 0 ended or the store's connection broke"
            ) from exc

    def _explain(self, step: int, exc: BaseException) -> ExchangeError:
        """The collective of ``step`` failed: name the ranks that stopped beating."""
        deadline = time.monotonic() + DEAD_AFTER_S + 10 * BEAT_S  # a loaded node beats late
        while time.monotonic() < deadline and not self.beat.lost:
            time.sleep(0.2)
        lost = self.beat.lost
        who = f"rank(s) {lost} stopped answering" if lost else "no rank stopped beating"
        return ExchangeError(
            f"backup workers: rank {self.rank}: the gradient exchange of step {step} failed "
            f"({exc}); {who}"
        )


class Heartbeat:
    """Bumps this rank's counter in the store every :data:`BEAT_S` and names the ranks whose
    counter stops moving for :data:`DEAD_AFTER_S` (calling ``on_failure``)."""

    def __init__(self, store: Any, rank: int, world: int, on_failure: Any) -> None:
        self.store, self.rank, self.world = store, rank, world
        self.on_failure = on_failure
        self.lost: List[int] = []
        self._stop = threading.Event()
        self._seen: Dict[int, Tuple[bytes, float]] = {}
        self.thread = threading.Thread(target=self._run, name="ddlbench-heartbeat", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):  # the store may be gone at the end
            self.store.set(f"beat/{self.rank}", "done")

    def _run(self) -> None:
        keys = [f"beat/{r}" for r in range(self.world)]
        while not self._stop.is_set():
            try:
                self.store.add(f"beat/{self.rank}", 1)
                values = [self.store.get(k) if self.store.check([k]) else b"" for k in keys]
                named = self.store.get(DEAD_KEY) if self.store.check([DEAD_KEY]) else b""
            except Exception as exc:
                if not self._stop.is_set():
                    self.on_failure(self._store_lost(exc))
                return
            if named:  # another rank found the dead ones first: say the same
                self._fail([int(r) for r in named.decode().split(",")])
                return
            self._judge(values)
            self._stop.wait(BEAT_S)

    def _store_lost(self, exc: BaseException) -> ExchangeError:
        """The store stopped answering: rank 0 ended; name the ranks already silent then."""
        now = time.monotonic()
        silent = [r for r, (v, t) in sorted(self._seen.items())
                  if v not in (b"", b"done") and now - t > STALE_S]  # fmt: skip
        before = f"; rank(s) {silent} stopped answering before it" if silent else ""
        return ExchangeError(
            f"backup workers: rank {self.rank} lost the rendezvous store served by rank 0 "
            f"({exc}): rank 0 ended or its connection broke{before}"
        )

    def _fail(self, lost: List[int]) -> None:
        self.lost = lost
        self.on_failure(
            ExchangeError(
                f"backup workers: rank(s) {lost} stopped answering (no heartbeat for "
                f"{DEAD_AFTER_S:.0f} s): they ended or lost their connection"
            )
        )

    def _judge(self, values: List[bytes]) -> None:
        now = time.monotonic()
        lost = []
        for r, value in enumerate(values):
            last = self._seen.get(r)
            if last is None or last[0] != value:
                self._seen[r] = (value, now)
            elif value not in (b"", b"done") and now - last[1] > DEAD_AFTER_S:
                lost.append(r)
        if lost and not self._stop.is_set():
            # tell the others before failing: rank 0 serves the store, and once it ends the
            # others could only say that the store went away, not which rank stopped first
            with contextlib.suppress(Exception):
                self.store.set(DEAD_KEY, ",".join(str(r) for r in lost))
            if self.rank == 0:
                self._stop.wait(3 * BEAT_S)
            self._fail(lost)
