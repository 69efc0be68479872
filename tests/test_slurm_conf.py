""".ci/slurm-conf.sh, which .ci/slurm-up.sh and .ci/slurm-down.sh use to put the test cluster's slurm.conf and
gres.conf in place and to leave the SLURM configuration as they found it (issue 39: a slurm.conf left behind makes
every later `snakemake` call wait for the stopped controller). Run on folders of a temporary directory
(R2MED_SLURM_ETC, R2MED_SLURM_SAVE): no root, no daemon. tests/test_slurm.py checks the real machine after the
cluster's tests."""
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / ".ci" / "slurm-conf.sh"
MARKER = "# Written by r2med-eval's .ci/slurm-up.sh"
LEGACY_GRES = "# One fake GPU (/dev/null as its device file): scheduling only.\n"


def folder_state(folder: Path):
    """Everything ``restore`` must bring back: for each entry below ``folder``, its kind, mode, owner, modification
    time and bytes (a link: its target). None where the folder does not exist."""
    folder = Path(folder)
    if not folder.exists():
        return None
    state = {}
    for path in sorted([folder, *folder.rglob("*")]):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            body = ("link", os.readlink(path))
        elif path.is_dir():
            body = ("dir",)
        else:
            body = ("file", path.read_bytes())
        state[str(path.relative_to(folder))] = (*body, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid,
                                                None if path.is_dir() else info.st_mtime_ns)
    return state


@pytest.fixture
def dirs(tmp_path):
    etc, save, new = tmp_path / "etc" / "slurm", tmp_path / "backups" / "slurm", tmp_path / "new"
    new.mkdir()
    write_new(new, "NodeName=a")
    return etc, save, new


def write_new(new: Path, line: str):
    (new / "slurm.conf").write_text(f"{MARKER}: a one-node test cluster\nClusterName=r2med\n{line}\n")
    (new / "gres.conf").write_text(f"{MARKER}: one fake GPU\n{line}\n")


def conf(dirs, *args, check=True):
    etc, save, _ = dirs
    env = {**os.environ, "R2MED_SLURM_ETC": str(etc), "R2MED_SLURM_SAVE": str(save)}
    proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_no_configuration_before_leaves_none_after(dirs):
    etc, save, new = dirs
    assert conf(dirs, "install", str(new)).stdout == "changed\n"
    assert (etc / "slurm.conf").read_text().startswith(MARKER)
    assert stat.S_IMODE((etc / "slurm.conf").stat().st_mode) == 0o644
    assert conf(dirs, "install", str(new)).stdout == ""  # the same files again: nothing changed
    conf(dirs, "restore")
    assert folder_state(etc) is None and folder_state(save) is None  # the folders it made are gone too
    conf(dirs, "restore")  # idempotent
    assert folder_state(etc) is None


def test_the_machines_own_configuration_comes_back_as_it_was(dirs):
    etc, save, new = dirs
    etc.mkdir(parents=True)
    (etc / "slurm.conf").write_text("# the site's own\nClusterName=site\nSlurmctldHost=head\n")
    (etc / "slurm.conf").chmod(0o600)
    os.utime(etc / "slurm.conf", ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    (etc / "plugstack.conf").write_text("include /etc/slurm/plugstack.conf.d/*\n")
    (etc / "plugstack.conf.d").mkdir()
    (etc / "cgroup.conf").symlink_to("/shared/slurm/cgroup.conf")
    before = folder_state(etc)
    conf(dirs, "install", str(new))
    assert (etc / "slurm.conf").read_text().startswith(MARKER) and (etc / "gres.conf").exists()
    assert (save / "slurm.conf").read_text().startswith("# the site's own")
    write_new(new, "NodeName=b")  # slurm-up run again with another machine size: ours replaced, the saved copy kept
    assert conf(dirs, "install", str(new)).stdout == "changed\n"
    assert "NodeName=b" in (etc / "slurm.conf").read_text()
    assert (save / "slurm.conf").read_text().startswith("# the site's own")
    conf(dirs, "restore")
    assert folder_state(etc) == before  # bytes, mode, owner and time of every entry; no gres.conf added
    assert folder_state(save) is None
    conf(dirs, "restore")
    assert folder_state(etc) == before


def test_a_linked_configuration_is_saved_and_restored_as_the_link(dirs):
    etc, _, new = dirs
    etc.mkdir(parents=True)
    (etc / "slurm.conf").symlink_to("/nonexistent/shared/slurm.conf")  # a cluster's shared file, here dangling
    before = folder_state(etc)
    conf(dirs, "install", str(new))
    assert not (etc / "slurm.conf").is_symlink()
    conf(dirs, "restore")
    assert folder_state(etc) == before


def test_files_an_older_slurm_up_left_behind_are_removed(dirs):
    """The machine of issue 39: the slurm.conf and gres.conf of a slurm-up.sh without this script."""
    etc, _, _ = dirs
    etc.mkdir(parents=True)
    (etc / "slurm.conf").write_text(f"{MARKER}: a one-node test cluster, no accounting.\nClusterName=r2med\n")
    (etc / "gres.conf").write_text(LEGACY_GRES + "NodeName=vm Name=gpu File=/dev/null Count=1\n")
    (etc / "topology.conf").write_text(LEGACY_GRES)  # the old gres line in another file is not ours
    conf(dirs, "restore")
    assert sorted(p.name for p in etc.iterdir()) == ["topology.conf"]


def test_a_configuration_changed_under_the_cluster_is_never_lost(dirs):
    etc, save, new = dirs
    etc.mkdir(parents=True)
    (etc / "slurm.conf").write_text("# the site's own\n")
    conf(dirs, "install", str(new))
    (etc / "slurm.conf").write_text("# written by someone while the test cluster ran\n")
    refused = conf(dirs, "install", str(new), check=False)
    assert refused.returncode == 1 and "holds an earlier saved copy" in refused.stderr
    assert (etc / "slurm.conf").read_text().startswith("# written by someone")
    kept = conf(dirs, "restore")
    assert "left as it is" in kept.stderr
    assert (etc / "slurm.conf").read_text().startswith("# written by someone")
    assert (save / "slurm.conf").read_text() == "# the site's own\n"  # still there to be put back by hand


def test_only_marked_files_are_installed(dirs):
    etc, _, new = dirs
    (new / "gres.conf").write_text("NodeName=a Name=gpu\n")
    proc = conf(dirs, "install", str(new), check=False)
    assert proc.returncode == 2 and "does not begin with" in proc.stderr
    assert folder_state(etc) is None


def test_slurm_up_and_down_go_through_it():
    up = (REPO / ".ci" / "slurm-up.sh").read_text()
    down = (REPO / ".ci" / "slurm-down.sh").read_text()
    assert 'slurm-conf.sh" install "$NEW")' in up and "/etc/slurm/slurm.conf" not in up.split("set -euo")[1]
    assert 'slurm-conf.sh" restore' in down
    for line in ("slurm.conf", "gres.conf"):
        assert f'cat >"$NEW/{line}" <<EOF\n{MARKER}' in up
