"""The plain API: load a config (file or dict), decide one call, errors,
the conformance kit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import textwrap

import pytest
from conftest import LIB_DIR

import guardhost

DEERFLOW_CONFIG = """\
models: []                      # the rest of a DeerFlow config.yaml is ignored
sandbox: {use: deerflow.sandbox.local:LocalSandboxProvider}
guardrails:
  enabled: true
  fail_closed: true
  passport: agents/ap_1.json
  provider:
    use: builtin:AllowlistProvider
    config:
      denied_tools: [bash, write_file]
"""


def write(tmp_path, text: str, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_load_a_deerflow_config_file_and_decide(tmp_path):
    guardrail = guardhost.load(write(tmp_path, DEERFLOW_CONFIG))
    assert guardrail is not None
    assert guardrail.name == "allowlist" and guardrail.fail_closed is True
    # A relative passport path is joined to the config file's directory.
    assert guardrail.passport == str(tmp_path / "agents" / "ap_1.json")
    denied = guardrail.decide("bash", {"command": "ls"}, {"thread_id": "t"}, "c-1")
    assert denied.allow is False and denied.provider_error is False
    assert [(r.code, r.message) for r in denied.reasons] == [("oap.tool_not_allowed", "tool 'bash' is denied")]
    assert denied.policy_id is None and denied.metadata == {}
    assert denied.message == {
        "content": "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). Reason: tool 'bash' is denied. Choose an alternative approach.",
        "tool_call_id": "c-1",
        "name": "bash",
        "status": "error",
    }
    allowed = guardrail.decide("read_file", {"path": "/x"})
    assert allowed.allow is True and allowed.message is None
    assert allowed.to_dict()["reasons"] == [{"code": "oap.allowed", "message": ""}]


def test_a_bare_section_file_and_a_dict_load_alike(tmp_path):
    section = write(tmp_path, "enabled: true\nprovider: {use: builtin:AllowlistProvider, config: {allowed_tools: [ls]}}\n")
    from_file = guardhost.load(section)
    from_dict = guardhost.load({"guardrails": {"enabled": True, "provider": {"use": "builtin:AllowlistProvider", "config": {"allowed_tools": ["ls"]}}}})
    for guardrail in (from_file, from_dict):
        assert guardrail.decide("ls").allow
        assert guardrail.decide("rm").reasons[0].message == "tool 'rm' not in allowlist"


def test_a_config_file_others_can_write_is_refused_unless_the_environment_accepts_it(tmp_path, monkeypatch):
    monkeypatch.delenv("GUARDHOST_ALLOW_INSECURE_CONFIG", raising=False)
    config = write(tmp_path, DEERFLOW_CONFIG)
    config.chmod(0o646)
    with pytest.raises(guardhost.ConfigError) as refused:
        guardhost.load(config)
    message = str(refused.value)
    assert f"{config} is world-writable (mode 646)" in message
    assert "GUARDHOST_ALLOW_INSECURE_CONFIG=1" in message
    monkeypatch.setenv("GUARDHOST_ALLOW_INSECURE_CONFIG", "1")
    assert guardhost.load(config).decide("bash").allow is False


def test_disabled_or_providerless_configs_install_nothing(tmp_path):
    assert guardhost.load({"guardrails": {"enabled": False, "provider": {"use": "builtin:AllowlistProvider"}}}) is None
    assert guardhost.load({"guardrails": {"enabled": True}}) is None
    assert guardhost.load(write(tmp_path, "models: []\n")) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("guardrails:\n", "`guardrails` must be a mapping of the section's keys .*found nothing under it"),
        ("guardrails: []\n", "found a list"),
        ("", "the config is empty"),
        ("guardrails:\n  enabled: true\n  provider: null\n", "`provider` is empty"),
        ("guardrail:\n  enabled: true\n", "a top-level key `guardrail`: did you mean `guardrails`"),
        ("guardrails:\nenabled: true\nprovider: {use: builtin:AllowlistProvider}\n", "`enabled`, `provider` belong in the `guardrails:` section"),
    ],
)
def test_a_broken_config_raises_instead_of_leaving_the_guardrail_out(tmp_path, text, expected):
    with pytest.raises(guardhost.ConfigError, match=expected):
        guardhost.load(write(tmp_path, text))


def test_a_guardrails_key_that_is_not_a_mapping_raises_from_a_dict_too():
    for section in (None, [], "on"):
        with pytest.raises(guardhost.ConfigError, match="`guardrails` must be a mapping"):
            guardhost.load({"guardrails": section})


def test_decide_on_the_async_path_and_fail_open(test_so):
    guardrail = guardhost.load({"enabled": True, "fail_closed": False, "provider": {"use": test_so("ErroringProvider")}})
    decision = guardrail.decide("bash", asynchronous=True)
    assert decision.allow is True and decision.provider_error is True
    assert decision.reasons[0].message == "guardrail provider error (fail-open)"


def test_an_interrupt_is_raised_with_its_payload(test_so):
    guardrail = guardhost.load({"enabled": True, "provider": {"use": test_so("InterruptingProvider")}})
    for asynchronous in (False, True):
        with pytest.raises(guardhost.Interrupt) as raised:
            guardrail.decide("deploy", asynchronous=asynchronous)
        assert raised.value.payload == {"tool": "deploy"}
        assert "human approval required" in str(raised.value)


def test_env_var_secrets_resolve_and_a_missing_one_is_a_config_error(monkeypatch):
    monkeypatch.setenv("GH_TEST_DENIED", "bash")
    guardrail = guardhost.load({"enabled": True, "provider": {"use": "builtin:AllowlistProvider", "config": {"denied_tools": ["$GH_TEST_DENIED"]}}})
    assert not guardrail.decide("bash").allow
    monkeypatch.delenv("GH_TEST_DENIED")
    with pytest.raises(guardhost.ConfigError, match="Environment variable GH_TEST_DENIED not found"):
        guardhost.load({"enabled": True, "provider": {"use": "builtin:AllowlistProvider", "config": {"denied_tools": ["$GH_TEST_DENIED"]}}})


def test_the_error_hierarchy():
    assert issubclass(guardhost.ConfigError, guardhost.GuardhostError)
    assert issubclass(guardhost.BuildError, guardhost.GuardhostError)
    assert issubclass(guardhost.ProviderError, guardhost.GuardhostError)
    assert issubclass(guardhost.Interrupt, guardhost.GuardhostError)
    assert issubclass(guardhost.GuardhostError, Exception)


BAD_CONFIGS = {
    "unknown key": ("guardrails:\n  enabled: true\n  provider: {use: builtin:AllowlistProvider, config: {denied: [bash]}}\n", guardhost.BuildError),
    "bad use": ("guardrails:\n  enabled: true\n  provider: {use: no-colon-here}\n", guardhost.BuildError),
    "missing library": ("guardrails:\n  enabled: true\n  provider: {use: ./libnothing.so:Nothing}\n", guardhost.BuildError),
    "python module path": ("guardrails:\n  enabled: true\n  provider: {use: 'mypkg.guard:Provider'}\n", guardhost.BuildError),
    "section key": ("guardrails:\n  enabled: true\n  failclosed: true\n", guardhost.ConfigError),
    "not yaml": ("guardrails: [\n", guardhost.ConfigError),
    "sha256 mismatch": ("guardrails:\n  enabled: true\n  provider: {use: LIB, sha256: '00'}\n", guardhost.BuildError),
}


def cli() -> str:
    path = os.environ.get("GUARDHOST_CLI", str(LIB_DIR / "guardhost"))
    assert os.path.isfile(path), f"{path} is missing: run scripts/test-python (it builds the guardhost command)"
    return path


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_error_messages_are_exactly_the_clis(tmp_path, case, allowlist_so):
    text, error_class = BAD_CONFIGS[case]
    config = write(tmp_path, text.replace("LIB", allowlist_so))
    with pytest.raises(error_class) as raised:
        guardhost.load(config)
    check = subprocess.run([cli(), "check", "--config", str(config)], capture_output=True, text=True)
    assert check.returncode == 2
    assert check.stderr.strip().splitlines()[-1] == f"guardhost: error: {raised.value}"


def test_a_missing_file_names_it(tmp_path):
    with pytest.raises(guardhost.ConfigError, match=f"cannot read config file {tmp_path}/nope.yaml"):
        guardhost.load(tmp_path / "nope.yaml")


def test_conformance_of_the_builtin_and_the_allowlist_library(allowlist_so):
    report = guardhost.conformance("builtin:AllowlistProvider", {"denied_tools": ["bash"]}, quick=True)
    assert report.passed and report["passed"] is True
    assert report["provider"] == "allowlist" and "PASS" in report.text
    library = guardhost.conformance(allowlist_so, {}, quick=True, iterations=200)
    assert library.passed, library.text


def test_conformance_fails_a_bad_provider(test_so):
    report = guardhost.conformance(test_so("PanickingProvider"), quick=True, iterations=100)
    assert not report.passed
    assert any(case["id"] == "evaluation.panics" for case in report.failures())
    missing = guardhost.conformance("./libnothing.so:Nothing")
    assert not missing.passed and missing.failures()[0]["id"] == "load"


def test_conformance_of_a_provider_program_and_hints_in_python_terms(tmp_path, allowlist_so):
    import pathlib
    import shutil
    import sys

    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python-provider" / "allowlist_provider.py"
    report = guardhost.conformance(command=[sys.executable, str(example)], config={"denied_tools": ["bash"]}, quick=True, iterations=200)
    assert report.passed, report.text
    assert report["provider"] == "py-allowlist"
    refused = guardhost.conformance(command=[sys.executable, str(example)], config={"deny_tools": ["bash"]}, quick=True)
    assert not refused.passed
    assert refused.failures()[0]["reason"].endswith("pass a config the provider accepts (`config=`)")
    # A library others may change: refused, and the hint is this function's own argument.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    library = shared / "liballowlist.so"
    shutil.copy(allowlist_so.rsplit(":", 1)[0], library)
    insecure = guardhost.conformance(f"{library}:AllowlistProvider", quick=True, iterations=200)
    assert not insecure.passed
    assert insecure.failures()[0]["reason"].endswith("or pass `allow_insecure_permissions=True`"), insecure.failures()[0]["reason"]
    allowed = guardhost.conformance(f"{library}:AllowlistProvider", quick=True, iterations=200, allow_insecure_permissions=True)
    assert allowed.passed, allowed.text
    with pytest.raises(TypeError, match="exactly one of them"):
        guardhost.conformance("builtin:AllowlistProvider", command=["python3", "x.py"])


def test_conformance_in_a_provider_process_with_a_seed(allowlist_so):
    report = guardhost.conformance(allowlist_so, {"denied_tools": ["bash"]}, quick=True, iterations=200, isolation="process", fuzz_seconds=0.2, seed=42)
    assert report.passed, report.text
    fuzz = next(case for case in report["cases"] if case["id"] == "fuzz")
    assert fuzz["metrics"]["seed"] == 42 and "seed 42" in fuzz["reason"]
    assert report["cases"][0]["reason"].endswith("in a provider process")
    with pytest.raises(ValueError, match="isolation must be"):
        guardhost.conformance(allowlist_so, isolation="elsewhere")


def test_the_gil_is_released_while_a_provider_decides(test_so):
    # Two decisions that can only finish together ("meet": each waits for
    # the other inside the provider) finish from two Python threads only if
    # neither holds the GIL while it waits.
    import threading

    guardrail = guardhost.load({"enabled": True, "provider": {"use": test_so("FaultyProvider")}})
    results = []

    def decide():
        results.append(guardrail.decide("meet", {"parties": 2}))

    threads = [threading.Thread(target=decide) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [d.reasons[0].code for d in results] == ["test.met", "test.met"]


def test_async_decisions_of_a_blocking_provider_do_not_block_the_loop(test_so):
    from guardhost.deerflow import GuardhostProvider
    from guardhost.types import GuardrailRequest

    p = GuardhostProvider(use=test_so("FaultyProvider"), timeout_ms=3000)
    assert p._core.may_block

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        first = asyncio.create_task(p.aevaluate(GuardrailRequest(tool_name="meet", tool_input={"parties": 2})))
        second = asyncio.create_task(p.aevaluate(GuardrailRequest(tool_name="meet", tool_input={"parties": 2})))
        decisions = await asyncio.gather(first, second)
        task.cancel()
        return decisions, ticks

    decisions, _ = asyncio.run(main())
    assert [d.reasons[0].code for d in decisions] == ["test.met", "test.met"]
