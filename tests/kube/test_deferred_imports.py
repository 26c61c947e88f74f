"""``fleet.exports.defer``: kr8s's unused dependencies load on first use, and then work as imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run(code: str, *, path: Path | None = None) -> str:
    env_path = [str(path)] if path else []
    probe = f"import sys; sys.path[:0] = {env_path!r}\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()


def test_a_deferred_module_runs_on_first_attribute_read_once(tmp_path: Path) -> None:
    (tmp_path / "probe_mod.py").write_text(
        "import sys\nsys.stdout.write('ran;')\nVALUE = 42\ndef get():\n    return VALUE\n"
    )
    out = run(
        """
        import sys, threading
        from fleet.exports import defer
        defer("probe_mod", "no_such_module_here")
        import probe_mod
        print("imported;", end="")
        got = []
        threads = [threading.Thread(target=lambda: got.append(probe_mod.get())) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(got == [42] * 8, sys.modules["probe_mod"].VALUE, probe_mod.VALUE, hasattr(probe_mod, "nothing"), end=";")
        try:
            import no_such_module_here
        except ModuleNotFoundError:
            print("missing", end="")
        """,
        path=tmp_path,
    )
    assert out == "imported;ran;True 42 42 False;missing"


def test_a_deferred_module_that_fails_raises_at_first_use_and_again(tmp_path: Path) -> None:
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('broken at import')\n")
    out = run(
        """
        from fleet.exports import defer
        defer("broken_mod")
        import broken_mod
        for _ in range(2):
            try:
                broken_mod.anything
            except RuntimeError as exc:
                print(exc, end=";")
        """,
        path=tmp_path,
    )
    assert out == "broken at import;broken at import;"


def test_kr8s_dependencies_fleet_does_not_call_are_not_loaded_until_used() -> None:
    out = run(
        """
        import sys
        import fleet.kube.clients
        import fleet.manifests.kinds  # pydantic models: inspect.getmodule reads every module's __file__
        api, config = sys.modules["kr8s._api"], sys.modules["kr8s._config"]
        real = ("httpx_ws._api", "jsonpath.path", "cryptography.x509.base")
        print([name in sys.modules for name in real], end=";")
        print(config.jsonpath.findall("$.a", {"a": 1}), end=";")
        print(callable(api.httpx_ws.aconnect_ws), callable(api.x509.load_pem_x509_certificate), end=";")
        print([name in sys.modules for name in real])
        """
    )
    assert out == "[False, False, False];[1];True True;[True, True, True]"
