"""The deployment files under deploy/, checked offline (no cluster, no container engine, no network):

- every Kubernetes manifest, as written and as each kustomization renders it (`kubectl kustomize`
  when kubectl is installed), against the Kubernetes OpenAPI schemas that kubernetes-validate
  bundles, in strict mode (unknown fields refused), for the oldest Kubernetes the manifests claim
  and the newest the package carries; the ServiceMonitor (a Prometheus Operator custom resource that
  kubernetes-validate does not know) against SERVICEMONITOR_SCHEMA below, a hand transcription of
  the CRD's schema for the fields used;
- every `tfdata` flag the manifests and the Dockerfile pass, against the real binary's --help of
  that subcommand, and every $(VAR) they use against the container's env;
- ports: flags, containerPorts, probes, Services, the workers' --dispatcher address, the
  ServiceMonitor, the HPA's target and the Dockerfile's EXPOSE agree;
- the Dockerfile's runtime package list covers every shared library `ldd` reports for the built
  binary (each mapped to its Debian package with `dpkg -S`);
- the shell command components/tls wraps the workers in, run with a stand-in `tfdata`;
- the `tfdata` command lines in docs/deployment.md, against --help like the manifests.
What this does not check (no image is built, nothing is applied to a cluster): docs/deployment.md,
"What was validated, and what was not".
"""

import functools
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is not installed (scripts/python-env.sh installs it)")
import jsonschema  # noqa: E402  (kubernetes-validate's dependencies)
import yaml  # noqa: E402

from conftest import SOURCE_DIR, tfdata_binary  # noqa: E402

DEPLOY = os.path.join(SOURCE_DIR, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
DOCKERFILE = os.path.join(DEPLOY, "Dockerfile")
DOCKERIGNORE = os.path.join(DEPLOY, "Dockerfile.dockerignore")

# The oldest Kubernetes the manifests are written for (gRPC probes are GA since 1.27; autoscaling/v2
# since 1.23), and the newest schemas kubernetes-validate carries.
OLDEST_KUBERNETES = "1.29"
KUBERNETES_VERSIONS = (OLDEST_KUBERNETES, kubernetes_validate.utils.latest_version())

# The kustomizations a user applies (docs/deployment.md), relative to deploy/kubernetes, plus one
# composed here: the node-local overlay with the components documented to apply to it.
BUILDS = {
    "default": {"dir": "."},
    "node-local": {"dir": "overlays/node-local"},
    "production": {"dir": "overlays/production"},
    "node-local+auth-token+monitoring": {
        "resources": ["dispatcher", "workers-node-local"],
        "components": ["components/auth-token", "components/monitoring"],
    },
}
WORKLOAD_KINDS = ("StatefulSet", "Deployment", "DaemonSet")
HPA_METRIC = "tfdata_job_workers_recommended"

# A hand transcription of the ServiceMonitor CRD's openAPIV3Schema (prometheus-operator 0.84,
# example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml) for the fields
# deploy/ uses: their types, enums and patterns, and the CRD's required fields. Stricter than the
# CRD in one way: a field that is not transcribed here is refused, so a misspelt field fails;
# transcribe the CRD's definition of a field before using it.
_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_STRINGS = {"type": "array", "items": {"type": "string"}}
SERVICEMONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {  # ObjectMeta: the API server's rules for the fields used
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "maxLength": 253,
                         "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
                "namespace": {"type": "string"},
                "labels": _STRING_MAP,
                "annotations": _STRING_MAP,
            },
        },
        "spec": {
            "type": "object",
            "required": ["endpoints", "selector"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": _STRING_MAP,
                        "matchExpressions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["key", "operator"],
                                "additionalProperties": False,
                                "properties": {"key": {"type": "string"}, "operator": {"type": "string"},
                                               "values": _STRINGS},
                            },
                        },
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"any": {"type": "boolean"}, "matchNames": _STRINGS},
                },
                "jobLabel": {"type": "string"},
                "targetLabels": _STRINGS,
                "podTargetLabels": _STRINGS,
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "targetPort": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                            "path": {"type": "string"},
                            "scheme": {"type": "string", "enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": _DURATION},
                            "honorLabels": {"type": "boolean"},
                            "honorTimestamps": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}


# ---- loading ------------------------------------------------------------------------------------

def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def yaml_files():
    return sorted(glob.glob(os.path.join(K8S, "**", "*.yaml"), recursive=True))


def is_kustomization(doc):
    return isinstance(doc, dict) and doc.get("kind") in ("Kustomization", "Component")


def raw_resources():
    """(file, document) for every Kubernetes object in deploy/kubernetes as written."""
    out = []
    for path in yaml_files():
        for doc in load_yaml(path):
            if isinstance(doc, dict) and "apiVersion" in doc and not is_kustomization(doc):
                out.append((os.path.relpath(path, K8S), doc))
    return out


def kustomizations():
    """{directory relative to deploy/kubernetes: the kustomization document}."""
    out = {}
    for path in yaml_files():
        if os.path.basename(path) == "kustomization.yaml":
            (doc,) = load_yaml(path)
            assert is_kustomization(doc), f"{path}: not a Kustomization or Component"
            out[os.path.relpath(os.path.dirname(path), K8S)] = doc
    return out


def kubectl():
    return shutil.which("kubectl")


def render(name):
    """The objects a build of BUILDS produces: `kubectl kustomize`, or, without kubectl, the
    resources-only kustomizations read here (builds with patches or components are skipped)."""
    spec = BUILDS[name]
    if kubectl():
        with tempfile.TemporaryDirectory() as tmp:
            if "dir" in spec:
                target = os.path.join(K8S, spec["dir"])
            else:
                rel = os.path.relpath(K8S, tmp)  # kustomize wants relative paths
                with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
                    yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                    "resources": [f"{rel}/{r}" for r in spec["resources"]],
                                    "components": [f"{rel}/{c}" for c in spec["components"]]}, f)
                target = tmp
            proc = subprocess.run([kubectl(), "kustomize", target], capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"kubectl kustomize {name}: {proc.stderr}"
            return [d for d in yaml.safe_load_all(proc.stdout) if d is not None]
    if "dir" not in spec:
        pytest.skip(f"kubectl is not installed: cannot render {name} (components)")
    return _render_resources_only(os.path.join(K8S, spec["dir"]), name)


def _render_resources_only(directory, name, depth=0):
    assert depth < 10, f"{directory}: kustomizations nested too deep"
    (k,) = load_yaml(os.path.join(directory, "kustomization.yaml"))
    unsupported = sorted(set(k) - {"apiVersion", "kind", "resources"})
    if unsupported:
        pytest.skip(f"kubectl is not installed: cannot render {name} (its kustomization has {unsupported})")
    out = []
    for r in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, r))
        out += _render_resources_only(path, name, depth + 1) if os.path.isdir(path) else load_yaml(path)
    return out


@functools.lru_cache(maxsize=None)
def rendered(name):
    return render(name)


def renderable_builds():
    """[(build, objects)] for the builds that can be rendered here (all of them with kubectl)."""
    out = []
    for build in sorted(BUILDS):
        try:
            out.append((build, rendered(build)))
        except pytest.skip.Exception:
            pass
    return out


# ---- the binary's command line ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def help_text(subcommand):
    args = [tfdata_binary()] + ([subcommand] if subcommand else []) + ["--help"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr}"
    return proc.stdout


def help_flags(subcommand):
    """{flag: default or None} from `tfdata SUBCOMMAND --help` (CLI11's format)."""
    flags = {}
    for line in help_text(subcommand).splitlines():
        m = re.match(r"^\s+(?:-\w,)?(--[A-Za-z0-9][\w-]*)(?:\s+[A-Z]+(?:=(\S+))?)?", line)
        if m:
            flags[m.group(1)] = m.group(2)
    assert "--help" in flags, f"could not parse `tfdata {subcommand or ''} --help`"
    return flags


def subcommands():
    text = help_text(None)
    return set(re.findall(r"^\s{2}([a-z]+)\s{2,}", text.split("Subcommands:", 1)[1], re.M))


def parse_flags(tokens):
    """{flag: [values]} of `--flag=value`, `--flag value` and bare `--flag` tokens."""
    out = {}
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.startswith("--"):
            name, eq, value = t.partition("=")
            if not eq:
                value = None
                if i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                    value = tokens[i + 1]
                    i += 1
            out.setdefault(name, []).append(value)
        i += 1
    return out


def tfdata_argv(container):
    """The tfdata command line a container runs: the image's ENTRYPOINT ["tfdata"] + args, or a
    `sh -c SCRIPT` whose script runs `tfdata ... "$@"` (with the container's args as "$@")."""
    command, args = container.get("command"), container.get("args", [])
    if not command:
        return ["tfdata"] + args
    if os.path.basename(command[0]) == "sh" and command[1:2] == ["-c"]:
        positional = (command[3:] + args)[1:]  # the first is $0
        tokens = []
        for t in shlex.split(command[2]):
            tokens += positional if t == "$@" else [t]
        assert "tfdata" in tokens, f"container {container['name']}: its script does not run tfdata"
        return tokens[tokens.index("tfdata"):]
    assert os.path.basename(command[0]) == "tfdata", f"container {container['name']}: runs {command[0]}"
    return ["tfdata"] + command[1:] + args


def check_tfdata_command(argv, where):
    """Problems with a tfdata command line: an unknown subcommand, or flags its --help lacks."""
    if len(argv) < 2 or argv[1].startswith("-"):
        flags, known = parse_flags(argv[1:]), help_flags(None)
        return [f"{where}: tfdata has no flag {f}" for f in flags if f not in known]
    if argv[1] not in subcommands():
        return [f"{where}: tfdata has no subcommand {argv[1]!r}"]
    known = help_flags(argv[1])
    return [f"{where}: `tfdata {argv[1]}` has no flag {f} (see `tfdata {argv[1]} --help`)"
            for f in parse_flags(argv[2:]) if f not in known]


def env_problems(container, where):
    """$(VAR) references (Kubernetes) and $VAR in a sh -c script that the container's env lacks."""
    env = {e["name"] for e in container.get("env", [])}
    refs = set()
    for s in container.get("command", []) + container.get("args", []):
        refs |= set(re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", s))
    command = container.get("command") or []
    if command and os.path.basename(command[0]) == "sh":
        refs |= set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", command[2]))
    return [f"{where}: ${r} is not in the container's env" for r in sorted(refs - env)]


def workloads(docs):
    return [d for d in docs if d.get("kind") in WORKLOAD_KINDS]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


# ---- the Dockerfile -----------------------------------------------------------------------------

def dockerfile_instructions(path=DOCKERFILE):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    out, current = [], ""
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            if stripped.startswith("#") or not stripped:
                continue
            current += stripped[:-1] + " " if stripped.endswith("\\") else stripped
            if not stripped.endswith("\\"):
                instr, _, rest = current.partition(" ")
                out.append((instr.upper(), rest.strip()))
                current = ""
    return out


def dockerfile_stages():
    """[(FROM arguments, [(INSTRUCTION, arguments)])] and the global ARG defaults."""
    stages, args = [], {}
    for instr, rest in dockerfile_instructions():
        if instr == "FROM":
            stages.append((rest, []))
        elif stages:
            stages[-1][1].append((instr, rest))
        elif instr == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
    return stages, args


def runtime_packages():
    """The packages the runtime (last) stage installs with apt-get."""
    stages, _ = dockerfile_stages()
    packages = []
    for instr, rest in stages[-1][1]:
        if instr != "RUN":
            continue
        for segment in rest.split("&&"):
            tokens = shlex.split(segment)
            if "apt-get" in tokens and "install" in tokens:
                packages += [t for t in tokens[tokens.index("install") + 1:] if not t.startswith("-")]
    return packages


def json_array(text):
    return yaml.safe_load(text)  # a Dockerfile exec form is a JSON array, which YAML reads


# ---- schemas ------------------------------------------------------------------------------------

def schema_problems(doc, where):
    if doc.get("kind") == "ServiceMonitor":
        errors = jsonschema.Draft7Validator(SERVICEMONITOR_SCHEMA).iter_errors(doc)
        return [f"{where}: ServiceMonitor {'.'.join(map(str, e.path))}: {e.message}" for e in errors]
    problems = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{where}: {doc['kind']} {'.'.join(map(str, e.path))}: {e.message} "
                            f"(Kubernetes {e.version})")
        except kubernetes_validate.utils.SchemaNotFoundError as e:
            problems.append(f"{where}: {e.message}")
    return problems


def test_every_manifest_as_written_matches_the_kubernetes_schemas():
    docs = raw_resources()
    assert len(docs) >= 6, docs
    problems = [p for path, doc in docs for p in schema_problems(doc, f"{path} {doc['metadata']['name']}")]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_every_rendered_build_matches_the_kubernetes_schemas(build):
    docs = rendered(build)
    assert workloads(docs), f"{build}: no workload rendered"
    problems = [p for doc in docs for p in schema_problems(doc, f"{build}: {doc['metadata']['name']}")]
    assert not problems, "\n".join(problems)


def test_the_validators_refuse_mistakes():
    # Not vacuous: a probe's named port (the gRPC probe takes a number), an unknown field, a
    # ServiceMonitor field misspelt, a flag misspelt, a variable not in env all fail.
    def dispatcher():
        (sts,) = [d for _, d in raw_resources() if d["kind"] == "StatefulSet"]
        return sts, pod_spec(sts)["containers"][0]

    sts, c = dispatcher()
    c["readinessProbe"] = {"grpc": {"port": "grpc"}}
    problems = schema_problems(sts, "broken")
    assert any("readinessProbe.grpc.port" in p for p in problems), problems
    sts, c = dispatcher()
    c["livenessProbe"]["grpcc"] = {}
    problems = schema_problems(sts, "broken")
    assert any("grpcc" in p for p in problems), problems
    (sm,) = [d for _, d in raw_resources() if d["kind"] == "ServiceMonitor"]
    sm["spec"]["endpoints"][0]["prot"] = "metrics"
    sm["spec"]["endpoints"][0]["interval"] = "15 seconds"
    problems = schema_problems(sm, "broken")
    assert any("prot" in p for p in problems) and any("interval" in p for p in problems), problems
    c["args"] = c["args"] + ["--metric-port=9090"]
    assert check_tfdata_command(tfdata_argv(c), "broken") == [
        "broken: `tfdata dispatcher` has no flag --metric-port (see `tfdata dispatcher --help`)"]
    c["args"].append("--tag=$(NODE)")
    assert env_problems(c, "broken") == ["broken: $NODE is not in the container's env"]


def test_every_file_is_part_of_a_kustomization():
    ks = kustomizations()
    referenced = set()
    for directory, k in ks.items():
        for r in k.get("resources", []) + k.get("components", []):
            referenced.add(os.path.normpath(os.path.join(directory, r)))
        for p in k.get("patches", []):
            if "path" in p:
                referenced.add(os.path.normpath(os.path.join(directory, p["path"])))
    roots = {os.path.normpath(BUILDS[b]["dir"]) for b in BUILDS if "dir" in BUILDS[b]}
    for path in yaml_files():
        rel = os.path.relpath(path, K8S)
        if os.path.basename(rel) == "kustomization.yaml":
            d = os.path.normpath(os.path.dirname(rel))
            assert d in roots or d in referenced, f"{rel}: no kustomization uses it, and BUILDS does not render it"
        else:
            assert rel in referenced, f"{rel}: no kustomization.yaml lists it"


# ---- flags --------------------------------------------------------------------------------------

def test_every_tfdata_flag_in_the_manifests_exists_in_the_binary():
    seen = set()
    problems = []
    sources = raw_resources() + [(b, d) for b, docs in renderable_builds() for d in docs]
    for where, doc in sources:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        for c in pod_spec(doc)["containers"]:
            label = f"{where} {doc['kind']}/{doc['metadata']['name']} container {c['name']}"
            assert c["image"].split("/")[-1].split(":")[0] == "tfdata", f"{label}: not the tfdata image"
            argv = tfdata_argv(c)
            seen.add(argv[1])
            problems += check_tfdata_command(argv, label) + env_problems(c, label)
    assert seen == {"dispatcher", "worker"}, seen
    assert not problems, "\n".join(problems)


def test_the_dockerfile_runs_tfdata_with_flags_it_has():
    stages, _ = dockerfile_stages()
    runtime = dict(stages[-1][1])
    assert json_array(runtime["ENTRYPOINT"]) == ["tfdata"]
    problems = check_tfdata_command(["tfdata"] + json_array(runtime.get("CMD", "[]")), "Dockerfile CMD")
    assert not problems, "\n".join(problems)


def test_the_dockerfile_builds_with_the_projects_own_scripts_and_options():
    stages, args = dockerfile_stages()
    assert len(stages) >= 2, "a multi-stage build"
    for base, _ in stages:
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), base.split()[0])
        assert re.fullmatch(r"debian:(12|bookworm)(-slim)?", image), f"FROM {base}: not Debian 12 ({image})"
    build_runs = " ".join(rest for instr, rest in stages[0][1] if instr == "RUN")
    assert "scripts/install-deps.sh" in build_runs
    assert os.path.exists(os.path.join(SOURCE_DIR, "scripts", "install-deps.sh"))
    options = dict(re.findall(r"-D(\w+)=(\S+)", build_runs))
    assert options.get("CMAKE_BUILD_TYPE") == "Release" and options.get("TFDATA_BUILD_TESTS") == "OFF", options
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        cmake = f.read()
    declared = set(re.findall(r"option\((TFDATA_\w+)", cmake)) | set(re.findall(r"set\((TFDATA_\w+)[^)]*CACHE", cmake))
    unknown = [o for o in options if o.startswith("TFDATA_") and o not in declared]
    assert not unknown, f"the Dockerfile sets CMake options CMakeLists.txt does not declare: {unknown}"
    runtime = stages[-1][1]
    assert any(i == "COPY" and "--from=" in r and r.endswith("/usr/local/bin/tfdata") for i, r in runtime)
    (user,) = [r for i, r in runtime if i == "USER"]
    assert re.fullmatch(r"[1-9]\d*(:\d+)?", user), f"USER {user}: give a numeric non-root uid (runAsNonRoot checks it)"
    with open(DOCKERIGNORE) as f:
        ignored = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    assert {"build", ".venv", ".git"} <= ignored, ignored


def kubernetes_expand(s, env):
    """Kubernetes' expansion of command and args: $(VAR) from env, $$ for a literal $."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def test_a_shell_wrapped_worker_runs_tfdata_with_its_args_and_the_pod_dns_name():
    # components/tls runs the pool's workers through /bin/sh to advertise A-B-C-D.tfdata-worker.NS.svc:
    # run that command line as Kubernetes would, with a stand-in `tfdata` that prints its arguments.
    wrapped = [(b, w) for b, docs in renderable_builds() for w in workloads(docs)
               if pod_spec(w)["containers"][0].get("command")]
    if not wrapped:
        pytest.skip("no rendered build has a shell-wrapped worker (kubectl is needed to render components/tls)")
    for build, w in wrapped:
        c = pod_spec(w)["containers"][0]
        env = {"POD_IP": "10.1.2.3", "POD_NAMESPACE": "ns", "HOST_IP": "192.0.2.1", "NODE_NAME": "node1"}
        argv = [kubernetes_expand(a, env) for a in c["command"] + c.get("args", [])]
        with tempfile.TemporaryDirectory() as tmp:
            stub = os.path.join(tmp, "tfdata")
            with open(stub, "w") as f:
                f.write('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
            os.chmod(stub, 0o755)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                  env=dict(env, PATH=f"{tmp}:/usr/bin:/bin"))
        assert proc.returncode == 0, f"{build}: {argv}: {proc.stderr}"
        got = proc.stdout.splitlines()
        assert got[0] == "worker", got
        addresses = [a for a in got if a.startswith("--worker-address")]
        assert addresses == ["--worker-address=10-1-2-3.tfdata-worker.ns.svc:%port%"], f"{build}: {got}"
        base = [kubernetes_expand(a, env) for a in c["args"]]
        assert got[:len(base)] == base, f"{build}: the Deployment's own args did not all reach tfdata: {got}"


def doc_command_lines(path):
    """The shell lines of the ```sh blocks of a Markdown file, continuation lines joined."""
    lines, block, current = [], False, ""
    with open(path) as f:
        for line in f:
            stripped = line.strip()
            if stripped.startswith("```"):
                block = stripped == "```sh" and not block
                continue
            if block:
                current += stripped[:-1] + " " if stripped.endswith("\\") else stripped
                if not stripped.endswith("\\"):
                    lines.append(current)
                    current = ""
    return lines


def test_the_tfdata_commands_in_the_deployment_doc_exist():
    # `tfdata SUB ...` lines, and `kubectl run ... --image=...tfdata... -- SUB ...` (the image's
    # ENTRYPOINT is tfdata).
    checked, problems = 0, []
    for line in doc_command_lines(os.path.join(SOURCE_DIR, "docs", "deployment.md")):
        tokens = shlex.split(line.split(" #")[0].split(" &")[0])
        argv = None
        if tokens and tokens[0] == "tfdata":
            argv = tokens
        elif (tokens[:1] == ["kubectl"] and "run" in tokens and "--" in tokens
              and any("tfdata" in t for t in tokens if t.startswith("--image"))):
            argv = ["tfdata"] + tokens[tokens.index("--") + 1:]
        if argv:
            checked += 1
            problems += check_tfdata_command(argv, f"docs/deployment.md: {line}")
    assert checked >= 2, "no tfdata command found in docs/deployment.md"
    assert not problems, "\n".join(problems)


def localized(argv, tmp, name, env, dispatcher=None):
    """A manifest's tfdata command line made to run here: loopback, free ports (recorded in port
    files), paths under tmp, the started dispatcher. Every other flag and value stays as written."""
    out = [tfdata_binary(), argv[1], "--host=127.0.0.1", f"--port-file={tmp}/{name}.port",
           f"--metrics-port-file={tmp}/{name}.metrics-port"]
    for t in argv[2:]:
        flag, _, value = t.partition("=")
        if flag in ("--port", "--metrics-port"):
            t = f"{flag}=0"
        elif flag in ("--work-dir", "--allowed-path"):
            t = f"{flag}={tmp}/{name}{value}"
            os.makedirs(f"{tmp}/{name}{value}", exist_ok=True)
        elif flag == "--dispatcher":
            t = f"--dispatcher=127.0.0.1:{dispatcher}"
        out.append(kubernetes_expand(t, env))
    return out


def wait_for_file(path, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return text
        assert proc.poll() is None, f"{proc.args}: exited {proc.returncode}: {proc.stderr.read()}"
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear")


def test_the_default_manifests_command_lines_start_servers_that_serve_a_read():
    # The flags' values too (sizes, paths, the advertised address): the dispatcher and the worker
    # of the default build, started here as written but on loopback, serve a read of range(10)
    # through the address the worker advertises, and stop cleanly on SIGTERM.
    docs = {w["metadata"]["name"]: pod_spec(w)["containers"][0] for w in workloads(rendered("default"))}
    env = {"POD_IP": "127.0.0.1", "POD_NAMESPACE": "ns"}
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            argv = localized(tfdata_argv(docs["tfdata-dispatcher"]), tmp, "dispatcher", env)
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            port = wait_for_file(f"{tmp}/dispatcher.port", procs[-1])
            wait_for_file(f"{tmp}/dispatcher.metrics-port", procs[-1])
            assert os.path.exists(f"{tmp}/dispatcher/var/lib/tfdata/dispatcher/journal")
            argv = localized(tfdata_argv(docs["tfdata-worker"]), tmp, "worker", env, dispatcher=port)
            assert "--worker-address=127.0.0.1:%port%" in argv, argv
            procs.append(subprocess.Popen(argv + ["--heartbeat-interval=100ms"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
            wait_for_file(f"{tmp}/worker.port", procs[-1])
            wait_for_file(f"{tmp}/worker.metrics-port", procs[-1])
            read = subprocess.run([tfdata_binary(), "read", "--dispatcher", f"127.0.0.1:{port}",
                                   os.path.join(SOURCE_DIR, "examples", "range.pbtxt")],
                                  capture_output=True, text=True, timeout=60)
            assert read.returncode == 0, read.stderr
            assert read.stdout.split() == [str(i) for i in range(10)], read.stdout
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    assert [p.returncode for p in procs] == [0, 0], [p.stderr.read() for p in procs]


# ---- ports --------------------------------------------------------------------------------------

def container_ports(container):
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def selected_workloads(service, docs):
    selector = service["spec"]["selector"]
    return [w for w in workloads(docs) if selects(selector, w["spec"]["template"]["metadata"]["labels"])]


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_ports_agree_between_flags_probes_containers_services_and_monitors(build):
    docs = rendered(build)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    services = by_kind.get("Service", [])
    stages, _ = dockerfile_stages()
    exposed = {int(p.split("/")[0]) for i, r in stages[-1][1] if i == "EXPOSE" for p in r.split()}
    (user,) = [r for i, r in stages[-1][1] if i == "USER"]

    for w in workloads(docs):
        name = f"{build}: {w['kind']}/{w['metadata']['name']}"
        spec = pod_spec(w)
        assert spec["securityContext"]["runAsUser"] == int(user.split(":")[0]), f"{name}: runAsUser is not USER"
        (c,) = spec["containers"]
        argv = tfdata_argv(c)
        flags, defaults = parse_flags(argv[2:]), help_flags(argv[1])
        ports = container_ports(c)
        assert set(ports) == {"grpc", "metrics"}, f"{name}: container ports {ports}"
        grpc_port = int((flags.get("--port") or [defaults["--port"]])[-1])
        assert grpc_port == ports["grpc"] and grpc_port != 0, f"{name}: --port {grpc_port}, containerPort {ports}"
        assert int(flags["--metrics-port"][-1]) == ports["metrics"], f"{name}: --metrics-port vs {ports}"
        assert set(ports.values()) <= exposed, f"{name}: ports {ports} not all in the Dockerfile's EXPOSE {exposed}"
        assert "readinessProbe" in c and "livenessProbe" in c, f"{name}: readiness and liveness probes"
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = c.get(kind)
            if probe is None:
                continue
            if "grpc" in probe:
                assert probe["grpc"]["port"] == grpc_port, f"{name}: {kind} {probe}, gRPC on {grpc_port}"
            else:
                assert "tcpSocket" in probe, f"{name}: {kind}: a grpc (or, under TLS, tcpSocket) probe"
                assert probe["tcpSocket"]["port"] in ("grpc", grpc_port), f"{name}: {kind}: {probe}"
        if argv[1] == "worker":
            host, _, port = flags["--dispatcher"][-1].removeprefix("grpc://").rpartition(":")
            (svc,) = [s for s in services if s["metadata"]["name"] == host.split(".")[0]] or [None]
            assert svc is not None, f"{name}: --dispatcher {host}: no such Service in {build}"
            svc_ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
            assert int(port) == svc_ports["grpc"], f"{name}: --dispatcher port {port}, Service {svc_ports}"
            targets = [t["metadata"]["name"] for t in selected_workloads(svc, docs)]
            assert targets == ["tfdata-dispatcher"], f"{name}: {host} selects {targets}"

    for svc in services:
        name = f"{build}: Service/{svc['metadata']['name']}"
        targets = selected_workloads(svc, docs)
        assert targets, f"{name}: selects no workload"
        for p in svc["spec"]["ports"]:
            assert p["name"] in ("grpc", "metrics"), f"{name}: port {p}"
            for w in targets:
                ports = container_ports(pod_spec(w)["containers"][0])
                target = p.get("targetPort", p["port"])
                resolved = ports.get(target) if isinstance(target, str) else target
                assert resolved in ports.values(), f"{name}: targetPort {target}: not a port of {w['metadata']['name']}"
                assert ports[p["name"]] == resolved == p["port"], f"{name}: port {p} vs container ports {ports}"

    metrics_services = {s["metadata"]["name"] for s in services
                        if any(p["name"] == "metrics" for p in s["spec"]["ports"])}
    for sm in by_kind.get("ServiceMonitor", []):
        picked = [s for s in services
                  if selects(sm["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
        scraped = {s["metadata"]["name"] for s in picked}
        assert scraped == metrics_services, f"{build}: the ServiceMonitor scrapes {scraped}, not {metrics_services}"
        assert sm["spec"]["endpoints"], f"{build}: a ServiceMonitor without endpoints"
        for e in sm["spec"]["endpoints"]:
            for s in picked:
                assert e["port"] in {p["name"] for p in s["spec"]["ports"]}, f"{build}: {e['port']} not a port of {s}"
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        ref = hpa["spec"]["scaleTargetRef"]
        (target,) = [w for w in workloads(docs) if (w["kind"], w["metadata"]["name"]) == (ref["kind"], ref["name"])]
        assert "replicas" not in target["spec"], f"{build}: {ref['name']} sets replicas, which the HPA owns"
        assert [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]] == [HPA_METRIC]


# ---- runtime libraries --------------------------------------------------------------------------

def debian_release():
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        return None
    return fields.get("ID", "").strip('"'), fields.get("VERSION_ID", "").strip('"')


def ldd_libraries(binary):
    proc = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"ldd {binary}: {proc.stderr}"
    libs = {}
    for line in proc.stdout.splitlines():
        if "not found" in line:
            pytest.fail(f"ldd: {line.strip()}: this machine lacks a library of the binary")
        m = re.match(r"^\s*(\S+) => (/\S+) \(", line) or re.match(r"^\s*((/\S+)) \(", line)
        if m:
            libs[m.group(1)] = m.group(2)
    return libs


def dpkg_owners(paths):
    """{path: package} for the paths dpkg knows: one `dpkg-query -S` (what `dpkg -S` runs) for all."""
    proc = subprocess.run(["dpkg-query", "-S"] + sorted(paths), capture_output=True, text=True, timeout=120)
    # 1: some paths belong to no package (the usrmerge alternatives tried below).
    assert proc.returncode in (0, 1) and proc.stdout, f"dpkg-query -S: exit {proc.returncode}: {proc.stderr}"
    owners = {}
    for line in proc.stdout.splitlines():
        if line.startswith("diversion ") or ": " not in line:
            continue
        packages, path = line.split(": ", 1)
        owners[path] = packages.split(",")[0].strip().split(":")[0]
    return owners


def test_the_runtime_packages_cover_every_library_the_binary_links():
    binary = tfdata_binary()
    for tool in ("ldd", "dpkg-query"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: cannot map the binary's shared libraries to Debian packages")
    if debian_release() != ("debian", "12"):
        pytest.skip(f"the Dockerfile's package names are Debian 12's; this machine is {debian_release()}")
    libs = ldd_libraries(binary)
    assert len(libs) > 5, libs
    # dpkg knows a library by the path its package installed, which usrmerge may have moved:
    # /lib/x86_64-linux-gnu/libz.so.1 is zlib1g's, /usr/lib/x86_64-linux-gnu/libssl.so.3 libssl3's.
    candidates = {}
    for soname, path in libs.items():
        real = os.path.realpath(path)
        alternatives = {path, real}
        for p in (path, real):
            alternatives.add(p[4:] if p.startswith("/usr/") else "/usr" + p)
        candidates[soname] = alternatives
    owners = dpkg_owners({p for ps in candidates.values() for p in ps})
    package_of = {}
    for soname, paths in candidates.items():
        found = {owners[p] for p in paths if p in owners}
        assert found, f"{soname} ({libs[soname]}): no Debian package owns it, so apt cannot put it in the image"
        package_of[soname] = found.pop()
    listed = set(runtime_packages())
    missing = {soname: pkg for soname, pkg in package_of.items() if pkg not in listed}
    assert not missing, ("the Dockerfile's runtime stage does not install the package of: " +
                         ", ".join(f"{s} ({p})" for s, p in sorted(missing.items())))
