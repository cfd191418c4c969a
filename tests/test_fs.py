"""The file primitives: no link below a root is followed, names from input are checked."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from loop import _fs, _names
from loop.errors import PathError, StoreError

VICTIM = b"the victim's bytes\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A trusted root with a ``state`` folder in it."""
    (tmp_path / "root" / "state").mkdir(parents=True)
    return tmp_path / "root"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the root that no primitive may change; a folder beside it."""
    (tmp_path / "outside").mkdir()
    path = tmp_path / "outside" / "victim"
    path.write_bytes(VICTIM)
    return path


def _outside_unchanged(victim: Path) -> None:
    assert victim.read_bytes() == VICTIM
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim"]


OPS: dict[str, Callable[[Path, Path], object]] = {
    "atomic_write": lambda p, r: _fs.atomic_write(p, b"new", root=r),
    "write_json": lambda p, r: _fs.write_json(p, {"a": 1}, root=r),
    "write_new_file": lambda p, r: _fs.write_new_file(p, "new", root=r),
    "append_bytes": lambda p, r: _fs.append_bytes(p, b"line\n", root=r),
    "file_lock": lambda p, r: _fs.file_lock(p, root=r).__enter__(),
    "open_file": lambda p, r: os.close(_fs.open_file(p, os.O_RDWR | os.O_CREAT, root=r)),
    "make_folders": lambda p, r: _fs.make_folders(p / "sub", root=r),
    "make_folder": lambda p, r: _fs.make_folder(p / "sub", root=r),
    "read_bytes": lambda p, r: _fs.read_bytes(p / "victim", root=r),
    "list_folder": lambda p, r: _fs.list_folder(p, root=r),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_linked_folder_below_the_root_is_refused(
    op: str, root: Path, victim: Path, tmp_path: Path
) -> None:
    """A folder on the way that is a link is refused, naming it; nothing happens outside."""
    (root / "state").rmdir()
    (root / "state").symlink_to(victim.parent)
    with pytest.raises(PathError, match=r"refusing to follow the symbolic link .*root/state"):
        OPS[op](root / "state" / "victim", root)
    _outside_unchanged(victim)


@pytest.mark.parametrize(
    "op", ["atomic_write", "write_json", "write_new_file", "append_bytes", "open_file", "read"]
)
def test_a_linked_file_is_never_written_through(op: str, root: Path, victim: Path) -> None:
    """A link at the file itself: refused, or replaced as a link; the victim is intact."""
    link = root / "state" / "file"
    link.symlink_to(victim)
    if op == "read":
        with pytest.raises(PathError, match="symbolic link"):
            _fs.read_bytes(link, root=root)
    elif op in ("atomic_write", "write_json"):  # a rename replaces the link itself
        OPS[op](link, root)
        assert not link.is_symlink()
    else:
        with pytest.raises((PathError, FileExistsError)):
            OPS[op](link, root)
    _outside_unchanged(victim)


def test_the_lock_file_is_never_a_link(root: Path, victim: Path) -> None:
    """``<path>.lock`` planted as a link to an outside file is refused."""
    (root / "state" / "data.lock").symlink_to(victim)
    with (
        pytest.raises(PathError, match=r"data\.lock"),
        _fs.file_lock(root / "state" / "data", root=root),
    ):
        pass
    _outside_unchanged(victim)


def test_links_above_the_root_are_the_users(tmp_path: Path) -> None:
    """The root is opened as configured: a link in its own path is followed."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    _fs.atomic_write(tmp_path / "alias" / "f", b"x", root=tmp_path / "alias")
    assert (tmp_path / "real" / "f").read_bytes() == b"x"


def test_without_a_root_only_the_entry_itself_is_not_followed(tmp_path: Path, victim: Path) -> None:
    """``root=None`` trusts the folder holding the path, and still refuses a link there."""
    (tmp_path / "alias").symlink_to(tmp_path / "outside")
    assert _fs.read_bytes(tmp_path / "alias" / "victim") == VICTIM  # the folder is trusted
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(PathError):
        _fs.append_bytes(tmp_path / "link", b"x")
    assert victim.read_bytes() == VICTIM


def test_a_file_where_a_folder_belongs_is_one_clear_error(root: Path) -> None:
    """A file in a folder's place is a StoreError naming it (never NotADirectoryError)."""
    (root / "state" / "sub").write_text("in the way")
    with pytest.raises(StoreError, match=r"state/sub: not a folder"):
        _fs.make_folders(root / "state" / "sub" / "deeper", root=root)
    with pytest.raises(StoreError, match=r"state/sub: not a folder"):
        _fs.atomic_write(root / "state" / "sub" / "f", b"x", root=root)
    assert _fs.stat_nofollow(root / "state" / "sub" / "f", root=root) is None


def test_a_fifo_is_refused_without_blocking(root: Path) -> None:
    """A FIFO planted as a state file is refused at once (a reader would block forever)."""
    fifo = root / "state" / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def read() -> None:
        with pytest.raises(StoreError, match="not a regular file"):
            _fs.read_bytes(fifo, root=root)
        done.set()

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    assert done.wait(10), "reading a FIFO blocked"


def test_a_hard_linked_file_is_not_written_in_place(root: Path, victim: Path) -> None:
    """Appending to a file with another hard link would change that file too: refused."""
    os.link(victim, root / "state" / "journal")
    with pytest.raises(PathError, match="hard links"):
        _fs.append_bytes(root / "state" / "journal", b"x", root=root)
    assert victim.read_bytes() == VICTIM
    _fs.atomic_write(root / "state" / "journal", b"new", root=root)  # replacing is safe
    assert victim.read_bytes() == VICTIM


def test_single_writer_temp_files_never_pile_up(root: Path) -> None:
    """A writer killed after its temp file leaves one, which the next write replaces."""
    target = root / "state" / "tasks.json"
    (root / "state" / ".tasks.json.tmp").write_text("half a write")
    for i in range(3):
        _fs.atomic_write(target, f"v{i}", root=root, single_writer=True)
    assert sorted(p.name for p in (root / "state").iterdir()) == ["tasks.json"]


def test_atomic_write_keeps_the_mode_and_never_leaves_a_temp_file(root: Path) -> None:
    """A replaced file keeps its permissions; a failed write leaves no temp file."""
    target = root / "state" / "f"
    target.write_text("old")
    target.chmod(0o640)
    _fs.atomic_write(target, "new", root=root)
    assert target.stat().st_mode & 0o777 == 0o640
    with pytest.raises(IsADirectoryError):
        _fs.atomic_write(root / "state", "x", root=root.parent)
    assert sorted(p.name for p in (root / "state").iterdir()) == ["f"]


def test_listing_and_stat_do_not_follow_links(root: Path, victim: Path) -> None:
    """list_folder reports links as links; stat_nofollow sees the link, not its target."""
    (root / "state" / "a").write_text("a")
    (root / "state" / "b").symlink_to(victim)
    (root / "state" / "c").mkdir()
    kinds = {e.name: e.kind for e in _fs.list_folder(root / "state", root=root)}
    assert kinds == {"a": "file", "b": "link", "c": "folder"}
    assert _fs.list_folder(root / "missing", root=root) == []
    st = _fs.stat_nofollow(root / "state" / "b", root=root)
    assert st is not None and st.st_size != len(VICTIM)
    assert _fs.stat_nofollow(root / "state" / ("x" * 300), root=root) is None


def test_rename_and_remove_never_touch_a_links_target(root: Path, victim: Path) -> None:
    """Removing a link removes the link; renaming onto an existing name is refused."""
    (root / "state" / "l").symlink_to(victim)
    (root / "state" / "f").write_text("f")
    with pytest.raises(FileExistsError):
        _fs.rename(root / "state" / "f", root / "state" / "l", root=root)
    _fs.remove_file(root / "state" / "l", root=root)
    with pytest.raises(OSError):  # rmdir of a link to a folder: never its target
        (root / "state" / "dl").symlink_to(victim.parent)
        _fs.remove_folder(root / "state" / "dl", root=root)
    _outside_unchanged(victim)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "non-empty"),
        ("..", "must not be '..'"),
        (".", "must not be '.'"),
        ("a/b", "separators"),
        ("a\\b", "separators"),
        ("/etc", "separators"),
        ("a\x00b", "NUL"),
        ("x" * 201, "too long: 201 bytes, at most 200"),
        ("é" * 101, "too long: 202 bytes"),
    ],
)
def test_check_name_refuses_with_one_line(name: str, message: str) -> None:
    """Every hostile name gets one line saying what is wrong."""
    with pytest.raises(PathError, match=message) as info:
        _names.check_name(name, "themeDirectoryPart")
    assert "\n" not in info.value.message
    assert info.value.message.startswith("themeDirectoryPart")


def test_a_refused_name_with_a_newline_is_shown_escaped() -> None:
    """The name is shown with repr, so a newline in it cannot break the error's line."""
    with pytest.raises(PathError) as info:
        _names.check_name("a/\n", "x")
    assert "\\n" in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "must not be empty"),
        ("a\x00", "NUL"),
        ("a/" + "x" * 256, "a name of 256 bytes"),
        ("a/" * 2100, "too long"),
    ],
)
def test_check_path_refuses_what_no_system_call_takes(raw: str, message: str) -> None:
    """A path the file system would answer with ENAMETOOLONG is refused up front."""
    with pytest.raises(PathError, match=message):
        _names.check_path(raw, "directory_path")


def test_read_json_names_the_file_for_every_problem(root: Path) -> None:
    """Missing, not UTF-8, invalid, too deep: each a StoreError naming the file."""
    path = root / "state" / "s.json"
    for content, reason in (
        (None, "no such file"),
        (b"\xff", "not UTF-8"),
        (b"{", "invalid JSON"),
        (b"[" * 201 + b"]" * 201, "nested deeper than 200 levels"),
    ):
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(StoreError, match=rf"s\.json: .*{reason}"):
            _fs.read_json(path, root=root)
