"""``constraints.txt`` pins what ``make`` installs: every dependency of
``pyproject.toml`` (the test extra too), at a version its range allows."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).parent.parent


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[_canonical(name)] = version
    return pins


def test_every_dependency_is_pinned_inside_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["test"]
    pins = _pins()
    for spec in wanted:
        requirement = Requirement(spec)
        name = _canonical(requirement.name)
        assert name in pins, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pins[name]}, outside {spec!r}")


def test_make_installs_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    assert re.search(r"^\$\(STAMP\):.*constraints\.txt", makefile, re.M)
