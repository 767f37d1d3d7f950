"""The gpuval_interrupted callback turns a Ctrl-C into a collect and a report. ansible-core closes
a finished worker's process object before its successor takes the slot; a Ctrl-C landing between
the two must still end the play as an interruption (KeyboardInterrupt, which the callback
handles), not as a ValueError traceback from asking the closed worker whether it is alive (seen
once in an end-to-end run interrupted after its first pair round). And a worker the Ctrl-C
reaches while it writes a result must finish writing before it dies: killed holding the results
queue's lock, it left the play's clean-up waiting forever (an end-to-end run hung that way). And
a Ctrl-C landing while a worker is forked must not be lost in the fork's hooks (an end-to-end run
then ended in "A worker was found in a dead state", exit 1, neither collected nor reported), nor
in a weak reference's callback (the same end, in another end-to-end run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# In a fresh interpreter, as ansible-playbook loads the callback: its patches are process-wide.
CTRL_C_WHILE_A_WORKER_IS_REPLACED = f"""
import multiprocessing.process, runpy, signal
from ansible.executor.process.worker import WorkerProcess
from ansible.executor.task_queue_manager import TaskQueueManager

runpy.run_path({str(REPO / "plugins/callback/gpuval_interrupted.py")!r})["CallbackModule"]()
closed = WorkerProcess.__new__(WorkerProcess)
multiprocessing.process.BaseProcess.__init__(closed)
closed.close()
manager = TaskQueueManager.__new__(TaskQueueManager)
manager._workers = [closed, None]
try:
    manager._signal_handler(signal.SIGINT, None)
except KeyboardInterrupt:
    print("interrupted")
manager._cleanup_processes()
print("cleaned up")
"""


def printed_by(script: str) -> str:
    """What `script` prints in a fresh interpreter, which must exit 0."""
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_a_ctrl_c_while_a_worker_is_replaced_is_an_interruption() -> None:
    assert printed_by(CTRL_C_WHILE_A_WORKER_IS_REPLACED) == "interrupted\ncleaned up\n"


# A worker as ansible-core makes it: SIGINT ends it with os._exit (WorkerProcess._term). The
# signal arrives while it writes a result, inside the results queue's lock.
SIGNALLED_WHILE_WRITING = f"""
import os, runpy, signal
from ansible.executor.task_queue_manager import FinalQueue

runpy.run_path({str(REPO / "plugins/callback/gpuval_interrupted.py")!r})["CallbackModule"]()
queue = FinalQueue()
child = os.fork()
if child == 0:
    signal.signal(signal.SIGINT, lambda *_: os._exit(1))
    send = queue._writer.send_bytes
    def signalled_then_send(data):
        os.kill(os.getpid(), signal.SIGINT)
        send(data)
    queue._writer.send_bytes = signalled_then_send
    queue.put("the worker's result")
    os._exit(0)
os.waitpid(child, 0)
if queue._wlock.acquire(timeout=10):
    queue._wlock.release()
    print("lock free")
    print(queue.get())
else:
    print("lock held by a dead worker")
"""


def test_a_worker_signalled_while_writing_a_result_writes_it_whole_first() -> None:
    assert printed_by(SIGNALLED_WHILE_WRITING) == "lock free\nthe worker's result\n"


# The Ctrl-C lands while ansible-core forks a worker, in the parent's after-fork hooks (where
# logging releases its lock): a KeyboardInterrupt raised there is printed as ignored and lost.
SIGNALLED_WHILE_FORKING = f"""
import multiprocessing.process, os, runpy, signal
from ansible.executor.process.worker import WorkerProcess

def task_of_the_worker(worker):
    held = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    print("held in the worker's task:", signal.SIGINT in held)

WorkerProcess._run = task_of_the_worker
runpy.run_path({str(REPO / "plugins/callback/gpuval_interrupted.py")!r})["CallbackModule"]()

def interrupted(*_):
    raise KeyboardInterrupt

signal.signal(signal.SIGINT, interrupted)
os.register_at_fork(after_in_parent=lambda: [os.kill(os.getpid(), signal.SIGINT), sum(range(9))])
worker = WorkerProcess.__new__(WorkerProcess)
multiprocessing.process.BaseProcess.__init__(worker)
worker.run = lambda: os._exit(0)
try:
    worker.start()
    print("lost")
except KeyboardInterrupt:
    print("interrupted")
worker.join()
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})
WorkerProcess._run(worker)
"""


def test_a_ctrl_c_while_a_worker_is_forked_is_an_interruption_and_reaches_the_worker() -> None:
    assert printed_by(SIGNALLED_WHILE_FORKING) == (
        "interrupted\nheld in the worker's task: False\n"
    )


# The Ctrl-C lands while the play imports an action plugin: its module must not stay half-run.
INTERRUPTED_WHILE_IMPORTING = f"""
import pathlib, runpy, sys, tempfile
from ansible.plugins.loader import action_loader

runpy.run_path({str(REPO / "plugins/callback/gpuval_interrupted.py")!r})["CallbackModule"]()
plugin = pathlib.Path(tempfile.mkdtemp()) / "half_run.py"
plugin.write_text("raise KeyboardInterrupt\\nActionModule = object\\n")
name = "ansible.plugins.action.half_run"
try:
    action_loader._load_module_source(python_module_name=name, path=str(plugin))
except KeyboardInterrupt:
    print("interrupted")
print("forgotten" if name not in sys.modules else "left half-run")
"""


def test_a_ctrl_c_while_a_plugin_is_imported_leaves_no_half_run_module() -> None:
    assert printed_by(INTERRUPTED_WHILE_IMPORTING) == "interrupted\nforgotten\n"


# The Ctrl-C lands in a weak reference's callback, where Python prints the KeyboardInterrupt as
# ignored and drops it; the workers it stopped are then found dead. A manager whose SIGINT
# handler never ran finds its dead worker as before.
CTRL_C_LOST_IN_A_WEAKREF_CALLBACK = f"""
import runpy, signal, weakref
from ansible.executor.task_queue_manager import TaskQueueManager

runpy.run_path({str(REPO / "plugins/callback/gpuval_interrupted.py")!r})["CallbackModule"]()

class Stopped:
    exitcode = -2  # ended by the handler's SIGINT

class Collected:
    pass

def found(manager):
    try:
        return "dead" if manager.has_dead_workers() else "alive"
    except KeyboardInterrupt:
        return "interrupted"

manager = TaskQueueManager.__new__(TaskQueueManager)
manager._workers = []
signal.signal(signal.SIGINT, manager._signal_handler)
print(found(manager))
thing = Collected()
ref = weakref.ref(thing, lambda _: manager._signal_handler(signal.SIGINT, None))
del thing
manager._workers = [Stopped()]
print(found(manager))
signal.signal(signal.SIGINT, signal.default_int_handler)
print(found(manager))
"""


def test_a_ctrl_c_lost_in_a_weakref_callback_is_still_an_interruption() -> None:
    assert printed_by(CTRL_C_LOST_IN_A_WEAKREF_CALLBACK) == "alive\ninterrupted\ndead\n"
