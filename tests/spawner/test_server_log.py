"""The line of a dead server's log that names its cause, redacted and bounded; the log read back
without links and only when it is the server account's; stderr sent to it by the preexec."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kubelab.spawner.server_log import MAX_CAUSE, crash_cause, log_name, read_tail, redact, redirect_stderr

TOKEN = "0123456789abcdef0123456789abcdef"

IMPORT_CRASH = """\
[I 2026-11-24 02:50:31.100 ServerApp] Extension package kubelab.server_extension took 0.2s to import
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/opt/kubelab/lib/python3.11/site-packages/foo_ext/__init__.py", line 1, in <module>
    import foo
ModuleNotFoundError: No module named 'foo'
"""

BAD_CONFIG = """\
[I 2026-11-24 02:50:32.001 ServerApp] Package jupyterlab took 0.0000s to import
[W 2026-11-24 02:50:32.500 ServerApp] A `_jupyter_server_extension_points` function was not found
[C 2026-11-24 02:50:32.838 ServerApp] Bad config encountered during initialization: The 'port' \
trait of a ServerApp instance expected an int, not the str 'eighty'
"""


def test_a_traceback_is_named_by_its_exception_line() -> None:
    assert crash_cause(IMPORT_CRASH) == "ModuleNotFoundError: No module named 'foo'"


def test_the_last_of_chained_tracebacks_wins_and_later_info_lines_do_not() -> None:
    chained = (
        "Traceback (most recent call last):\n  File 'a', line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n  File 'b', line 2\nRuntimeError: no kernel spec\n"
        "[I 2026-11-24 02:50:33.000 ServerApp] Shutting down 0 kernels\n"
    )
    assert crash_cause(chained) == "RuntimeError: no kernel spec"


def test_a_traceback_jupyter_logged_indented_is_named_by_its_exception_line() -> None:
    logged = (
        "[W 2026-11-24 02:50:31.100 ServerApp] foo_ext | error linking extension: No module named 'foo'\n"
        "    Traceback (most recent call last):\n"
        '      File "/opt/lib/jupyter_server/extension/manager.py", line 346, in link_point\n'
        "        point.link(self.serverapp)\n"
        "    ModuleNotFoundError: No module named 'foo'\n"
        "[I 2026-11-24 02:50:31.200 ServerApp] Serving notebooks from local directory: /srv\n"
    )
    assert crash_cause(logged) == "ModuleNotFoundError: No module named 'foo'"


def test_a_critical_jupyter_line_is_named_without_its_prefix() -> None:
    assert crash_cause(BAD_CONFIG) == (
        "Bad config encountered during initialization: The 'port' trait of a ServerApp instance "
        "expected an int, not the str 'eighty'"
    )


def test_an_error_line_after_an_old_traceback_wins() -> None:
    log = IMPORT_CRASH + "[E 2026-11-24 02:50:40.000 ServerApp] Port 8888 is already in use\n"
    assert crash_cause(log) == "Port 8888 is already in use"


def test_otherwise_the_last_line_written_colours_and_controls_removed() -> None:
    assert crash_cause("starting\n\x1b[31mkubelab: the 2 T4 GPU(s) were taken\x1b[0m\x07\n\n") == (
        "kubelab: the 2 T4 GPU(s) were taken"
    )
    assert crash_cause("") == "" and crash_cause("\n  \n") == ""


def test_tokens_and_passwords_are_redacted() -> None:
    assert redact(f"JUPYTERHUB_API_TOKEN={TOKEN} next") == "JUPYTERHUB_API_TOKEN=[redacted] next"
    assert redact("GET /api?token=s3cr3t-value&x=1") == "GET /api?token=[redacted]&x=1"
    assert redact("Authorization: token abcdefghijklmnop") == "Authorization: token [redacted]"
    assert redact('{"password": "hunter2"}') == '{"password": "[redacted]"}'
    assert redact(f"key {TOKEN}") == "key [redacted]"
    assert redact("my-own-secret-value x", ["my-own-secret-value"]) == "[redacted] x"
    assert redact("KeyError: 'tokenizer'") == "KeyError: 'tokenizer'"  # names are not values


def test_a_cause_quoting_the_token_is_redacted_and_bounded() -> None:
    cause = crash_cause(f"RuntimeError: hub refused JUPYTERHUB_API_TOKEN={TOKEN}\n", [TOKEN])
    assert cause == "RuntimeError: hub refused JUPYTERHUB_API_TOKEN=[redacted]"
    long = crash_cause("ValueError: " + "x" * 5000 + "\n")
    assert len(long) == MAX_CAUSE and long.endswith("…")


def test_one_log_per_server() -> None:
    assert log_name("") == "server.log"
    assert log_name("gpu") == "server-gpu.log"
    assert "/" not in log_name("../../etc") and log_name("../../etc").startswith("server-")


def _log(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "workspaces" / "alice" / ".kubelab"
    folder.mkdir(parents=True)
    (folder / "server.log").write_text(text)
    return folder / "server.log"


PARTS = ["workspaces", "alice", ".kubelab", "server.log"]


def test_the_tail_is_the_logs_end(tmp_path: Path) -> None:
    _log(tmp_path, "a" * 100 + "THE END")
    assert read_tail(tmp_path, PARTS, os.geteuid(), 0, limit=10) == "aaaTHE END"


def test_a_log_of_another_account_or_of_an_earlier_start_is_not_read(tmp_path: Path) -> None:
    _log(tmp_path, "ModuleNotFoundError: No module named 'foo'\n")
    assert read_tail(tmp_path, PARTS, os.geteuid() + 1, 0) == ""
    assert read_tail(tmp_path, PARTS, os.geteuid(), time.time() + 60) == ""


def test_links_are_not_followed_anywhere_below_the_root(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    (private / "server.log").write_text("root's secret\n")
    log = _log(tmp_path, "")
    log.unlink()
    log.symlink_to(private / "server.log")
    assert read_tail(tmp_path, PARTS, os.geteuid(), 0) == ""
    kubelab = log.parent
    log.unlink()
    kubelab.rmdir()
    kubelab.symlink_to(private, target_is_directory=True)
    assert read_tail(tmp_path, PARTS, os.geteuid(), 0) == ""


def test_a_fifo_does_not_block_the_hub(tmp_path: Path) -> None:
    log = _log(tmp_path, "")
    log.unlink()
    os.mkfifo(log)
    assert read_tail(tmp_path, PARTS, os.geteuid(), 0) == ""


def test_the_preexec_sends_stderr_to_a_private_log_or_leaves_it_be(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("the last start's lines\n")
    said = [sys.executable, "-c", "import sys; print('to stderr', file=sys.stderr)"]
    done = subprocess.run(said, preexec_fn=redirect_stderr(log, None), capture_output=True, text=True)
    assert done.stderr == "" and log.read_text() == "to stderr\n"  # this start's only

    fresh = tmp_path / "fresh.log"
    subprocess.run(said, preexec_fn=redirect_stderr(fresh, None), check=True)
    assert fresh.stat().st_mode & 0o777 == 0o600

    target = tmp_path / "target"
    target.write_text("keep\n")
    linked = tmp_path / "linked.log"
    linked.symlink_to(target)
    done = subprocess.run(said, preexec_fn=redirect_stderr(linked, None), capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "to stderr\n" and target.read_text() == "keep\n"
