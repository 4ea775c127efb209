"""The Kubernetes DaemonSet of the agent: parsed and checked field by field, its loop run for real
against a live server, and checked by kubectl where this machine has it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.deploy.helpers import AGENT, DAEMONSET, load_agent, wait_for

KUBECTL = shutil.which("kubectl")
NODE_NAME = "gpu-node-07"


def documents() -> list[dict]:
    return [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d]


def daemonset() -> dict:
    found = [d for d in documents() if d["kind"] == "DaemonSet"]
    assert len(found) == 1
    return found[0]


def pod_spec() -> dict:
    return daemonset()["spec"]["template"]["spec"]


def container() -> dict:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    return containers[0]


def env_entries() -> dict[str, dict]:
    return {e["name"]: e for e in container()["env"]}


def mounts_by_host_path() -> dict[str, dict]:
    """hostPath -> the container's volumeMount of it."""
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    out = {}
    for mount in container()["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            out[volume["hostPath"]["path"]] = mount
    return out


def loop_script() -> str:
    c = container()
    assert c["command"] == ["/bin/sh", "-c"] and len(c["args"]) == 1
    return c["args"][0]


def agent_invocation(script: str) -> list[str]:
    """The words of the line that runs the agent (continuation lines joined)."""
    joined = script.replace("\\\n", " ")
    line = next(l for l in joined.splitlines() if re.match(r'\s*python3 "\$agent"', l))
    return shlex.split(line)


# -------------------------------------------------------------------------------- the manifest


def test_documents_are_a_namespace_and_a_daemonset():
    docs = documents()
    assert [d["kind"] for d in docs] == ["Namespace", "DaemonSet"]
    namespace = docs[0]["metadata"]["name"]
    assert docs[1]["metadata"]["namespace"] == namespace
    assert docs[1]["apiVersion"] == "apps/v1"
    assert not [d for d in docs if d["kind"] == "Secret"], "the token Secret is created apart, never applied over"


def test_selector_matches_the_pod_labels():
    spec = daemonset()["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()


def test_runs_on_gpu_nodes_only_and_tolerates_their_taints():
    spec = pod_spec()
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}  # a string, as labels are
    tolerations = spec["tolerations"]
    gpu = [t for t in tolerations if t.get("key") == "nvidia.com/gpu"]
    assert gpu and all(t["operator"] == "Exists" for t in gpu)
    assert {t.get("effect") for t in gpu} >= {"NoSchedule"}
    assert not [t for t in tolerations if t.get("operator") == "Exists" and "key" not in t], \
        "a blanket toleration would land on every node"


def test_nvidia_runtime_gives_nvidia_smi_without_taking_a_gpu():
    spec, env = pod_spec(), env_entries()
    assert spec.get("runtimeClassName") == "nvidia" or env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]["value"]
    resources = container().get("resources", {})
    for kind in ("requests", "limits"):
        assert not [r for r in resources.get(kind, {}) if "gpu" in r], "the agent must not take a GPU from jobs"


def test_host_sys_and_proc_are_mounted_read_only_and_nothing_else_of_the_host():
    by_host = mounts_by_host_path()
    assert set(by_host) == {"/sys", "/proc"}
    assert all(m.get("readOnly") is True for m in by_host.values())
    volumes = pod_spec()["volumes"]
    for v in volumes:
        assert set(v) & {"hostPath", "emptyDir", "secret", "configMap"}, v
        if "hostPath" in v:
            assert v["hostPath"]["type"] == "Directory"
    writable = [m for m in container()["volumeMounts"] if not m.get("readOnly")]
    assert all("emptyDir" in next(v for v in volumes if v["name"] == m["name"]) for m in writable)


def test_no_host_namespaces_and_an_unprivileged_read_only_container():
    spec = pod_spec()
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(field), field
    assert spec.get("automountServiceAccountToken") is False  # it talks to no Kubernetes API
    assert "serviceAccountName" not in spec
    sc = container()["securityContext"]
    assert sc.get("privileged") is not True and sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")


def test_token_comes_from_a_secret():
    env = env_entries()
    ref = env["TOPOWEB_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] and ref["key"]
    assert "value" not in env["TOPOWEB_TOKEN"]
    assert "tw_" not in json.dumps(daemonset()), "no token in the manifest"
    assert f"secret generic {ref['name']} --from-literal={ref['key']}=" in DAEMONSET.read_text()  # the how-to


def test_command_fetches_the_agent_and_runs_it_with_the_server_url():
    script, env = loop_script(), env_entries()
    assert env["TOPOWEB_SERVER"]["value"].startswith("https://")
    assert '"$TOPOWEB_SERVER"' in script and "/agent.py" in script
    words = agent_invocation(script)
    assert words[:2] == ["python3", "$agent"]
    args = words[2:]
    assert args[args.index("--server") + 1] == "$TOPOWEB_SERVER"
    assert args[args.index("--hostname") + 1] == "$NODE_NAME"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    by_host = mounts_by_host_path()
    assert args[args.index("--sysfs-root") + 1] == by_host["/sys"]["mountPath"]
    assert args[args.index("--proc-root") + 1] == by_host["/proc"]["mountPath"]
    assert args[args.index("--splay") + 1] == "$TOPOWEB_SPLAY" and int(env["TOPOWEB_SPLAY"]["value"]) > 0
    assert "--quiet" in args and "--token" not in args  # the token stays in the environment
    # The agent accepts every option (the placeholders filled in).
    values = {"$TOPOWEB_SERVER": "https://s", "$NODE_NAME": NODE_NAME, "$TOPOWEB_SPLAY": "600"}
    parsed = load_agent().build_parser().parse_args([values.get(a, a) for a in args])
    assert parsed.hostname == NODE_NAME and parsed.sysfs_root == "/host/sys"
    # The agent file goes to the writable emptyDir.
    agent_path = re.search(r"^agent=(\S+)$", script, re.M).group(1)
    run_mount = next(m for m in container()["volumeMounts"] if m["name"] == "run")
    assert Path(agent_path).parent == Path(run_mount["mountPath"])
    assert int(env["TOPOWEB_INTERVAL"]["value"]) >= 600 and 'sleep "$TOPOWEB_INTERVAL"' in script


def test_loop_script_is_valid_sh():
    proc = subprocess.run(["sh", "-n", "-c", loop_script()], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------------------- the loop, for real


def run_loop(tmp_path: Path, server: str, token: str, path_dirs: list[Path]) -> tuple[subprocess.Popen, Path]:
    """Start the container's command with its environment, the container's paths under tmp_path
    (the host's /sys a fake tree, /proc this machine's)."""
    from tests.ingest.test_agent import make_fake_sysfs

    host_sys = tmp_path / "host" / "sys"
    make_fake_sysfs(host_sys)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = (loop_script().replace("/run/topoweb", str(run_dir)).replace("/host/sys", str(host_sys))
              .replace("/host/proc", "/proc"))
    pybin = tmp_path / "pybin"
    pybin.mkdir()
    (pybin / "python3").symlink_to(sys.executable)
    env = {"PATH": ":".join(str(d) for d in [*path_dirs, pybin]) + ":/usr/bin:/bin", "HOME": str(tmp_path)}
    for name, entry in env_entries().items():
        if "value" in entry:
            env[name] = entry["value"]
    env.update({"TOPOWEB_SERVER": server, "TOPOWEB_TOKEN": token, "NODE_NAME": NODE_NAME, "TOPOWEB_SPLAY": "0"})
    out = tmp_path / "pod.log"
    proc = subprocess.Popen(["/bin/sh", "-c", script], env=env, stdout=out.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, out


def stop(proc: subprocess.Popen) -> int:
    """SIGTERM as the kubelet sends it; the shell must end at once, with status 0."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=5)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the loop's `sleep`, left behind
        except ProcessLookupError:
            pass


@pytest.mark.django_db(transaction=True)
def test_loop_fetches_the_agent_and_reports_the_node(tmp_path, live_token, fake_tools):
    from apps.ingest.models import Upload

    url, cluster, token = live_token
    proc, log = run_loop(tmp_path, url, token, [fake_tools])
    try:
        upload = wait_for(lambda: Upload.objects.filter(cluster__name=cluster).first(), timeout=60)
        assert upload is not None, log.read_text()
        assert wait_for(lambda: "agent exited with status 0" in log.read_text(), timeout=30), log.read_text()
        time.sleep(0.5)
        assert proc.poll() is None  # sleeping until the next round
    finally:
        status = stop(proc)
    assert status == 0, log.read_text()
    assert upload.host.hostname == NODE_NAME and upload.via == "agent"
    report = json.loads(upload.raw)
    assert {"nvidia_smi_topo", "sysfs_pci", "sysfs_ib"} <= set(report["sections"])
    # The host's tree, shown as the node's own /sys paths (not where the pod mounted it).
    assert "/sys/devices/pci0000:15/" in report["sections"]["sysfs_pci"]
    assert str(tmp_path) not in report["sections"]["sysfs_pci"]
    assert (tmp_path / "run" / "topoweb_agent.py").read_bytes() == AGENT.read_bytes()


def test_loop_survives_an_unreachable_server_and_stops_on_sigterm(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    proc, log = run_loop(tmp_path, f"http://127.0.0.1:{closed}", "tw_x", [])
    try:
        assert wait_for(lambda: "cannot fetch" in log.read_text(), timeout=30), log.read_text()
        time.sleep(0.5)
        assert proc.poll() is None  # waits for the next round instead of crash-looping
    finally:
        status = stop(proc)
    assert status == 0


# ---------------------------------------------------------------------------------- kubectl


def leaf_paths(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaf_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaf_paths(v, prefix + (i,))
    else:
        yield prefix, value


def lookup(value, path):
    for part in path:
        value = value[part]
    return value


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed here")
def test_kubectl_decodes_every_field_of_the_daemonset(tmp_path):
    """Offline: kubectl decodes the DaemonSet into its typed API object (`set resources --local`)
    and writes it back; a misspelled or misplaced field would be dropped, so every field written
    must come back with its value."""
    source = tmp_path / "daemonset.json"
    written = daemonset()
    source.write_text(json.dumps(written))
    proc = subprocess.run([KUBECTL, "set", "resources", "--local", "-f", str(source), "--limits=cpu=2", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    decoded = json.loads(proc.stdout)
    lost = []
    for path, value in leaf_paths(written):
        try:
            back = lookup(decoded, path)
        except (KeyError, IndexError, TypeError):
            lost.append(path)
            continue
        if back != value and str(back) != str(value):
            lost.append((path, value, back))
    assert not lost, lost


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed here")
def test_kubectl_decoding_check_can_fail(tmp_path):
    broken = daemonset()
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readonly"] = True  # sic
    source = tmp_path / "broken.json"
    source.write_text(json.dumps(broken))
    proc = subprocess.run([KUBECTL, "set", "resources", "--local", "-f", str(source), "--limits=cpu=2", "-o", "json"],
                          capture_output=True, text=True, timeout=60)
    decoded = json.loads(proc.stdout)
    assert "readonly" not in decoded["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]


def kubernetes_reachable() -> bool:
    if KUBECTL is None:
        return False
    proc = subprocess.run([KUBECTL, "version", "--request-timeout=5s", "-o", "json"], capture_output=True, text=True,
                          timeout=30)
    return proc.returncode == 0 and "serverVersion" in proc.stdout


@pytest.mark.skipif(not kubernetes_reachable(),
                    reason="no Kubernetes API server reachable: `kubectl apply --dry-run=client` still needs one "
                           "(it downloads the schema and maps kinds); the offline decoding test above runs instead")
def test_kubectl_apply_dry_run_client():
    proc = subprocess.run([KUBECTL, "apply", "--dry-run=client", "-f", str(DAEMONSET)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "daemonset.apps/topoweb-agent created (dry run)" in proc.stdout or "configured (dry run)" in proc.stdout
