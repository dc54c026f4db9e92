"""Where operators keep their checkpoints: a local directory, or the region's control-plane topic.

A checkpoint is saved before the member answers the controller's checkpoint command, and a checkpoint is
complete only when every member answered; so a reset only ever loads checkpoints that were fully saved.
The directory store writes each file to a temporary name, fsyncs it and renames it into place, so a crash
leaves either the old state or the new one. The topic store writes a record with acks=all and reads it back
through the control plane's view; retiring tombstones the records, and compaction removes them.

Both are shared by the members of a region (the directory must be one every member reaches): a reset whose
merge does not complete reads every member's file of the checkpoint (`load_all`), not only its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Protocol

from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import CheckpointData

__all__ = ["CheckpointStore", "DirectoryCheckpointStore", "TopicCheckpointStore"]


class CheckpointStore(Protocol):
    def save(self, checkpoint_id: int, member: str, data: str) -> None: ...

    def load(self, checkpoint_id: int, member: str) -> str | None: ...

    def load_all(self, checkpoint_id: int) -> dict[str, str]:
        """Every member's data of checkpoint ``checkpoint_id``, by member id."""
        ...

    def retire(self, upto_checkpoint_id: int) -> None: ...


class DirectoryCheckpointStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _dir(self, checkpoint_id: int) -> Path:
        return self.root / f"{checkpoint_id:012d}"

    def save(self, checkpoint_id: int, member: str, data: str) -> None:
        d = self._dir(checkpoint_id)
        d.mkdir(parents=True, exist_ok=True)
        final = d / f"{member}.json"
        tmp = d / f".{member}.json.tmp"
        with tmp.open("w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(final)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def load(self, checkpoint_id: int, member: str) -> str | None:
        path = self._dir(checkpoint_id) / f"{member}.json"
        try:
            return path.read_text()
        except FileNotFoundError:
            return None

    def load_all(self, checkpoint_id: int) -> dict[str, str]:
        """Only whole files: a temporary one (a save under way) is not read, nor anything that is no file (a
        failed save can leave one); a file retired by another member meanwhile is simply gone."""
        found: dict[str, str] = {}
        try:
            entries = sorted(self._dir(checkpoint_id).iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return found
        for path in entries:
            if path.name.startswith(".") or path.suffix != ".json" or not path.is_file():
                continue
            try:
                found[path.stem] = path.read_text()
            except (FileNotFoundError, IsADirectoryError):
                continue
        return found

    def retire(self, upto_checkpoint_id: int) -> None:
        """Delete checkpoints up to ``upto_checkpoint_id``. Every member of the region retires the same ones,
        possibly at the same moment in a shared directory: what another already deleted is simply gone."""
        if not self.root.is_dir():
            return
        for d in sorted(self.root.iterdir()):
            if d.name.isdigit() and int(d.name) <= upto_checkpoint_id:
                # errors ignored: another member removes the same files and directory at the same moment
                shutil.rmtree(d, ignore_errors=True)

    def checkpoint_ids(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(d.name) for d in self.root.iterdir() if d.name.isdigit())


class TopicCheckpointStore:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def save(self, checkpoint_id: int, member: str, data: str) -> None:
        self.plane.publish(CheckpointData(self.plane.region, checkpoint_id, member, data))

    def load(self, checkpoint_id: int, member: str) -> str | None:
        return self.plane.read(lambda view: view.checkpoints.get((checkpoint_id, member)))

    def load_all(self, checkpoint_id: int) -> dict[str, str]:
        return self.plane.read(
            lambda view: {m: data for (cid, m), data in sorted(view.checkpoints.items()) if cid == checkpoint_id}
        )

    def retire(self, upto_checkpoint_id: int) -> None:
        keys = self.plane.read(lambda view: [k for k in view.checkpoints if k[0] <= upto_checkpoint_id])
        for checkpoint_id, member in sorted(keys):
            self.plane.publish(CheckpointData(self.plane.region, checkpoint_id, member, None))
