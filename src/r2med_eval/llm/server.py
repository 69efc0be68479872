"""A server inside the job: ``vllm serve`` on 127.0.0.1 (a GPU node on SLURM), started, checked and stopped.

The job talks to the server it started, and only to it (``local_server``): the port must be free before the
start, the server gets a fresh random key it must require (a decoy key is tried first), the child is watched
while it starts, ``/v1/models`` must list the served model, and ``vllm.args`` may not set what the job owns."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import socket
import time
from dataclasses import dataclass

from ..errors import LLMError

log = logging.getLogger(__name__)


# What the job sets itself: where the server listens, its key, the model it loads and the name it serves it under;
# --config would let a file set any of them.
JOB_OWNED_ARGS = ("--host", "--port", "--api-key", "--served-model-name", "--model", "--config")


def option_name(arg) -> str | None:
    """The option an argument names as vLLM's parser reads it (``FlexibleArgumentParser``, an argparse parser):
    ``--name`` or ``--name=value``, underscores read as dashes (``--api_key`` is ``--api-key``); None for a value
    or a short option."""
    text = str(arg)
    if not text.startswith("--") or len(text) == 2:
        return None
    return "--" + text[2:].split("=", 1)[0].replace("_", "-")


def job_owned_args(args) -> list[str]:
    """The arguments of ``vllm.args`` that set an option the job owns (``JOB_OWNED_ARGS``) in any spelling vLLM's
    parser accepts: the full name, any prefix of it (argparse's abbreviations: ``--hos`` is ``--host``), underscores
    for dashes (``--served_model_name``), with the value after ``=`` (``--port=1``). The last value of an option
    wins there, so an entry could override the job's: it may not set them."""
    owned = []
    for arg in args:
        name = option_name(arg)
        if name is not None and any(option.startswith(name) for option in JOB_OWNED_ARGS):
            owned.append(arg)
    return owned


@dataclass
class Started:
    """A server this job started: its process, its command (``vllm``) and where its output is (a sentence)."""

    proc: object
    name: str
    where: str

    def gone(self, wait: float = 0.0) -> str | None:
        """None while the process runs (waiting up to ``wait`` seconds for it to end), else a sentence saying how it
        ended: ``the LLM server this job started (vllm) was killed by signal 9 ...``."""
        import subprocess

        try:
            code = self.proc.wait(timeout=wait) if wait else self.proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return None
        return f"the LLM server this job started ({self.name}) {ended(code)} while the job was asking it; {self.where}"


_STARTED: dict[str, Started] = {}  # base URL -> the server this job started there (local_server)


def started(url: str) -> Started | None:
    """The server this job started at the base URL ``url`` (``local_server``), or None: the server is the user's."""
    return _STARTED.get(url)


def ended(code: int) -> str:
    """``exited with status 3``, or ``was killed by signal 9`` (a negative return code)."""
    return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


@contextlib.contextmanager
def serving(settings: dict, server_log=None):
    """The job's server: ``local_server`` when ``vllm.enabled`` (its output to the job's log, or, with
    ``server_log``, to that owner-only file: on a MIMIC-derived benchmark it may log prompts), else nothing (the
    server the environment names)."""
    with contextlib.ExitStack() as stack:
        if settings["vllm"]["enabled"]:
            import sys

            handle = sys.stderr
            if server_log:
                from ..io import open_private

                handle = stack.enter_context(open_private(server_log))
                log.info("the LLM server's output goes to %s (owner-only: it may log prompts)", server_log)
            stack.enter_context(local_server(settings, handle, server_log))
        yield


def _port_taken(port: int) -> bool:
    """Whether a socket is already bound to 127.0.0.1:``port`` (listening there or on every address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection in TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _models(port: int, key: str) -> tuple[int, list[str]] | None:
    """GET /v1/models on 127.0.0.1:``port`` with ``key``: (HTTP status, the served model ids), or None while
    nothing answers. Never through a proxy; the body is read only on 200 and at most 1 MB of it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {key}", "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, []
        try:
            data = json.loads(resp.read(1 << 20)).get("data") or []
            return 200, [str(m.get("id")) for m in data if isinstance(m, dict)]
        except (ValueError, AttributeError):
            return 200, []
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


@contextlib.contextmanager
def local_server(settings: dict, log_handle=None, log_path=None):
    """Start ``vllm serve`` (``vllm.command``) on 127.0.0.1 for the length of the block and point the client's
    environment variables at it, in this process only. The job talks to the server it started, and only to it:

    * the port must be free before the start (a server already there, another user's on a shared node, is never
      asked);
    * the server gets a fresh random key (through VLLM_API_KEY, never on a command line) that every request must
      carry, and it must refuse a request with a wrong key (a decoy key is tried first: a server that answers
      without the job's key is not asked anything);
    * the child must stay alive while it starts (its exit status and ``log_path`` are named when it dies), and
      ``/v1/models`` must list the served model;
    * ``vllm.args`` may not set ``--host``, ``--port``, ``--api-key``, ``--served-model-name``, ``--model`` or
      ``--config``, in any spelling vLLM reads (``job_owned_args``).

    The server's output goes to ``log_handle`` (an owner-only file on a MIMIC-derived benchmark: it may log
    prompts)."""
    import secrets
    import subprocess
    import sys

    v = settings["vllm"]
    port = int(v["port"])
    owned = job_owned_args(v["args"])
    if owned:
        raise LLMError(f"llms.<llm>.generate.vllm.args sets {', '.join(owned)}, which the job sets itself (the server "
                       "listens on 127.0.0.1 only, under a fresh key and the model's name).",
                       fix="remove them from vllm.args; choose the port with vllm.port.")
    if _port_taken(port):
        raise LLMError(f"port {port} on 127.0.0.1 is already taken by another process, so the LLM server this job "
                       "would start cannot listen there; nothing was sent to the process that holds it.",
                       fix=f"set llms.<llm>.generate.vllm.port to a free port (not {port}).")
    key, decoy = secrets.token_hex(24), secrets.token_hex(24)
    env = dict(os.environ)
    env["VLLM_API_KEY"] = key
    cmd = [*v["command"], v.get("model_path") or settings["model"], "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", settings["model"], *v["args"]]
    where = f"its output is in {log_path}" if log_path else "its output is in the job's log"
    log.info("starting the LLM server: %s (port %d, up to %d s)", " ".join(cmd[:2]), port, v["startup_seconds"])
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=log_handle or sys.stderr, stderr=subprocess.STDOUT)
    except OSError as exc:  # no such command, not executable
        raise LLMError(f"cannot start the LLM server: the command {cmd[0]!r} of vllm.command "
                       f"{'is not found' if isinstance(exc, FileNotFoundError) else 'cannot run'} ({exc.strerror}); "
                       "nothing was started or sent.",
                       fix="install vLLM in the job's environment (pip install vllm), or set "
                           "llms.<llm>.generate.vllm.command to the full path of its `vllm` command.") from None
    saved = {n: os.environ.get(n) for n in (settings["base_url_env"], settings["api_key_env"])}
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(proc, port, key, decoy, settings["model"], float(v["startup_seconds"]), cmd[0], where)
        os.environ[settings["base_url_env"]] = url
        os.environ[settings["api_key_env"]] = key
        _STARTED[url] = Started(proc, cmd[0], where)
        yield
    finally:
        _STARTED.pop(url, None)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc, port: int, key: str, decoy: str, model: str, seconds: float, name: str, where: str) -> None:
    """Until the started server answers as it must (``local_server``), checking that the child lives."""
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise LLMError(f"the LLM server ({name}) {ended(proc.returncode)} before it was ready; {where}.",
                           fix="read its output; fix the model path, the GPUs or vllm.args.")
        probe = _models(port, decoy)
        if probe is not None:
            if probe[0] == 200:
                raise LLMError(f"the server on 127.0.0.1:{port} answers without the job's key: it is not the server "
                               "this job started (or that server ignores VLLM_API_KEY); nothing was sent to it.",
                               fix=f"stop whatever else listens on port {port}, or set llms.<llm>.generate.vllm.port "
                                   "to a free port.")
            answer = _models(port, key)
            if answer is not None and answer[0] == 200:
                if model not in answer[1]:
                    raise LLMError(f"the server on 127.0.0.1:{port} does not list the model {model!r} on /v1/models "
                                   f"(it lists {len(answer[1])} others); nothing was sent to it.",
                                   fix=f"check vllm.command and vllm.model_path; {where}.")
                log.info("the LLM server is up after %.0f s", time.monotonic() - started)
                return
        if time.monotonic() - started > seconds:
            raise LLMError(f"the LLM server did not answer within {seconds:g} s; {where}.",
                           fix="raise llms.<llm>.generate.vllm.startup_seconds, or read its output.")
        time.sleep(1.0)
