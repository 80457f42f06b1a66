"""Named exceptions of the worker. Library code raises these; only the CLI turns them into exit codes.

WorkerError
 ├── ManifestError        the manifest is missing, unreadable or invalid (nothing was processed)
 ├── ModelError           a model file is missing, corrupt or cannot be loaded
 ├── EngineUnavailable    an engine's packages are not installed on this node
 ├── SourceError          no usable face in the source image(s)
 ├── TargetError          one target cannot be processed (bad file, too large, ffmpeg failed, ...)
 │    └── NoFaceFound     the target has no face (not a failure: output is the unchanged input)
 └── testhooks.MemoryHookNotKilled   TESTS ONLY: the memory hook was not killed within its bound
"""


class WorkerError(Exception):
    """Base of every error the worker reports to a person. `str(err)` is one plain-language line."""


class ManifestError(WorkerError):
    pass


class ModelError(WorkerError):
    pass


class EngineUnavailable(WorkerError):
    pass


class SourceError(WorkerError):
    pass


class TargetError(WorkerError):
    """One target cannot be processed. The text is the English sentence (logs, the CLI); `code` and
    `params` name the sentence for the portal, which says it in the reader's language
    (jobs.results.target_words; the progress record carries both, docs/worker.md)."""

    def __init__(self, message: str = "", code: str = "", **params):
        super().__init__(message)
        self.code = code
        self.params = params


class NoFaceFound(TargetError):
    pass


def unreadable(name: str, exc: OSError) -> TargetError:
    """The error of a target file that cannot be looked up or opened: "file not found" (code
    `missing`), or "cannot read" with the system's reason."""
    if isinstance(exc, FileNotFoundError):
        return TargetError(f"file not found: {name}", "missing", name=name)
    return TargetError(f"cannot read {name}: {exc.strerror}")
