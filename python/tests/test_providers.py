"""Real providers through GuardhostProvider, sync and async: the built-in
allowlist, the allowlist library, the OAP library, a provider under
`isolation: process`; bad kwargs, missing files, panics and crashes."""

from __future__ import annotations

import asyncio
import hashlib
import os
import pathlib
import sys

import pytest

import guardhost
from guardhost.deerflow import GuardhostProvider
from guardhost.types import GuardrailRequest

PATHS = ["sync", "async"]


def decide(provider: GuardhostProvider, path: str, tool: str, args: dict | None = None, **fields):
    request = GuardrailRequest(tool_name=tool, tool_input=args or {}, **fields)
    if path == "sync":
        return provider.evaluate(request)
    return asyncio.run(provider.aevaluate(request))


@pytest.fixture(params=["builtin", "library", "library-process"])
def allowlist(request, allowlist_so):
    use = "builtin:AllowlistProvider" if request.param == "builtin" else allowlist_so
    isolation = "process" if request.param.endswith("process") else None
    return GuardhostProvider(use=use, config={"allowed_tools": ["ls", "bash"], "denied_tools": ["bash"]}, isolation=isolation, framework="deerflow")


@pytest.mark.parametrize("path", PATHS)
def test_the_allowlist_everywhere(allowlist, path):
    assert allowlist.name == "allowlist"
    assert decide(allowlist, path, "ls").allow
    both = decide(allowlist, path, "bash")
    assert not both.allow and both.reasons[0].message == "tool 'bash' is denied"
    unlisted = decide(allowlist, path, "rm")
    assert (unlisted.reasons[0].code, unlisted.reasons[0].message) == ("oap.tool_not_allowed", "tool 'rm' not in allowlist")


def test_an_isolated_provider_runs_in_another_process(allowlist_so):
    p = GuardhostProvider(use=allowlist_so, isolation="process", timeout_ms=2000)
    assert p.info["isolation"] == "process" and p.info["timeout_ms"] == 2000
    # Linux: calls go through shared memory unless told otherwise.
    assert p.info["transport"] == ("shared_memory" if sys.platform == "linux" else "pipes")
    denies = {"denied_tools": ["bash"]}
    shared = GuardhostProvider(use=allowlist_so, config=denies, isolation="process")
    pipes = GuardhostProvider(use=allowlist_so, config=denies, isolation="process", transport="pipes")
    assert pipes.info["transport"] == "pipes"
    for provider in (shared, pipes):
        assert not decide(provider, PATHS[0], "bash").allow
        assert decide(provider, PATHS[0], "read_file", {"path": "/tmp/x"}).allow


def test_a_transport_without_a_provider_process_or_of_no_kind_is_refused(allowlist_so):
    with pytest.raises(guardhost.BuildError, match="add `isolation: process`, or remove `transport`"):
        GuardhostProvider(use=allowlist_so, transport="pipes")
    with pytest.raises(guardhost.ConfigError, match="expected `shared_memory` or `pipes`"):
        GuardhostProvider(use=allowlist_so, isolation="process", transport="mmap")


@pytest.mark.parametrize("isolation", [None, "process"])
@pytest.mark.parametrize("path", PATHS)
def test_the_oap_library(oap_so, passport, path, isolation):
    p = GuardhostProvider(use=oap_so, config={"passport_path": str(passport)}, isolation=isolation, framework="deerflow")
    allowed = decide(p, path, "bash", {"command": "ls -la"})
    assert allowed.allow, allowed
    blocked = decide(p, path, "bash", {"command": "sudo rm -rf /tmp/x"})
    assert not blocked.allow and blocked.reasons[0].code.startswith("oap.")
    assert blocked.policy_id is None or isinstance(blocked.policy_id, str)


def test_relative_paths_are_taken_from_the_working_directory_or_base_dir(oap_so, passport, monkeypatch, tmp_path):
    monkeypatch.chdir(passport.parent)
    p = GuardhostProvider(use=oap_so, config={"passport_path": "passport.json"})
    assert decide(p, "sync", "bash", {"command": "ls"}).allow
    monkeypatch.chdir(tmp_path)
    with pytest.raises(guardhost.BuildError, match=str(tmp_path / "passport.json")):
        GuardhostProvider(use=oap_so, config={"passport_path": "passport.json"})
    p = GuardhostProvider(use=oap_so, config={"passport_path": "passport.json"}, base_dir=passport.parent)
    assert decide(p, "sync", "bash", {"command": "ls"}).allow
    # The library too.
    lib = os.path.basename(oap_so.split(":")[0])
    with pytest.raises(guardhost.BuildError, match=str(tmp_path / lib)):
        GuardhostProvider(use=f"{lib}:OAPGuardrailProvider")


def test_bad_construction_fails_with_the_hosts_message(allowlist_so, tmp_path):
    with pytest.raises(guardhost.BuildError, match="provider 'allowlist' does not accept config key `allowed`; it accepts: allowed_tools, denied_tools"):
        GuardhostProvider(use="builtin:AllowlistProvider", config={"allowed": ["ls"]})
    with pytest.raises(guardhost.BuildError, match="names no built-in provider"):
        GuardhostProvider(use="builtin:Nope")
    with pytest.raises(guardhost.BuildError, match=str(tmp_path / "libmissing.so")):
        GuardhostProvider(use="libmissing.so:X", base_dir=tmp_path)
    with pytest.raises(guardhost.BuildError, match="SHA-256"):
        GuardhostProvider(use=allowlist_so, sha256="0" * 64)
    digest = hashlib.sha256(open(allowlist_so.split(":")[0], "rb").read()).hexdigest()
    assert GuardhostProvider(use=allowlist_so, sha256=digest).name == "allowlist"
    with pytest.raises(guardhost.ConfigError, match="isolation: unknown variant \\(a string of 7 characters\\)"):
        GuardhostProvider(use=allowlist_so, isolation="sandbox")
    with pytest.raises(TypeError):
        GuardhostProvider(use=allowlist_so, not_a_key=1)  # type: ignore[call-arg]
    with pytest.raises(guardhost.BuildError, match="timeout_ms` must be at least 1"):
        GuardhostProvider(use=allowlist_so, timeout_ms=0)


def test_a_wrong_abi_library_is_refused(tmp_path):
    bogus = tmp_path / "libbogus.so"
    bogus.write_bytes(b"\x7fELF not really")
    bogus.chmod(0o700)
    with pytest.raises(guardhost.BuildError, match=str(bogus)):
        GuardhostProvider(use=f"{bogus}:Provider")


def test_a_panicking_constructor_is_a_build_error(test_so):
    with pytest.raises(guardhost.BuildError, match="constructor boom"):
        GuardhostProvider(use=test_so("PanickingConstructorProvider"))


@pytest.mark.parametrize("path", PATHS)
def test_a_panicking_provider_raises_a_provider_error(test_so, path):
    p = GuardhostProvider(use=test_so("PanickingProvider"))
    with pytest.raises(guardhost.ProviderError, match="boom on bash"):
        decide(p, path, "bash")


@pytest.mark.parametrize("path", PATHS)
def test_a_crash_under_isolation_is_a_provider_error_and_the_process_comes_back(test_so, path):
    p = GuardhostProvider(use=test_so("FaultyProvider"), isolation="process", timeout_ms=3000)
    with pytest.raises(guardhost.ProviderError):
        decide(p, path, "abort")
    with pytest.raises(guardhost.ProviderError):
        decide(p, path, "segfault")
    # The provider's process is restarted; the next call is decided.
    for _ in range(50):
        try:
            assert decide(p, path, "ls").allow
            break
        except guardhost.ProviderError:
            import time

            time.sleep(0.1)
    else:
        pytest.fail("the isolated provider never came back")


@pytest.mark.parametrize("path", PATHS)
def test_a_hang_under_a_timeout_is_a_provider_error(test_so, path):
    p = GuardhostProvider(use=test_so("FaultyProvider"), timeout_ms=200)
    with pytest.raises(guardhost.ProviderError):
        decide(p, path, "hang")


def test_the_isolated_provider_reports_the_construction_error(test_so):
    with pytest.raises(guardhost.BuildError, match="limit must be at most 10"):
        GuardhostProvider(use=test_so("FrameworkAwareProvider"), config={"limit": 11}, isolation="process")


EXAMPLE_PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python-provider" / "allowlist_provider.py"


@pytest.mark.parametrize("path", PATHS)
def test_a_provider_program_through_guardhost_provider(path):
    p = GuardhostProvider(command=[sys.executable, str(EXAMPLE_PROGRAM)], config={"denied_tools": ["bash"]}, timeout_ms=3000)
    assert p.name == "py-allowlist"
    assert p.info["isolation"] == "process" and p.info["source"] == {"kind": "program", "command": [sys.executable, str(EXAMPLE_PROGRAM)]}
    assert decide(p, path, "ls").allow
    denied = decide(p, path, "bash")
    assert (denied.allow, denied.reasons[0].message) == (False, "tool 'bash' is denied")


def test_a_provider_program_refusing_its_config_raises_build_error():
    with pytest.raises(guardhost.BuildError, match=r"refused to start: `denied_tools\[0\]` must be a string \(a tool name\), found a number"):
        GuardhostProvider(command=[sys.executable, str(EXAMPLE_PROGRAM)], config={"denied_tools": [1]})
    with pytest.raises(TypeError, match="exactly one of them"):
        GuardhostProvider(use="builtin:AllowlistProvider", command=["python3", "x.py"])


def test_the_langchain_middleware_takes_a_provider_program():
    from guardhost.langchain import GuardrailMiddleware

    middleware = GuardrailMiddleware(command=[sys.executable, str(EXAMPLE_PROGRAM)], provider_config={"denied_tools": ["bash"]})
    assert middleware.guardrail is not None
    assert middleware.guardrail.info["source"]["kind"] == "program"


@pytest.mark.parametrize("path", PATHS)
def test_shadow_mode_returns_a_denial_as_an_allow_that_says_what_would_have_been_denied(allowlist_so, path):
    for mode in ("warn", "observe"):
        p = GuardhostProvider(use=allowlist_so, config={"denied_tools": ["bash"]}, mode=mode)
        decision = decide(p, path, "bash")
        assert decision.allow
        assert decision.reasons[0].code == "guardhost.shadow"
        assert decision.reasons[0].message == f"{mode} mode: would have denied (oap.tool_not_allowed): tool 'bash' is denied"
        assert decision.metadata["would_deny"]["code"] == "oap.tool_not_allowed"
        assert decision.metadata["mode"] == mode
    enforcing = GuardhostProvider(use=allowlist_so, config={"denied_tools": ["bash"]}, mode="enforce")
    assert not decide(enforcing, path, "bash").allow
    with pytest.raises(guardhost.ConfigError, match="expected `enforce`, `warn` or `observe`"):
        GuardhostProvider(use=allowlist_so, mode="audit")


def test_the_deerflow_provider_writes_every_decision_to_its_decision_log(allowlist_so, test_so, tmp_path):
    log = tmp_path / "decisions.jsonl"
    p = GuardhostProvider(
        use=allowlist_so,
        config={"denied_tools": ["bash"]},
        decision_log={"path": str(log), "args": True, "mask": ["command"]},
    )
    decide(p, "sync", "bash", {"command": "cat /etc/shadow"})
    decide(p, "async", "read_file", {"path": "/x"})
    failing = GuardhostProvider(use=test_so("ErroringProvider"), decision_log={"path": str(log)})
    with pytest.raises(guardhost.ProviderError):
        decide(failing, "sync", "ls")
    import json
    import time

    # The writer threads write within milliseconds.
    deadline = time.time() + 10
    while len(log.read_text().splitlines()) < 3 and time.time() < deadline:
        time.sleep(0.01)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["tool"], e["outcome"]) for e in entries] == [("bash", "deny"), ("read_file", "allow"), ("ls", "error")]
    assert entries[0]["args"] == {"command": "***"} and entries[0]["provider"] == "allowlist"
    assert entries[2]["provider_error"] is True and "args" not in entries[2]
    assert len({e["decision_id"] for e in entries}) == 3
    with pytest.raises(guardhost.ConfigError, match="decision_log: unknown field `pth`"):
        GuardhostProvider(use=allowlist_so, decision_log={"pth": "x"})
