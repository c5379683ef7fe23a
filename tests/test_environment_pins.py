"""The pins in requirements/*.txt and environment.yml must agree.

requirements/cpu.txt, gpu.txt and maintained.txt each include base.txt and add onnx and
exactly one onnxruntime package (onnxruntime-training-cpu, onnxruntime-training, onnxruntime);
environment.yml repeats the CPU pins for conda users. Changing a version in one place and not
the other fails here.
"""

import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from make_runs import run_make

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements"
ENVIRONMENT = ROOT / "environment.yml"

# name==version, nothing else: no ranges, extras or markers (but the one below).
EXACT_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.!+-]*)$")
# The GPU variant's CUDA libraries exist for Linux x86-64 only, and say so.
LINUX_X86 = 'sys_platform == "linux" and platform_machine == "x86_64"'
CUDA_PREFIX = "nvidia-"
RUNTIME_PREFIX = "onnxruntime"
CPU_RUNTIME = "onnxruntime-training-cpu"
GPU_RUNTIME = "onnxruntime-training"
#: The maintained onnxruntime's package (requirements/maintained.txt): inference only.
MAINTAINED_RUNTIME = "onnxruntime"
#: Pinned per variant: onnx 1.17.0 (no wheel for Python 3.13) for onnxruntime 1.19.2, which
#: refuses the IR versions newer onnx writes; a newer onnx beside the maintained onnxruntime.
PER_VARIANT = "onnx"


def normalize(name):
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(line, where):
    line, _, marker = line.partition(";")
    line = line.strip()
    if marker:
        assert line.startswith(CUDA_PREFIX) and marker.strip() == LINUX_X86, (
            f"{where}: only the nvidia-* CUDA libraries carry a marker, exactly {LINUX_X86!r}"
        )
    match = EXACT_PIN.match(line)
    assert match, f"{where}: {line!r} is not an exact pin (name==version)"
    return normalize(match.group(1)), match.group(2)


def add_pin(pins, name, version, where):
    assert name not in pins, f"{where}: {name} is pinned twice"
    pins[name] = version


def read_requirements(path, seen=None):
    """Returns {normalized name: version} for a requirements file, following -r."""
    seen = set() if seen is None else seen
    path = path.resolve()
    assert path not in seen, f"{path}: circular -r include"
    seen.add(path)
    pins = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        where = f"{path.relative_to(ROOT)}:{number}"
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option = re.match(r"^(-r|--requirement)(?:\s+|=)(\S+)$", line)
        if option:
            for name, version in read_requirements(path.parent / option.group(2), seen).items():
                add_pin(pins, name, version, where)
            continue
        assert not line.startswith("-"), (
            f"{where}: option {line!r} is not understood by this test; "
            "only -r includes and exact pins are expected"
        )
        add_pin(pins, *parse_pin(line, where), where)
    return pins


def read_environment():
    """Returns the parsed environment.yml and {normalized name: version} of its pip section."""
    env = yaml.safe_load(ENVIRONMENT.read_text())
    pip_sections = [
        dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict) and "pip" in dep
    ]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip: section"
    pins = {}
    for entry in pip_sections[0]:
        where = f"environment.yml pip: {entry!r}"
        add_pin(pins, *parse_pin(str(entry).strip(), where), where)
    return env, pins


def runtimes(pins):
    return sorted(name for name in pins if name.startswith(RUNTIME_PREFIX))


@pytest.fixture(scope="module")
def base():
    return read_requirements(REQUIREMENTS / "base.txt")


@pytest.fixture(scope="module")
def cpu():
    return read_requirements(REQUIREMENTS / "cpu.txt")


@pytest.fixture(scope="module")
def gpu():
    return read_requirements(REQUIREMENTS / "gpu.txt")


@pytest.fixture(scope="module")
def maintained():
    return read_requirements(REQUIREMENTS / "maintained.txt")


@pytest.fixture(scope="module")
def environment():
    return read_environment()


def test_every_requirements_file_parses_with_exact_pins():
    files = sorted(REQUIREMENTS.glob("*.txt"))
    assert [f.name for f in files] == [
        "base.txt",
        "cpu.txt",
        "docs.txt",
        "gpu.txt",
        "maintained.txt",
    ]
    for path in files:
        assert read_requirements(path), f"{path.name} pins nothing"


def test_docs_pins_add_to_base_without_runtime(base):
    """docs.txt is installed on top of cpu.txt or gpu.txt: no runtime, no clash."""
    docs = read_requirements(REQUIREMENTS / "docs.txt")
    assert runtimes(docs) == []
    clashes = {
        name: (version, base[name])
        for name, version in docs.items()
        if name in base and base[name] != version
    }
    assert not clashes, f"docs.txt and base.txt pin different versions: {clashes}"


def test_base_has_no_runtime_and_no_onnx(base):
    assert runtimes(base) == [], "the onnxruntime package belongs in the variants' files only"
    assert PER_VARIANT not in base, "onnx is pinned per variant, beside its runtime"


def test_each_variant_lists_exactly_one_runtime(cpu, gpu, maintained):
    assert runtimes(cpu) == [CPU_RUNTIME]
    assert runtimes(gpu) == [GPU_RUNTIME]
    assert runtimes(maintained) == [MAINTAINED_RUNTIME]


def test_variants_share_base_pins_and_runtime_version(base, cpu, gpu, maintained):
    """Each variant is base.txt plus onnx, its runtime (and the GPU variant's CUDA libraries): no
    pin of base.txt is repeated or changed there."""
    for variant in (cpu, gpu, maintained):
        assert {
            k: v
            for k, v in variant.items()
            if k != PER_VARIANT and not k.startswith((RUNTIME_PREFIX, CUDA_PREFIX))
        } == base
    assert cpu[CPU_RUNTIME] == gpu[GPU_RUNTIME]
    assert cpu[PER_VARIANT] == gpu[PER_VARIANT] == "1.17.0"


def test_maintained_variant_has_the_maintained_runtime_and_a_newer_onnx(base, cpu, maintained):
    """The maintained variant: onnxruntime (no training module), onnx 1.18 or later (1.17 has no
    wheel for Python 3.13), and everything the notebooks and tests need, at base.txt's pins."""
    assert runtimes(maintained) == [MAINTAINED_RUNTIME]
    assert {"torch", "scikit-learn", "skl2onnx", "jupyterlab", "nbval", "dask"} <= set(maintained)
    assert tuple(map(int, maintained[PER_VARIANT].split(".")[:2])) >= (1, 18)
    assert maintained[PER_VARIANT] != cpu[PER_VARIANT]


def test_environment_yml_matches_cpu_requirements(environment, cpu):
    _, env_pins = environment
    missing = sorted(set(cpu) - set(env_pins))
    extra = sorted(set(env_pins) - set(cpu))
    assert not missing, f"pinned in requirements/cpu.txt but not in environment.yml: {missing}"
    assert not extra, f"pinned in environment.yml but not in requirements/cpu.txt: {extra}"
    differ = {name: (cpu[name], env_pins[name]) for name in cpu if cpu[name] != env_pins[name]}
    assert not differ, f"versions differ (requirements, environment.yml): {differ}"


def test_environment_yml_header(environment):
    env, _ = environment
    assert env["name"] == "ort-training"
    plain = [dep for dep in env["dependencies"] if isinstance(dep, str)]
    assert "python=3.11" in plain
    assert "pip" in plain


def installed_version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def test_installed_packages_match_pins(cpu, gpu, maintained):
    """The environment running the tests holds one runtime and the pinned releases of its variant
    (onnxruntime-gpu stands for the maintained variant's onnxruntime, at the same version)."""
    present = [
        name
        for name in [CPU_RUNTIME, GPU_RUNTIME, MAINTAINED_RUNTIME, "onnxruntime-gpu"]
        if installed_version(name)
    ]
    assert len(present) == 1, (
        f"exactly one onnxruntime package may be installed, found {present}; "
        "uninstall all of them and reinstall one (make setup)"
    )
    runtime = present[0]
    variant = {CPU_RUNTIME: cpu, GPU_RUNTIME: gpu}.get(runtime, maintained)
    pins = {
        (runtime if name == MAINTAINED_RUNTIME else name): version
        for name, version in variant.items()
        if not name.startswith(CUDA_PREFIX)
    }
    wrong = {}
    for name, pinned in pins.items():
        found = installed_version(name)
        # A local version label (torch 2.13.0+cpu) still satisfies ==2.13.0.
        if found is None or found.split("+", 1)[0] != pinned:
            wrong[name] = (pinned, found)
    assert not wrong, f"installed versions differ from the pins (pin, installed): {wrong}"


def test_make_setup_refuses_a_python_without_wheels_and_says_how_to_get_one(tmp_path):
    """The version check of `make setup`, with the accepted list narrowed to one the running Python
    is not."""
    import sys

    venv = tmp_path / "venv"
    result = run_make(
        f"VENV={venv}",
        f"PYTHON={sys.executable}",
        "PYTHON_VERSIONS_cpu=3.99",
        "GPU=0",
        f"{venv}/bin/python",
    )
    assert result.returncode != 0 and not venv.exists()
    assert "needs Python 3.99" in result.stderr and "uv python install 3.99" in result.stderr


def test_make_picks_an_accepted_python():
    """Without PYTHON=..., make takes a Python its variant accepts (the variant follows what is
    on PATH: the CPU variant where 3.12 or 3.11 runs, the maintained one where only 3.13 does)."""
    import re as _re
    import subprocess

    line = run_make("help", check=True).stdout.splitlines()[-1]
    found = _re.search(r"VARIANT=(\w+) PYTHON=(\S*) \(Python ([0-9. ]+) accepted\)", line)
    assert found, line
    variant, python, accepted = found.groups()
    assert variant in ("cpu", "maintained") and python, line
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert version in accepted.split(), (version, line)


def _make_variables(tmp_path, pythons, *args):
    """`make help`'s last line for a new environment, with a PATH whose only Pythons are
    ``pythons`` (scripts that run this interpreter under those names)."""
    import sys

    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    for name in pythons:
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        script.chmod(0o755)
    env = {"PATH": str(folder), "HOME": str(tmp_path)}
    result = run_make("help", f"VENV={tmp_path / 'venv'}", *args, env=env, check=True)
    return result.stdout.splitlines()[-1]


def test_a_new_environment_takes_the_cpu_variant_where_python_3_12_or_3_11_works(tmp_path):
    line = _make_variables(tmp_path, ["python3.11", "python3.12", "python3.13"])
    assert "VARIANT=cpu" in line and f"PYTHON={tmp_path / 'bin' / 'python3.12'} " in line


def test_a_new_environment_takes_the_maintained_variant_where_only_python_3_13_works(tmp_path):
    """No Python 3.11 or 3.12 on PATH, a 3.13: the maintained variant, on it."""
    line = _make_variables(tmp_path, ["python3.13"])
    assert f"VARIANT=maintained PYTHON={tmp_path / 'bin' / 'python3.13'} " in line
    assert "(Python 3.13 3.12 3.11 accepted)" in line


def test_variant_and_gpu_choose_the_variant_over_what_python_finds(tmp_path):
    assert "VARIANT=cpu" in _make_variables(tmp_path, ["python3.13"], "GPU=0")
    assert "VARIANT=gpu" in _make_variables(tmp_path / "1", ["python3.11"], "VARIANT=gpu")


def test_make_refuses_an_unknown_variant():
    result = run_make("help", "VARIANT=tpu")
    assert result.returncode != 0 and "the variants are cpu gpu maintained" in result.stderr


def _dry_run(*args):
    result = run_make("-n", *args)
    return result.returncode, result.stdout + result.stderr


def test_the_maintained_variant_is_the_maintained_environment(tmp_path):
    """In the maintained variant, make setup-maintained (and so make test and make fuzz) use $(VENV)
    itself: nothing builds or runs .venv-maintained."""
    venv = tmp_path / "venv"
    status, out = _dry_run("setup-maintained", "test", "fuzz", "VARIANT=maintained", f"VENV={venv}")
    assert status == 0, out
    assert f"{venv}/bin/python -m pip install -r requirements/maintained.txt" in out
    assert '--display-name "Python (ort-training, maintained onnxruntime)"' in out
    assert f"PORTABLE_PYTHON=${{PORTABLE_PYTHON:-{venv}/bin/python}}" in out
    assert ".venv-maintained" not in out and "--confcutdir=tests/portable" not in out
    # in the CPU variant it builds an environment of its own (one not built yet: a dry run of an
    # up-to-date .venv-maintained would print nothing to do)
    other = tmp_path / "maintained"
    status, out = _dry_run("setup-maintained", "GPU=0", f"VENV={venv}", f"MAINTAINED_VENV={other}")
    assert status == 0 and f"{other}/bin/python -m pip install -r" in out
    status, out = _dry_run("setup", "GPU=0", f"VENV={venv}", f"MAINTAINED_VENV={venv}")
    assert status != 0 and "in the maintained variant only" in out


def test_make_setup_says_the_backend_and_switches_runtimes(tmp_path):
    """Every variant's set-up ends with the backend, and uninstalls another variant's runtime
    first."""
    venv = tmp_path / "venv"
    for variant, runtime in (
        ("cpu", "onnxruntime-training-cpu"),
        ("gpu", "onnxruntime-training"),
        ("maintained", "onnxruntime"),
    ):
        status, out = _dry_run("setup", f"VARIANT={variant}", f"VENV={venv}")
        assert status == 0, out
        assert f'[ "$installed" != "{runtime}" ]' in out
        assert f"-m pip install -r requirements/{variant}.txt" in out
        assert 'print("backend:", backend_summary())' in out


#: The Python CI runs the maintained environment's tests on (.ci/run: make setup-maintained).
MAINTAINED_TESTED_PYTHON = "3.13"


def test_pyproject_accepts_the_pythons_make_accepts():
    """pip refuses `pip install -e .` outside requires-python: it must hold every version make setup
    takes, and the Python the maintained environment is tested on (CI's: 3.13), no other."""
    import re as _re

    makefile = (ROOT / "Makefile").read_text()
    versions = set()
    for variant in ("cpu", "gpu", "maintained"):
        versions |= set(
            _re.search(rf"^PYTHON_VERSIONS_{variant} := (.+)$", makefile, _re.M).group(1).split()
        )
    versions.add(MAINTAINED_TESTED_PYTHON)
    text = (ROOT / "pyproject.toml").read_text()
    low, high = _re.search(r'^requires-python = ">=(3\.\d+),<(3\.\d+)"$', text, _re.M).groups()
    minor = lambda v: int(v.split(".")[1])  # noqa: E731
    assert {v for v in versions if not minor(low) <= minor(v) < minor(high)} == set(), (
        versions,
        low,
        high,
    )
    assert minor(low) == min(map(minor, versions)) and minor(high) == max(map(minor, versions)) + 1


def test_gpu_variant_pins_the_cuda_libraries_the_helpers_load(cpu, gpu):
    """Each package that helpers.core.machine.cuda_libraries looks for is pinned in gpu.txt only."""
    from helpers.core.machine.cuda_libraries import CUDA_PACKAGES

    assert sorted(k for k in gpu if k.startswith(CUDA_PREFIX)) == sorted(
        p for p, _, _ in CUDA_PACKAGES
    )
    assert not [k for k in cpu if k.startswith(CUDA_PREFIX)]


def test_make_setup_maintained_names_the_pythons_it_needs(tmp_path):
    """The maintained environment's interpreter check, with the accepted list narrowed to a
    version that no machine has, then to one the running Python is not."""
    import sys

    venv = tmp_path / "maintained"
    common = [f"MAINTAINED_VENV={venv}", "MAINTAINED_PYTHON_VERSIONS=3.99"]
    missing = run_make(*common, f"{venv}/bin/python")
    assert missing.returncode != 0 and "no Python 3.99 found" in missing.stderr
    wrong = run_make(*common, f"MAINTAINED_PYTHON={sys.executable}", f"{venv}/bin/python")
    assert wrong.returncode != 0 and "the maintained onnxruntime needs Python 3.99" in wrong.stderr
    assert not venv.exists()
