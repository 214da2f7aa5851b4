"""The storage collectstatic writes the assets with: whitenoise's (hashed names, compressed copies),
with files readable by every user.

The collected assets are the program's, like its code, not the service's data: the container image
collects them as root and serves them as uid 10001 (or whichever uid Kubernetes picks), and an
nginx in front may serve /static/ itself. The service's umask (0o077, regsite/settings.py) would
make them its user's alone.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

from whitenoise.storage import CompressedManifestStaticFilesStorage

FILE_MODE = 0o644
DIRECTORY_MODE = 0o755


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("file_permissions_mode", FILE_MODE)
        kwargs.setdefault("directory_permissions_mode", DIRECTORY_MODE)
        super().__init__(*args, **kwargs)

    def post_process(self, paths: dict[str, Any], dry_run: bool = False, **options: Any) -> Iterator[Any]:
        yield from super().post_process(paths, dry_run=dry_run, **options)
        if dry_run:
            return
        # whitenoise writes its compressed copies with open(), under the umask, not through this storage.
        for directory, _dirs, files in os.walk(self.location):
            os.chmod(directory, DIRECTORY_MODE)
            for name in files:
                os.chmod(os.path.join(directory, name), FILE_MODE)
