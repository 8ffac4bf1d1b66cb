#!/usr/bin/env python3
"""Validates the objects `helm template` rendered from deploy/helm/sluice, offline.

  validate_manifests.py --kubernetes-version 1.31.0 [--kubernetes-version 1.37.0 ...] --crd-dir DIR MANIFEST.yaml

1. Schemas. Every built-in object against the Kubernetes OpenAPI schemas of each version with kubernetes-validate
   in strict mode (unknown fields are errors); every custom resource against the openAPIV3Schema of its CRD from
   --crd-dir (unknown fields are errors there too) and its metadata against ObjectMeta. An object with neither kind
   of schema is an error, never a warning.
2. The chart's own promises, on the parsed objects: the Service, PodDisruptionBudget, HorizontalPodAutoscaler
   and ServiceMonitor select or target what the chart renders; probes are native gRPC on the grpc port; the grace
   period covers preStop + the server's drain_grace_seconds read from the rendered server config; the pod runs as
   non-root with a read-only root filesystem and no capabilities; extended resources (aws.amazon.com/neuroncore)
   have requests equal to limits and, with an instance-type node selector, ask for all the NeuronCores of it.

Exit 0 when every object passes, 1 otherwise (every failure is printed), 2 on bad input.
"""
import argparse
import copy
import pathlib
import sys

import jsonschema
import kubernetes_validate
import yaml

# NeuronCores per instance type, from AWS's Neuron documentation (Inf2 and Trn1 architecture pages).
NEURONCORES_PER_INSTANCE = {
    "inf2.xlarge": 2, "inf2.8xlarge": 2, "inf2.24xlarge": 12, "inf2.48xlarge": 24,
    "trn1.2xlarge": 2, "trn1.32xlarge": 32, "trn1n.32xlarge": 32,
}
NEURONCORE = "aws.amazon.com/neuroncore"


def strict_crd_schema(schema):
    """Copies an openAPIV3Schema, forbidding properties it does not declare (as kubectl --validate=strict does)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def load_crd_schemas(crd_dir):
    """(apiVersion, kind) -> strict JSON schema, from every CustomResourceDefinition under crd_dir."""
    schemas = {}
    for path in sorted(pathlib.Path(crd_dir).glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                schema = version["schema"]["openAPIV3Schema"]
                schemas[(f"{group}/{version['name']}", kind)] = strict_crd_schema(schema)
    return schemas


def object_name(obj):
    return f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"


def validate_schemas(objects, versions, crd_schemas):
    errors = []
    for obj in objects:
        key = (obj.get("apiVersion"), obj.get("kind"))
        for version in versions:
            if key in crd_schemas:
                validator = jsonschema.Draft7Validator(crd_schemas[key])
                for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.path)):
                    path = ".".join(str(p) for p in error.path)
                    errors.append(f"{object_name(obj)}: {path}: {error.message} (CRD schema)")
                # The CRD schema leaves metadata open; hold it to ObjectMeta through a ConfigMap wrapper.
                probe = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj.get("metadata")}
                try:
                    kubernetes_validate.validate(probe, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    errors.append(f"{object_name(obj)}: metadata.{'.'.join(map(str, e.path))}: {e.message}")
                continue
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                errors.append(f"{object_name(obj)}: {path}: {e.message} (Kubernetes {e.version})")
            except kubernetes_validate.SchemaNotFoundError as e:
                errors.append(f"{object_name(obj)}: no schema: {e.message}")
    return errors


def one(objects, kind, errors):
    found = [o for o in objects if o.get("kind") == kind]
    if len(found) != 1:
        errors.append(f"expected exactly one {kind}, found {len(found)}")
        return None
    return found[0]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_chart(objects):
    """The chart's promises (module docstring, 2). Returns a list of failures."""
    errors = []
    deployment = one(objects, "Deployment", errors)
    service = one(objects, "Service", errors)
    configmap = one(objects, "ConfigMap", errors)
    if not (deployment and service and configmap):
        return errors
    pod = deployment["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    spec = pod["spec"]
    if not selects(deployment["spec"]["selector"]["matchLabels"], pod_labels):
        errors.append("Deployment selector does not match its pod template labels")
    containers = spec["containers"]
    if len(containers) != 1:
        return errors + [f"expected one container, found {len(containers)}"]
    container = containers[0]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    if set(ports) != {"http", "grpc"}:
        errors.append(f"container ports should be http and grpc, are {sorted(ports)}")

    # Server config as the server will read it.
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    drain = float(config.get("drain_grace_seconds", 30))
    for section, port_name in (("grpc", "grpc"), ("http", "http")):
        address = config.get(section, {}).get("address", "")
        if not address.endswith(f":{ports.get(port_name)}"):
            errors.append(f"config {section}.address {address!r} is not the container's {port_name} port")
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    config_mount = next((m for m in mounts.values() if m["name"] == "config"), None)
    if not config_mount or volumes.get("config", {}).get("configMap", {}).get("name") != configmap["metadata"]["name"]:
        errors.append("the ConfigMap is not mounted as the config volume")
    elif container.get("args") != ["--config", config_mount["mountPath"].rstrip("/") + "/config.yaml"]:
        errors.append(f"args {container.get('args')} do not point at the mounted config.yaml")
    repo = config.get("model_repository")
    if repo in mounts and not mounts[repo].get("readOnly"):
        errors.append(f"model repository mount {repo} is not read-only")

    # Probes: native gRPC on the grpc port; startup first.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = (container.get(probe) or {}).get("grpc")
        if not grpc or grpc.get("port") != ports.get("grpc") or grpc.get("service", "") != "":
            errors.append(f"{probe} is not a grpc.health.v1 probe on the grpc port")
    startup = container.get("startupProbe") or {}
    if startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3) < 300:
        errors.append("startupProbe allows under 5 minutes for loading and warming the models")

    # Shutdown: preStop sleep, then SIGTERM and the drain, all inside the grace period.
    command = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command", [])
    if len(command) != 2 or command[0] != "/bin/sleep":
        errors.append(f"preStop should be [/bin/sleep, N], is {command}")
        pre_stop = 0
    else:
        pre_stop = int(command[1])
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace <= pre_stop + drain:
        errors.append(f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop} + drain_grace_seconds {drain}")

    # Security context.
    psc, csc = spec.get("securityContext", {}), container.get("securityContext", {})
    if not (psc.get("runAsNonRoot") or csc.get("runAsNonRoot")):
        errors.append("runAsNonRoot is not set")
    if (csc.get("runAsUser", psc.get("runAsUser")) or 0) == 0:
        errors.append("runAsUser is root or unset")
    if not csc.get("readOnlyRootFilesystem"):
        errors.append("readOnlyRootFilesystem is not set")
    if csc.get("allowPrivilegeEscalation") is not False:
        errors.append("allowPrivilegeEscalation is not false")
    if "ALL" not in csc.get("capabilities", {}).get("drop", []):
        errors.append("capabilities do not drop ALL")

    # Extended resources: requests == limits; Neuron nodes: every NeuronCore of the instance type.
    resources = container.get("resources", {})
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    for name in set(requests) | set(limits):
        if "/" in name and str(requests.get(name)) != str(limits.get(name)):
            errors.append(f"extended resource {name}: requests {requests.get(name)} != limits {limits.get(name)}")
    instance_type = (spec.get("nodeSelector") or {}).get("node.kubernetes.io/instance-type")
    if instance_type in NEURONCORES_PER_INSTANCE:
        want = NEURONCORES_PER_INSTANCE[instance_type]
        if str(limits.get(NEURONCORE)) != str(want):
            errors.append(f"{instance_type} has {want} NeuronCores; the pod asks for {limits.get(NEURONCORE)}")
    elif NEURONCORE in limits:
        errors.append(f"{NEURONCORE} requested without an instance-type node selector")

    # Service: both ports, by name, gRPC marked as such.
    if not selects(service["spec"]["selector"], pod_labels):
        errors.append("Service selector does not match the pods")
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    for name in ("http", "grpc"):
        if service_ports.get(name, {}).get("targetPort") not in (name, ports.get(name)):
            errors.append(f"Service port {name} does not target the container's {name} port")
    if service_ports.get("grpc", {}).get("appProtocol") != "grpc":
        errors.append("Service grpc port lacks appProtocol: grpc")

    for pdb in (o for o in objects if o.get("kind") == "PodDisruptionBudget"):
        if not selects(pdb["spec"]["selector"]["matchLabels"], pod_labels):
            errors.append("PodDisruptionBudget selector does not match the pods")
    for hpa in (o for o in objects if o.get("kind") == "HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        if (target["kind"], target["name"]) != ("Deployment", deployment["metadata"]["name"]):
            errors.append(f"HPA targets {target['kind']}/{target['name']}, not the Deployment")
        if "replicas" in deployment["spec"]:
            errors.append("Deployment sets replicas although an HPA owns the count")
        for metric in hpa["spec"]["metrics"]:
            name = metric.get("pods", {}).get("metric", {}).get("name")
            if metric["type"] != "Pods" or name != "sluice_capacity_utilization":
                errors.append(f"HPA metric {metric['type']} {name}: expected Pods sluice_capacity_utilization")
    for monitor in (o for o in objects if o.get("kind") == "ServiceMonitor"):
        if not selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]):
            errors.append("ServiceMonitor selector does not match the Service")
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint.get("port") not in service_ports or endpoint.get("path") != "/metrics":
                errors.append(f"ServiceMonitor endpoint {endpoint} is not the Service's http /metrics")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes-version", action="append", required=True)
    parser.add_argument("--crd-dir", required=True)
    parser.add_argument("--no-chart-checks", action="store_true", help="schemas only (for other manifests)")
    parser.add_argument("manifest")
    args = parser.parse_args()
    try:
        objects = [o for o in yaml.safe_load_all(pathlib.Path(args.manifest).read_text()) if o]
    except (OSError, yaml.YAMLError) as e:
        print(f"{args.manifest}: {e}", file=sys.stderr)
        return 2
    if not objects:
        print(f"{args.manifest}: no objects", file=sys.stderr)
        return 2
    errors = validate_schemas(objects, args.kubernetes_version, load_crd_schemas(args.crd_dir))
    if not args.no_chart_checks:
        errors += check_chart(objects)
    for error in errors:
        print(f"FAIL {args.manifest}: {error}")
    kinds = ", ".join(sorted(object_name(o) for o in objects))
    print(f"{args.manifest}: {len(objects)} objects ({kinds}) against Kubernetes "
          f"{', '.join(args.kubernetes_version)}: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
