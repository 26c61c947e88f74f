"""fleet.kube against the real API server: SSA, dry-run, typed errors, pagination, discovery, watch."""

from __future__ import annotations

import uuid

import anyio
import httpx
import pytest

from fleet import kube
from fleet.sandbox import Sandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]


def _template(namespace: str, name: str, *, cls: str = "gpu.nvidia.com") -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": cls}}]}}},
    }


async def test_dry_run_apply_persists_nothing(admin_client: kube.Client, namespace: str) -> None:
    result = await admin_client.apply(_template(namespace, "dry"), dry_run=True)
    assert result["metadata"]["managedFields"][0]["manager"] == "fleet"
    with pytest.raises(kube.NotFound):
        await admin_client.get(kube.Ref("resource.k8s.io/v1", "ResourceClaimTemplate", namespace, "dry"))
    assert admin_client.counts.by_verb["apply-dry-run"] == 1 and admin_client.counts.writes == 0


async def test_conflict_carries_the_other_managers(admin_client: kube.Client, namespace: str) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {"owner": "a"}}}
    await admin_client.apply(ns, field_manager="team-script")
    ns["metadata"]["labels"] = {"owner": "b"}  # type: ignore[index]
    with pytest.raises(kube.Conflict) as err:
        await admin_client.apply(ns, field_manager="fleet")
    assert err.value.managers == ("team-script",)
    forced = await admin_client.apply(ns, field_manager="fleet", force=True)
    assert forced["metadata"]["labels"]["owner"] == "b"


async def test_invalid_object_reports_field_causes(admin_client: kube.Client) -> None:
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
        "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].model +"}}]},
    }
    with pytest.raises(kube.Invalid) as err:
        await admin_client.apply(bad, dry_run=True)
    assert any(c.field.startswith("spec.selectors[0].cel.expression") for c in err.value.causes)


async def test_unknown_field_is_rejected_strictly(admin_client: kube.Client, namespace: str) -> None:
    obj = _template(namespace, "typo")
    obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClasName"] = "x"  # type: ignore[index]
    with pytest.raises(kube.Invalid, match="deviceClasName"):
        await admin_client.apply(obj, dry_run=True)


async def test_list_follows_continue_tokens(admin_client: kube.Client, namespace: str) -> None:
    for i in range(5):
        await admin_client.apply(_template(namespace, f"t{i}"))
    kind = await admin_client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate")
    before = admin_client.counts.by_verb["list"]
    listed = await admin_client.list(kind, namespace=namespace, page_size=2)
    assert sorted(o["metadata"]["name"] for o in listed.items) == [f"t{i}" for i in range(5)]
    assert admin_client.counts.by_verb["list"] - before == 3
    assert all(o["kind"] == "ResourceClaimTemplate" for o in listed.items) and listed.resource_version


async def test_list_if_served_lists_a_served_kind_and_answers_none_for_an_unserved_one(
    admin_client: kube.Client, namespace: str
) -> None:
    await admin_client.apply(_template(namespace, "served"))
    listed = await admin_client.list_if_served(
        api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace=namespace
    )
    assert [o["metadata"]["name"] for o in listed] == ["served"]
    assert await admin_client.list_if_served(api_version="example.com/v1", kind="Nothing") == []


async def test_delete_with_a_stale_uid_is_a_conflict(admin_client: kube.Client, namespace: str) -> None:
    live = await admin_client.apply(_template(namespace, "gone"))
    ref = kube.Ref.of(live)
    with pytest.raises(kube.Conflict):
        await admin_client.delete(ref, uid="00000000-0000-0000-0000-000000000000")
    await admin_client.delete(ref, uid=live["metadata"]["uid"])
    with pytest.raises(kube.NotFound):
        await admin_client.delete(ref)


async def test_restricted_user_gets_forbidden_once(restricted_client: kube.Client) -> None:
    kind = await restricted_client.kind(api_version="resource.k8s.io/v1", kind="DeviceClass")
    with pytest.raises(kube.Forbidden, match="alice"):
        await restricted_client.list(kind)
    assert restricted_client.counts.by_verb["list"] == 1, "no re-authentication retries on 403"


async def test_discovery_knows_dra_kinds(admin_client: kube.Client) -> None:
    found = {(k.api_version, k.kind): k for k in await admin_client.discover()}
    dc = found[("resource.k8s.io/v1", "DeviceClass")]
    assert (dc.plural, dc.namespaced) == ("deviceclasses", False)
    assert found[("resource.k8s.io/v1", "ResourceClaimTemplate")].namespaced
    with pytest.raises(kube.NotFound):
        await admin_client.kind(api_version="example.com/v1", kind="Nothing")


async def test_unreachable_server_after_retries(sandbox: Sandbox) -> None:
    client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), timeout=5)
    client._auth.server = "https://127.0.0.1:1"  # a closed port on the same machine
    await client.close()
    client.retry = kube.RetryPolicy(attempts=3, base=0.01, cap=0.02)
    with pytest.raises(kube.Unreachable):
        await client.version()
    assert client.counts.by_verb["get"] == 3


async def test_watch_lists_then_streams_changes(admin_client: kube.Client, namespace: str) -> None:
    kind = await admin_client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate")
    await admin_client.apply(_template(namespace, "before"))
    seen: list[tuple[str, str]] = []
    with anyio.fail_after(30):
        async for event in kube.watch(client=admin_client, kind=kind, namespace=namespace, inactivity=10):
            seen.append((event.type, event.object.get("metadata", {}).get("name", "")))
            if event.type == "SYNCED":
                await admin_client.apply(_template(namespace, "after"))
            if event.type == "ADDED":
                break
    assert seen == [("LISTED", "before"), ("SYNCED", ""), ("ADDED", "after")]


async def test_watch_from_an_expired_version_relists_once(
    admin_client: kube.Client, namespace: str, sandbox: Sandbox
) -> None:
    # PodTemplates bypass the sandbox's watch cache (--watch-cache-sizes=podtemplates#0), so
    # after an etcd compaction a watch from version 1 gets the real 410 Gone from etcd.
    kind = await admin_client.kind(api_version="v1", kind="PodTemplate")
    await admin_client.apply(_pod_template(namespace, "present"))
    etcd = f"http://127.0.0.1:{sandbox.ports['etcd']}/v3/kv"
    async with httpx.AsyncClient() as http:
        head = (await http.post(f"{etcd}/range", json={"key": "AA=="})).json()["header"]
        await http.post(f"{etcd}/compaction", json={"revision": head["revision"], "physical": True})
    assert await _answers_gone(admin_client, kind, namespace), "etcd was compacted: version 1 must be gone"
    seen: list[str] = []
    with anyio.fail_after(30):
        async for event in kube.watch(client=admin_client, kind=kind, namespace=namespace, since="1"):
            seen.append(event.type)
            if event.type == "SYNCED":
                break
    assert seen == ["LISTED", "SYNCED"]
    assert admin_client.counts.by_verb["watch"] == 1 and admin_client.counts.by_verb["list"] == 1, (
        "one 410, one relist: no hot loop"
    )


def _pod_template(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }


async def _answers_gone(client: kube.Client, kind: kube.Kind, namespace: str) -> bool:
    params = {"watch": "true", "resourceVersion": "1"}
    with anyio.move_on_after(3):
        try:
            async with client.stream(
                "GET", kind.path(namespace=namespace), verb="probe", params=params, read_timeout=3
            ) as response:
                async for line in response.aiter_lines():
                    return '"code":410' in line.replace(" ", "")
        except kube.KubeError as err:
            return err.status == 410
    return False


async def test_silent_watch_is_reopened_without_relisting(admin_client: kube.Client, namespace: str) -> None:
    kind = await admin_client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate")
    fast = kube.RetryPolicy(attempts=1000, base=0.05, cap=0.1)
    seen: list[str] = []

    async def later() -> None:
        await anyio.sleep(2.5)
        await admin_client.apply(_template(namespace, "late"))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(later)
            async for event in kube.watch(
                client=admin_client, kind=kind, namespace=namespace, inactivity=0.5, backoff=fast
            ):
                seen.append(event.type)
                if event.type == "ADDED":
                    break
    assert seen == ["SYNCED", "ADDED"]
    assert admin_client.counts.by_verb["list"] == 1, "a silent connection is re-opened, not relisted"
    assert admin_client.counts.by_verb["watch"] >= 3


async def test_merge_patch_carries_a_resource_version_precondition(admin_client: kube.Client, namespace: str) -> None:
    obj = _template(namespace, "patched")
    obj["metadata"]["labels"] = {"a": "1", "b": "2"}  # type: ignore[index]
    live = await admin_client.apply(obj, field_manager="someone")
    ref = kube.Ref.of(live)
    stale = {"metadata": {"resourceVersion": "1", "labels": {"a": None}}}
    with pytest.raises(kube.Conflict):
        await admin_client.patch(ref, stale, field_manager="fleet")
    fresh = {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"], "labels": {"a": None}}}
    patched = await admin_client.patch(ref, fresh, field_manager="fleet")
    assert patched["metadata"]["labels"] == {"b": "2"}
    assert admin_client.counts.by_verb["patch"] == 2


async def test_discovery_says_which_kinds_can_be_listed(admin_client: kube.Client) -> None:
    found = {(k.api_version, k.kind): k for k in await admin_client.discover()}
    assert found[("v1", "ConfigMap")].listable and "list" in found[("v1", "ConfigMap")].verbs
    binding = found[("v1", "Binding")]
    assert binding.namespaced and not binding.listable, "create-only: listing it would be a 405"


async def test_an_impersonating_client_is_the_same_connection_acting_as_another_user(
    admin_client: kube.Client, namespace: str
) -> None:
    """The API server answers a SelfSubjectReview as the impersonated user; a write it may not make is a
    Forbidden naming that user; the requests count where the own client's do."""
    user = f"system:serviceaccount:{namespace}:nobody"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    as_user = admin_client.impersonating(user)
    assert as_user.impersonating(user) is as_user
    answer = await as_user.request("POST", path, verb="create", body=review)
    assert answer["status"]["userInfo"]["username"] == user
    assert "system:serviceaccounts" in answer["status"]["userInfo"]["groups"]
    for own in (admin_client, as_user.impersonating("")):
        answer = await own.request("POST", path, verb="create", body=review)
        assert answer["status"]["userInfo"]["username"] != user, "the own identity is not impersonated"
    with pytest.raises(kube.Forbidden) as err:
        await as_user.apply(_template(namespace, "as-nobody"), dry_run=True)
    assert f'User "{user}" cannot patch resource "resourceclaimtemplates"' in err.value.what
    assert admin_client.counts.by_verb["apply-dry-run"] == 1
