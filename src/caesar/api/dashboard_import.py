"""The dashboard's import page (issue 48): a history export (ChatGPT, Claude, Open WebUI or
caesar's JSONL) uploaded into the viewer's memory, its progress, its result, and how far the
memory workers have learned each recent import.

    GET  /dashboard/import     the form; the running import's progress (the page refreshes
                               itself while one runs), the last one's result, recent imports
                               with "learning N of M" (static/import.js updates that table
                               while the workers learn; without scripts, a reload does)
    POST /dashboard/import     multipart: csrf, format (empty: found from the file), file;
                               then back to the page

The upload is streamed to a private temporary file (api/upload.py) under `max_import_bytes`,
which `BodySizeLimit` leaves to this route; the CSRF token must come before the file in the
form (the page's form sends it first), so a forged upload is refused before a byte of it is
written. The import runs in a thread, one at a time per person: `importer.import_path`, then
`import_learning.record` (the `import.completed` row) when the file held anything. Its state
lives in memory (`ImportJobs`, one per app, made by create_app): a restart forgets the last
one's result, not what it wrote (an import run again adds only what is missing). The temporary
file is deleted when the import ends, however it ends; a stopping app ends a running import at
its next conversation (`ImportJobs.stop`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from caesar import import_learning
from caesar.api.dashboard_render import SCRIPTED_HEADERS, HtmlErrors, page, redirect
from caesar.api.dashboard_session import Viewer, ViewerDep, checked_viewer
from caesar.api.deps import ServicesDep
from caesar.api.upload import Upload, UploadRefused, receive_upload, size_text
from caesar.clock import utcnow
from caesar.errors import InputError
from caesar.importer import LABELS, ImportReport, import_path
from caesar.memory.scope import Scope
from caesar.services import Services

log = logging.getLogger(__name__)

UPLOAD_PATH = "/dashboard/import"
RECENT_SHOWN = 10  # the newest imports the page lists
SKIPPED_SHOWN = 50  # the skipped conversations (or lines) a result names
REFRESH_SECONDS = 2  # the page's reload while an import runs
STOP_SECONDS = 10.0  # how long a stopping server waits for running imports to end

router = APIRouter(route_class=HtmlErrors)


@dataclass
class ImportJob:
    """One upload's import, as the page shows it; written by its thread, read by the page."""

    person: int
    file: str  # the name the browser gave the file: display text only
    size: int  # bytes
    named: str | None  # the format chosen in the form; None: found from the file
    started: datetime
    # The file's format, once import_path has found it (or checked the one named).
    found: str | None = None
    counted: bool = False  # the file is read: `total` is known (None: it could not be told)
    total: int | None = None  # conversations (caesar JSONL: lines)
    done: int = 0
    report: ImportReport | None = None
    error: str | None = None  # why nothing (or not everything) was imported
    unread: bool = False  # the error is the file's: it could not be read, nothing was written
    record_id: int | None = None  # its import.completed row
    ended: bool = False

    @property
    def label(self) -> str | None:
        return LABELS.get(self.found) if self.found else None


def progress_text(job: ImportJob) -> str:
    """'importing 120 of 2,000 conversations (ChatGPT export)'. Pure."""
    label = f" ({job.label})" if job.label else ""
    if not job.counted:  # a large export takes a while to read: say how large
        return f"reading {job.file}, {size_text(job.size)}{label}…"
    unit = "lines" if job.found == "caesar" else "conversations"
    of = f" of {job.total:,}" if job.total is not None else ""
    return f"importing {job.done:,}{of} {unit}{label}"


class Busy(Exception):
    """The person has an import running already."""


class _Stopped(Exception):
    """The server is stopping: the import ends at its next conversation."""


class ImportJobs:
    """Each person's latest dashboard import, in memory; at most one running per person (an
    upload holds the slot from its first byte)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[int, ImportJob] = {}
        self._busy: set[int] = set()
        self._threads: set[threading.Thread] = set()
        self._stopping = threading.Event()

    def latest(self, scope: Scope) -> ImportJob | None:
        with self._lock:
            return self._latest.get(scope.person)

    def running(self, scope: Scope) -> bool:
        with self._lock:
            return scope.person in self._busy

    def claim(self, scope: Scope) -> None:
        with self._lock:
            if scope.person in self._busy:
                raise Busy
            self._busy.add(scope.person)

    def release(self, scope: Scope) -> None:
        with self._lock:
            self._busy.discard(scope.person)

    def start(self, services: Services, job: ImportJob, upload: Upload) -> None:
        """Run `job` on `upload` in a thread of its own (the person's slot is claimed); the
        slot is released and the file deleted when it ends."""
        thread = threading.Thread(
            target=self._run, args=(services, job, upload), name="dashboard-import", daemon=True
        )
        with self._lock:
            self._latest[job.person] = job
            self._threads.add(thread)
        try:
            thread.start()
        except BaseException:
            with self._lock:
                self._threads.discard(thread)
            upload.discard()
            raise

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """The server is stopping (the app's lifespan ends): each running import ends at its
        next conversation and deletes its file; waits up to `timeout` seconds for them. What
        they wrote stays; importing the file again adds the rest."""
        self._stopping.set()
        with self._lock:
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self, services: Services, job: ImportJob, upload: Upload) -> None:
        scope = Scope(job.person)

        def total(n: int) -> None:
            job.total, job.counted = n, True

        def found(name: str) -> None:
            job.found = name

        def count(n: int) -> None:
            job.done += n
            if self._stopping.is_set():
                raise _Stopped

        try:
            report = import_path(
                services,
                upload.path,
                scope=scope,
                fmt=job.named,
                on_format=found,
                on_total=total,
                on_progress=count,
            )
            job.found = report.format
            if report.found > 0:
                job.record_id = import_learning.record(services, scope, report, job.file)
            job.report = report
        except InputError as exc:  # FileBroken too: the file cannot be read; nothing written
            # its message names where the file is here: name the person's file instead
            job.error = str(exc).replace(str(upload.path), job.file)
            job.unread = True
        except _Stopped:
            job.error = (
                "The server stopped. What it wrote stays; import the file again for the rest."
            )
        except Exception as exc:
            log.exception("dashboard import of %r (person %s) failed", job.file, job.person)
            job.error = (
                f"{type(exc).__name__}; the server's log says why. What it wrote stays, and "
                "importing the file again adds the rest."
            )
        finally:
            upload.discard()
            job.ended = True
            self.release(scope)
            with self._lock:
                self._threads.discard(threading.current_thread())


def jobs_of(request: Request) -> ImportJobs:
    """The app's imports (create_app makes one registry per app)."""
    jobs = request.app.state.import_jobs
    assert isinstance(jobs, ImportJobs)
    return jobs


def skipped(report: ImportReport) -> list[tuple[str, str]]:
    """What an import skipped, (where, why): caesar JSONL's lines, an export's conversations
    (by their own id). Pure."""
    lines = [(f"line {e.line}", e.error) for e in report.errors]
    return lines + [(b.key, b.reason) for b in report.broken]


@dataclass(frozen=True)
class RecentImport:
    record: import_learning.ImportRecord
    label: str
    learning: import_learning.Learning


@dataclass
class _Page:
    job: ImportJob | None
    running: bool
    recent: list[RecentImport] = field(default_factory=list)

    @property
    def learning(self) -> bool:
        return any(not r.learning.finished for r in self.recent)


def _recent(services: Services, scope: Scope) -> list[RecentImport]:
    out = []
    for record in import_learning.recent(services, scope, RECENT_SHOWN):
        state = import_learning.progress(services, scope, record.first_id, record.last_id)
        out.append(RecentImport(record, LABELS.get(record.format, record.format), state))
    return out


def _import_page(
    request: Request,
    viewer: Viewer,
    services: Services,
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    scope, jobs = Scope(viewer.person), jobs_of(request)
    job = jobs.latest(scope)
    view = _Page(job, job is not None and not job.ended, _recent(services, scope))
    context: dict[str, Any] = {
        "view": view,
        "progress": progress_text(job) if job is not None else "",
        "skipped": skipped(job.report)[:SKIPPED_SHOWN] if job and job.report else [],
        "error": error,
        "busy": jobs.running(scope),
        "labels": LABELS,
        "skipped_shown": SKIPPED_SHOWN,
        "refresh": REFRESH_SECONDS if view.running else None,
        "limit": size_text(services.settings.max_import_bytes),
    }
    return page(request, viewer, "import.html", context, status, headers=SCRIPTED_HEADERS)


@router.get("/import")
def import_page(request: Request, viewer: ViewerDep, services: ServicesDep) -> Response:
    return _import_page(request, viewer, services)


def _named(fmt: str) -> str | None:
    """The form's format: empty for "found from the file", else one of LABELS."""
    fmt = fmt.strip()
    if not fmt:
        return None
    if fmt not in LABELS:
        raise InputError(f"format: {fmt[:40]!r} is not one of {', '.join(LABELS)}")
    return fmt


@router.post("/import")
async def upload_form(request: Request, viewer: ViewerDep, services: ServicesDep) -> Response:
    """Take the upload, start its import, back to the page (which shows it running). A second
    upload while one runs, a file over the limit, a form without a file: the page again, with
    why (409, 413, 400). A missing or wrong CSRF token: 403, before the file is read."""
    scope, jobs = Scope(viewer.person), jobs_of(request)
    try:
        jobs.claim(scope)
    except Busy:
        error = "An import is running already: wait for it to finish, then send the next file."
        return await run_in_threadpool(
            _import_page, request, viewer, services, error=error, status=409
        )
    started = False
    try:
        try:
            upload = await receive_upload(
                request,
                file_field="file",
                max_bytes=services.settings.max_import_bytes,
                limit_name="setting max_import_bytes",
                before_file=lambda fields: _check_csrf(request, viewer, fields),
            )
        except UploadRefused as refused:
            return await run_in_threadpool(
                _import_page,
                request,
                viewer,
                services,
                error=refused.message,
                status=refused.status,
            )
        except ClientDisconnect:  # the browser went away mid-upload: nobody to answer
            return Response(status_code=400)
        try:
            _check_csrf(request, viewer, upload.fields)
            named = _named(upload.fields.get("format", ""))
        except BaseException:
            upload.discard()
            raise
        job = ImportJob(viewer.person, upload.name, upload.size, named, utcnow(), found=named)
        jobs.start(services, job, upload)
        started = True
    finally:
        if not started:  # else the import's thread releases it when done
            jobs.release(scope)
    return redirect(UPLOAD_PATH)


def _check_csrf(request: Request, viewer: Viewer, fields: dict[str, str]) -> None:
    """As every dashboard form (dashboard_session.checked_viewer): Denied (403) without the
    session's token; a bearer client needs none."""
    checked_viewer(request, viewer, fields.get("csrf", ""))
