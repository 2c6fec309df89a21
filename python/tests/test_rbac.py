"""DeerFlow's tests of its ``RbacAuthorizationProvider``
(``backend/tests/test_rbac_authorization_provider.py``), restated through
the Python package: guardhost's built-in RBAC provider behind
``guardhost.deerflow:GuardhostProvider`` (``evaluate`` for ``authorize``,
``filter_resources`` for DeerFlow's assembly layer). The tool resource is
what a tool-call guard decides; the other resource types are the Rust
crate's tests (``plugins/rbac``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

import guardhost
from guardhost.deerflow import GuardhostProvider
from guardhost.types import GuardrailRequest


def provider(roles):
    return GuardhostProvider(use="builtin:RbacAuthorizationProvider", config={"roles": roles})


def allowed(p, target, role="user"):
    return p.evaluate(GuardrailRequest(tool_name=target, tool_input={}, user_role=role)).allow


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"allow": "*"}, {"bash": True, "write_file": True}),
        ({"allow": True}, {"bash": True}),
        ({"allow": False}, {"bash": False, "web_search": False}),
        ({"allow": ["web_search", "read_file"]}, {"web_search": True, "read_file": True, "bash": False}),
        ({"allow": []}, {"bash": False}),
        ({"deny": ["bash"]}, {"bash": False, "web_search": True}),
        ({"allow": "*", "deny": ["bash"]}, {"bash": False, "web_search": True}),
        ({"allow": ["bash", "web_search"], "deny": ["bash"]}, {"bash": False, "web_search": True}),
        ({"allow": True, "deny": ["bash"]}, {"bash": False}),
    ],
)
def test_allow_and_deny_semantics(policy, expected):
    p = provider({"user": {"tools": policy}})
    for target, allow in expected.items():
        assert allowed(p, target) is allow, (policy, target)


def test_roles_are_resolved_and_an_unknown_or_missing_one_is_an_error():
    p = provider({"admin": {"tools": {"allow": "*"}}, "user": {"tools": {"allow": []}}})
    assert allowed(p, "bash", "admin") is True
    assert allowed(p, "bash", "user") is False
    with pytest.raises(guardhost.ProviderError, match="Unknown role"):
        allowed(p, "bash", "editor")
    for role in (None, ""):
        with pytest.raises(guardhost.ProviderError, match="no role"):
            allowed(p, "bash", role)
    # A known role without a policy for tools is unrestricted.
    assert allowed(provider({"admin": {}}), "anything", "admin") is True


def test_sync_and_async_agree():
    p = provider({"user": {"tools": {"allow": "*", "deny": ["bash"]}}})
    for target in ("bash", "web_search"):
        request = GuardrailRequest(tool_name=target, tool_input={}, user_role="user")
        assert asyncio.run(p.aevaluate(request)).allow == p.evaluate(request).allow


def principal(role):
    return SimpleNamespace(role=role, user_id=None, attributes={})


def test_filter_resources_keeps_order_and_duplicates_and_agrees_with_authorize():
    p = provider({"user": {"tools": {"allow": ["web_search", "bash", "read_file"]}}})
    assert p.filter_resources(principal("user"), "tool", ["bash", "web_search", "write_file", "read_file"]) == [
        "bash",
        "web_search",
        "read_file",
    ]
    everything = provider({"user": {"tools": {"allow": "*"}}})
    assert everything.filter_resources(principal("user"), "tool", ["a", "a", "b"]) == ["a", "a", "b"]
    candidates = ["a", "b", "c"]
    provider({"user": {"tools": {"allow": ["a"]}}}).filter_resources(principal("user"), "tool", candidates)
    assert candidates == ["a", "b", "c"], "the input is not modified"
    assert provider({"admin": {}}).filter_resources(principal("admin"), "tool", ["a", "b"]) == ["a", "b"]
    deny_bash = provider({"user": {"tools": {"allow": "*", "deny": ["bash"]}}})
    names = ["bash", "web_search", "read_file", "write_file"]
    assert deny_bash.filter_resources(principal("user"), "tool", names) == [n for n in names if allowed(deny_bash, n)]
    for role, says in ((None, "no role"), ("", "no role"), ("editor", "Unknown role")):
        with pytest.raises(guardhost.ProviderError, match=says):
            everything.filter_resources(principal(role), "tool", ["bash"])


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"roles": {"user": {}}, "bogus": True}, "does not accept config key `bogus`"),
        ({"rolez": {"user": {}}}, "does not accept config key `rolez`"),
        ({"roles": ["not", "a", "dict"]}, "roles must be a dict"),
        ({"roles": {"user": "not a dict"}}, "config must be a dict"),
        ({"roles": {"user": {"tools": "not a dict"}}}, "must be a dict"),
        ({"roles": {"user": {"tools": {"allow": 42}}}}, "allow must be"),
        ({"roles": {"user": {"tools": {"allow": "not_wildcard"}}}}, "allow string must be"),
        ({"roles": {"user": {"tools": {"allow": ["ok", 42]}}}}, "non-string"),
        ({"roles": {"user": {"tools": {"deny": ["ok", None]}}}}, "non-string"),
        ({"roles": {"user": {"tools": {"allow": ["ok", ""]}}}}, "non-string or empty"),
        ({"roles": {"user": {"tools": {"deny": 42}}}}, "deny must be"),
        ({"roles": {"": {"tools": {"allow": "*"}}}}, "non-empty string"),
        ({"roles": {"user": {"": {"allow": "*"}}}}, "invalid resource key"),
        ({"roles": {"user": {"tools": {"allow": None}}}}, "allow must not be null"),
        ({"roles": {"user": {"tools": {"allow": "*", "deny": None}}}}, "deny must not be null"),
        ({"roles": {"user": {"tools": {"alow": ["web_search"]}}}}, "unknown policy keys"),
        ({"roles": {"user": {"tools": {"allow": "*", "permt": ["extra"]}}}}, "unknown policy keys"),
    ],
)
def test_a_bad_config_fails_at_construction(config, says):
    with pytest.raises(guardhost.BuildError, match=says):
        GuardhostProvider(use="builtin:RbacAuthorizationProvider", config=config)


def test_changing_the_config_after_construction_changes_nothing():
    roles = {"user": {"tools": {"allow": ["bash"]}}}
    p = provider(roles)
    roles["user"]["tools"]["allow"] = ["web_search"]
    roles["admin"] = {"tools": {"allow": "*"}}
    assert allowed(p, "bash") is True
    assert allowed(p, "web_search") is False
    with pytest.raises(guardhost.ProviderError, match="Unknown role"):
        allowed(p, "bash", "admin")
